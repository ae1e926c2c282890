import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../support/replay.js';

/**
 * The team's design brief is not part of the product: nothing shipped (docs, help texts, error
 * messages, comments, tests) may send a reader to it or to its numbered sections.
 */
const FORBIDDEN = /DESIGN\.md|§\s?\d/;

function trackedTextFiles(): string[] {
  const listed = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return listed
    .split('\n')
    .filter((path) => path !== '' && !/\.(pem|png|jpg|lock|mdb)$/.test(path));
}

describe('the product stands alone', () => {
  it('no file of the repository points at the design brief or its sections', () => {
    const hits: string[] = [];
    for (const path of trackedTextFiles()) {
      let text: string;
      try {
        text = readFileSync(join(ROOT, path), 'utf8');
      } catch {
        continue; // deleted in the work tree
      }
      text.split('\n').forEach((line, index) => {
        if (FORBIDDEN.test(line)) hits.push(`${path}:${index + 1}: ${line.trim()}`);
      });
    }
    expect(hits, hits.join('\n')).to.deep.equal([]);
  });
});
