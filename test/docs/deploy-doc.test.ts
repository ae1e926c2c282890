/**
 * docs/deploy.md, followed literally on one machine: its single-machine variant (localhost names,
 * loopback binds) and then every marked command block (`<!-- doc-test: KIND -->` before a sh
 * fence) in order with bash, from the checkout (test/support/doc-blocks.ts). Only the ports
 * become free ones and the directories temporary ones. The router, the worker and nginx (Debian's,
 * real) are the doc's commands; the clients must get their answers through nginx over TLS. When
 * the doc and the product drift apart, this fails.
 */
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { PYTHON_PACKAGES } from '../../src/cluster/prerequisites.js';
import { docBlocks, DocWalk, exportedNames, substituted } from '../support/doc-blocks.js';
import { freePort } from '../support/e2e-cluster.js';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

const DOC = 'docs/deploy.md';

describe('docs/deploy.md, followed literally, gives a working TLS cluster', function () {
  this.timeout(600_000);
  let conf = '';
  let logs = '';
  let walk: DocWalk | undefined;
  /** The doc's variables with this run's values. */
  let prelude = '';
  const markdown = readFileSync(join(ROOT, DOC), 'utf8');

  after(async () => {
    if (existsSync(join(logs, 'nginx.pid'))) {
      spawnSync('nginx', ['-c', join(conf, 'nginx.conf'), '-s', 'stop']);
    }
    await walk?.stop(10_000);
    cleanTempDirs();
  });

  it('lists every package a worker needs, and CRIU before the worker starts', () => {
    const apt = /^apt-get install -y ((?:\\\n|.)*)$/m.exec(markdown)?.[1] ?? '';
    const packages = apt.replace(/\\\n/g, ' ').split(/\s+/);
    for (const needed of [...PYTHON_PACKAGES, 'python3-numpy', 'nginx', 'openssl']) {
      expect(packages, `the apt line installs ${needed}`).to.include(needed);
    }
    const criu = markdown.indexOf('## CRIU on workers');
    const worker = docBlocks(markdown).find((block) => block.name === 'worker');
    expect(criu, 'a CRIU section').to.be.above(0);
    expect(markdown.slice(0, criu).split('\n').length).to.be.below(worker!.line);
  });

  it('runs every marked block on one machine: certificates, credentials, router, worker, nginx, both clients, status', async () => {
    const blocks = docBlocks(markdown);
    const envs = blocks.filter((block) => block.kind === 'env');
    const single = envs.find((block) => block.name === 'single-machine');
    const cluster = envs.find((block) => block.name === 'cluster');
    expect(single, 'a single-machine variant').to.not.equal(undefined);
    expect(exportedNames(single!.script), 'the variant sets what the cluster sets').to.deep.equal(
      exportedNames(cluster!.script),
    );
    const steps = blocks.filter((block) => block.kind !== 'env');
    expect(steps.map((block) => block.kind)).to.include.members(['run', 'start', 'expect']);

    const dir = tempDir('readie-deploy-doc-');
    conf = join(dir, 'etc');
    logs = join(dir, 'log');
    // The names stay the doc's (localhost, 127.0.0.1); ports and directories are this run's.
    prelude = substituted(
      single!.script,
      {
        ROUTER_PORT: String(await freePort()),
        WORKER_PORT: String(await freePort()),
        PUBLIC_PORT: String(await freePort()),
        CONF: conf,
        STATE: join(dir, 'state'),
        LOGS: logs,
      },
      DOC,
    );
    walk = new DocWalk(DOC, prelude, dir);
    for (const block of steps) await walk.run(block);
  });

  it('a client that speaks plaintext to nginx is told nginx speaks TLS and to unset READIE_INSECURE', function () {
    if (prelude === '') this.skip();
    const client = [
      'export READIE_ADDRESS="$PUBLIC_HOST:$PUBLIC_PORT" READIE_INSECURE=1',
      'export READIE_AUTH_TOKEN="$(cat "$CONF/tenant-acme.token")"',
      'PYTHONPATH="$PWD/python" /usr/bin/python3 -c \'import readie\nadd = readie.remote(lambda: 1)\ntry:\n    add()\nexcept readie.ClusterUnavailableError as error:\n    print(error)\n\'',
    ].join('\n');
    const run = spawnSync('bash', ['-c', walk!.script(client)], {
      cwd: ROOT,
      env: walk!.environment,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status, run.stderr).to.equal(0);
    expect(run.stdout).to.include(
      'speaks TLS but this client speaks plaintext: unset READIE_INSECURE',
    );
    expect(run.stderr, 'grpc stays quiet').to.equal('');
  });
});
