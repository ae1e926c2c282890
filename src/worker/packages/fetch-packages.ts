/**
 * The host side of an install: running the fetch command (pip download) in the worker's network
 * namespace, streaming its output, and making what it wrote readable by the container.
 */
import { spawn } from 'node:child_process';
import { chmod, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { InstallCommand } from '../core/packages/install-command.js';

/** The fetch failed: the message says how (the output came as log lines). */
export class FetchFailedError extends Error {
  override readonly name = 'FetchFailedError';
}

/** Runs `command`, handing each output line to `say`; rejects when it fails or `signal` aborts. */
export async function runFetch(
  command: InstallCommand,
  say: (line: string) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  signal.throwIfAborted();
  const [program, ...args] = command.argv;
  const child = spawn(program!, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    // Nothing of the worker's environment (its credentials) reaches pip.
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...command.env },
  });
  const kill = () => child.kill('SIGKILL');
  signal.addEventListener('abort', kill, { once: true });
  const lines: Promise<void>[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream }).on('line', (line) => {
      lines.push(say(line).catch(() => undefined));
    });
  }
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', (error) =>
        reject(new FetchFailedError(`could not run ${program}: ${error.message}`)),
      );
      child.once('close', (exitCode) => resolve(exitCode));
    });
    await Promise.all(lines);
    signal.throwIfAborted();
    if (code !== 0) throw new FetchFailedError(`fetching with pip exited with code ${code}`);
  } finally {
    signal.removeEventListener('abort', kill);
  }
}

/** Makes every file the fetch wrote in `dir` readable by the container's user. */
export async function shareFetched(dir: string): Promise<void> {
  for (const name of await readdir(dir)) await chmod(join(dir, name), 0o644);
}

/** Empties `dir` (the installed copies live in the container's own /tmp). */
export async function clearFetched(dir: string): Promise<void> {
  for (const name of await readdir(dir).catch(() => [])) {
    await rm(join(dir, name), { recursive: true, force: true });
  }
}
