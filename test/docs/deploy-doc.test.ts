/**
 * docs/deploy.md, followed literally: its marked command blocks (`<!-- doc-test: KIND -->` before
 * a sh fence) run in order with bash, from the checkout, on this machine. Only the values of the
 * doc's own variables change: the host names become loopback names and addresses, the ports free
 * ones, the directories temporary ones (and `0.0.0.0` listens on loopback). The router, the
 * worker and nginx (Debian's, real) are the doc's commands; the clients must get their answers
 * through nginx over TLS. When the doc and the product drift apart, this fails.
 */
import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../support/e2e-cluster.js';
import { ROOT } from '../support/replay.js';
import { cleanTempDirs, tempDir } from '../support/temp.js';

/** One marked block of the doc. */
export interface DocBlock {
  readonly kind: 'env' | 'run' | 'start' | 'expect';
  /** `start`: a name; `expect`: unused. */
  readonly name: string;
  /** `start`: the output that says it is ready; `expect`: what the output must show. */
  readonly pattern: RegExp | null;
  readonly script: string;
  readonly line: number;
}

/** The marked sh blocks of a markdown text, in order. */
export function docBlocks(markdown: string): DocBlock[] {
  const blocks: DocBlock[] = [];
  const marker =
    /<!-- doc-test: (env|run|start|expect)(?: ([\w-]+))?(?: "([^"]*)")? -->\n```sh\n([\s\S]*?)\n```/g;
  for (const match of markdown.matchAll(marker)) {
    const [, kind, name, pattern, script] = match;
    blocks.push({
      kind: kind as DocBlock['kind'],
      name: name ?? '',
      pattern: pattern === undefined ? null : new RegExp(pattern),
      script: script ?? '',
      line: markdown.slice(0, match.index).split('\n').length,
    });
  }
  return blocks;
}

/** The env block with each of `values`' variables set to its value (each must be there). */
function substituted(env: string, values: Readonly<Record<string, string>>): string {
  let script = env;
  for (const [name, value] of Object.entries(values)) {
    const pattern = new RegExp(`^export ${name}=\\S+`, 'm');
    if (!pattern.test(script)) throw new Error(`docs/deploy.md no longer sets ${name}`);
    script = script.replace(pattern, `export ${name}=${value}`);
  }
  return script;
}

describe('docs/deploy.md, followed literally, gives a working TLS cluster', function () {
  this.timeout(600_000);
  const started: { name: string; child: ChildProcess; output: () => string }[] = [];
  let logs = '';
  let conf = '';
  /** The doc's variables with this run's values, and the environment the blocks ran in. */
  let prelude = '';
  let environment: Record<string, string> = {};

  after(() => {
    if (existsSync(join(logs, 'nginx.pid'))) {
      spawnSync('nginx', ['-c', join(conf, 'nginx.conf'), '-s', 'stop']);
    }
    for (const { child } of started.reverse()) {
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    cleanTempDirs();
  });

  it('runs every marked block: certificates, credentials, router, worker, nginx, both clients, status', async () => {
    const markdown = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
    const blocks = docBlocks(markdown);
    expect(blocks.map((block) => block.kind)).to.include.members(['env', 'run', 'start', 'expect']);
    const [env, ...steps] = blocks;
    expect(env?.kind, 'the first marked block sets the variables').to.equal('env');

    const dir = tempDir('readie-deploy-doc-');
    conf = join(dir, 'etc');
    logs = join(dir, 'log');
    // `readie` on the PATH, as `npm install -g .` puts it there.
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(
      join(bin, 'readie'),
      `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bin', 'readie.js')}" "$@"\n`,
    );
    chmodSync(join(bin, 'readie'), 0o755);
    prelude = substituted(env!.script, {
      // nginx checks the router's certificate by name (it cannot check an IP address), so the
      // router and nginx become `localhost`; the worker an address, as the router dials it.
      ROUTER_HOST: 'localhost',
      ROUTER_PORT: String(await freePort()),
      WORKER_HOST: '127.0.0.1',
      WORKER_PORT: String(await freePort()),
      PUBLIC_HOST: 'localhost',
      PUBLIC_PORT: String(await freePort()),
      CONF: conf,
      STATE: join(dir, 'state'),
      LOGS: logs,
    });
    environment = {
      PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      HOME: dir,
      LANG: 'C.UTF-8',
    };
    const script = (block: DocBlock) =>
      `set -eo pipefail\n${prelude}\n${block.script.replaceAll('0.0.0.0:', '127.0.0.1:')}\n`;

    for (const block of steps) {
      const where = `docs/deploy.md:${block.line} (${block.kind}${block.name ? ` ${block.name}` : ''})`;
      if (block.kind === 'start') {
        let output = '';
        const child = spawn('bash', ['-c', script(block)], {
          cwd: ROOT,
          env: environment,
          detached: true,
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        started.push({ name: block.name, child, output: () => output });
        const deadline = Date.now() + 240_000;
        while (!block.pattern!.test(output)) {
          if (child.exitCode !== null || Date.now() > deadline) {
            expect.fail(`${where} did not start:\n${output.slice(-3000)}`);
          }
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        continue;
      }
      const run = spawnSync('bash', ['-c', script(block)], {
        cwd: ROOT,
        env: environment,
        encoding: 'utf8',
        timeout: 240_000,
      });
      const output = `${run.stdout}${run.stderr}`;
      const context = [
        output,
        ...started.map((process) => `--- ${process.name}:\n${process.output().slice(-2000)}`),
      ].join('\n');
      expect(run.status, `${where} failed:\n${context}`).to.equal(0);
      if (block.kind === 'expect') {
        expect(output, `${where} printed:\n${context}`).to.match(block.pattern!);
      }
    }
  });

  it('a client that speaks plaintext to nginx is told nginx speaks TLS and to unset READIE_INSECURE', function () {
    if (prelude === '') this.skip();
    const client = [
      'export READIE_ADDRESS="$PUBLIC_HOST:$PUBLIC_PORT" READIE_INSECURE=1',
      'export READIE_AUTH_TOKEN="$(cat "$CONF/tenant-acme.token")"',
      'PYTHONPATH="$PWD/python" /usr/bin/python3 -c \'import readie\nadd = readie.remote(lambda: 1)\ntry:\n    add()\nexcept readie.ClusterUnavailableError as error:\n    print(error)\n\'',
    ].join('\n');
    const run = spawnSync('bash', ['-c', `set -eo pipefail\n${prelude}\n${client}\n`], {
      cwd: ROOT,
      env: environment,
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
