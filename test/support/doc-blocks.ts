/**
 * Following a doc literally: its marked command blocks (`<!-- doc-test: KIND -->` before a sh
 * fence) run in order with bash, from the checkout, with `readie` on the PATH, and only the values
 * of the doc's own variables changed (ports to free ones, directories to temporary ones). Kinds:
 * `env NAME` (the variables: every later block starts with the one the test picks), `run` (must
 * exit 0), `expect "REGEX"` (must exit 0 and print that), `start NAME "REGEX"` (a process left
 * running, ready once its output shows REGEX; stopped with SIGTERM, then SIGKILL, at the end).
 */
import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './replay.js';

/** One marked block of a doc. */
export interface DocBlock {
  readonly kind: 'env' | 'run' | 'start' | 'expect';
  /** `start` and `env`: a name; `expect`, `run`: unused. */
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

/** The names an env block exports, in order. */
export function exportedNames(env: string): string[] {
  return [...env.matchAll(/^export ([A-Z_]+)=/gm)].map((match) => match[1] as string);
}

/** The env block with each of `values`' variables set to its value (each must be there). */
export function substituted(
  env: string,
  values: Readonly<Record<string, string>>,
  doc: string,
): string {
  let script = env;
  for (const [name, value] of Object.entries(values)) {
    const pattern = new RegExp(`^export ${name}=\\S+`, 'm');
    if (!pattern.test(script)) throw new Error(`${doc} no longer sets ${name}`);
    script = script.replace(pattern, `export ${name}=${value}`);
  }
  return script;
}

/** A process a `start` block left running. */
interface Started {
  readonly name: string;
  readonly child: ChildProcess;
  readonly output: () => string;
}

/** One walk through a doc's blocks: where they run, and what they started. */
export class DocWalk {
  readonly #doc: string;
  readonly #prelude: string;
  readonly environment: Record<string, string>;
  readonly #started: Started[] = [];

  /**
   * `doc` names the file in failures; `prelude` (the env block, substituted) starts every block;
   * `dir` (a temporary directory) gets a `bin/readie` that runs the checkout's, as
   * `npm install -g .` puts it on the PATH.
   */
  constructor(doc: string, prelude: string, dir: string) {
    this.#doc = doc;
    this.#prelude = prelude;
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    writeFileSync(
      join(bin, 'readie'),
      `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, 'bin', 'readie.js')}" "$@"\n`,
    );
    chmodSync(join(bin, 'readie'), 0o755);
    this.environment = {
      PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      HOME: dir,
      LANG: 'C.UTF-8',
    };
  }

  /** A block's script with the doc's variables in front. */
  script(body: string): string {
    return `set -eo pipefail\n${this.#prelude}\n${body}\n`;
  }

  /** Runs one block (a `start` waits until it is ready); fails the test when it does not work. */
  async run(block: DocBlock, timeoutMs = 240_000): Promise<void> {
    const where = `${this.#doc}:${block.line} (${block.kind}${block.name ? ` ${block.name}` : ''})`;
    if (block.kind === 'start') {
      let output = '';
      const child = spawn('bash', ['-c', this.script(block.script)], {
        cwd: ROOT,
        env: this.environment,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      this.#started.push({ name: block.name, child, output: () => output });
      const started = Date.now();
      while (!block.pattern!.test(output)) {
        // Exited (by a code or a signal), or still running past the time allowed: say which.
        const ended =
          child.exitCode !== null
            ? `it exited with code ${child.exitCode}`
            : child.signalCode !== null
              ? `it was killed by ${child.signalCode}`
              : Date.now() - started > timeoutMs
                ? `it still runs after ${Math.round((Date.now() - started) / 1000)} s`
                : null;
        if (ended !== null) {
          expect.fail(`${where} did not start (${ended}):\n${output.slice(-3000)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return;
    }
    const run = spawnSync('bash', ['-c', this.script(block.script)], {
      cwd: ROOT,
      env: this.environment,
      encoding: 'utf8',
      timeout: timeoutMs,
    });
    const output = `${run.stdout}${run.stderr}`;
    const context = [
      output,
      ...this.#started.map((process) => `--- ${process.name}:\n${process.output().slice(-2000)}`),
    ].join('\n');
    expect(run.status, `${where} failed:\n${context}`).to.equal(0);
    if (block.kind === 'expect') {
      expect(output, `${where} printed:\n${context}`).to.match(block.pattern!);
    }
  }

  /** Stops what the blocks started, last first: SIGTERM to each process group, SIGKILL after `graceMs`. */
  async stop(graceMs = 60_000): Promise<void> {
    for (const { child } of this.#started.reverse()) {
      if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) continue;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      const signal = (name: NodeJS.Signals) => {
        try {
          process.kill(-child.pid!, name);
        } catch {
          // already gone
        }
      };
      signal('SIGTERM');
      const timer = setTimeout(() => signal('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }
  }
}
