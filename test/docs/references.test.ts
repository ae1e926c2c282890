import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { generatedSections, regenerated } from '../../tools/docs/reference.js';
import { SETTING_NAMES } from '../../src/shared/config.js';
import { WORKER_FLAGS } from '../../src/worker/options.js';
import { ROOT } from '../support/replay.js';

const doc = (name: string) => readFileSync(join(ROOT, 'docs', name), 'utf8');

describe('the settings and catalogue references are the code’s own definitions', () => {
  for (const name of ['settings.md', 'catalogue.md']) {
    it(`docs/${name} is what npm run docs:generate renders`, () => {
      const text = doc(name);
      expect(regenerated(text), `docs/${name} drifted: run npm run docs:generate`).to.equal(text);
    });
  }

  it('every generated section appears in a doc, and every setting and flag is listed', () => {
    const text = doc('settings.md') + doc('catalogue.md');
    for (const section of Object.keys(generatedSections())) {
      expect(text).to.include(`<!-- generated: ${section} (npm run docs:generate) -->`);
    }
    for (const name of SETTING_NAMES) expect(text).to.include(`\`${name}\``);
    for (const flag of WORKER_FLAGS) expect(text).to.include(`\`${flag.env}\``);
    for (const flag of [
      '--tls-cert <file>',
      '--worker-ca <file>',
      '--json',
      '--watch',
      '--router <hosts>',
    ]) {
      expect(text).to.include(flag);
    }
  });
});
