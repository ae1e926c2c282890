/**
 * docs/tenant-routing.md's "On one machine", followed literally (test/support/doc-blocks.ts): the
 * screening example's catalogue and two tenants' tokens, `readie up --catalogue --tokens-file`,
 * then the operator's pin changes and a tenant's pinned call, as the doc has them. Only `D` (a
 * temporary directory) and `PORT` (a free one) change.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { docBlocks, DocWalk, substituted } from '../support/doc-blocks.js';
import { freePortRun } from '../support/e2e-cluster.js';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const DOC = 'docs/tenant-routing.md';

describe('docs/tenant-routing.md, followed literally, pins versions on a local cluster', function () {
  this.timeout(600_000);
  let walk: DocWalk | undefined;

  after(async () => {
    await walk?.stop();
    cleanTempDirs();
  });

  it('runs every marked block: the example catalogue and tokens, readie up, the pin changes and a pinned call', async () => {
    const markdown = readFileSync(join(ROOT, DOC), 'utf8');
    expect(markdown, 'the doc links the working recipe').to.include(
      '(../examples/screening/README.md)',
    );
    const [env, ...steps] = docBlocks(markdown);
    expect(env?.kind).to.equal('env');
    expect(steps.map((block) => block.kind)).to.deep.equal(['run', 'start', 'expect']);
    const dir = tempDir('readie-routing-doc-');
    // The workers take the two ports after the router's: three free ones in a row, below the
    // ephemeral range (freePortRun), as readie up's tests have them (a port from freePort alone
    // left the workers' to chance).
    const port = await freePortRun(3);
    const prelude = substituted(
      env!.script,
      { D: join(dir, 'screening'), PORT: String(port) },
      DOC,
    );
    walk = new DocWalk(DOC, prelude, dir);
    for (const block of steps) await walk.run(block);
  });
});
