/** Child processes for tests: TypeScript scripts run under tsx, their stdout read line by line. */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** A running child with its stdout as lines. */
export interface Child {
  readonly process: ChildProcess;
  /** Every stdout line so far. */
  readonly lines: string[];
  /** Resolves with the first line (past or future) matching `pattern`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Resolves with the exit code (or signal) once the child is gone. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything written to stderr. */
  stderr(): string;
}

/**
 * Children started while a test runs (between the root beforeEach and afterEach hooks); those a
 * `before` hook starts for a whole suite are the suite's to stop.
 */
let testChildren: Set<ChildProcess> | undefined;

/** Starts tracking the children the next test starts. */
export function trackTestChildren(): void {
  testChildren = new Set();
}

/** Kills every child the test that just ended started and left running. */
export function killStrayChildren(): void {
  for (const child of testChildren ?? []) child.kill('SIGKILL');
  testChildren = undefined;
}

/** Starts `node --import tsx <script> ...args` with the script given relative to test/support. */
export function runScript(script: string, args: readonly string[]): Child {
  const path = fileURLToPath(new URL(script, import.meta.url));
  return watch(
    spawn(process.execPath, ['--import', 'tsx', path, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
}

/**
 * Starts `node bin/readie.js ...args` (the real command) with extra environment variables;
 * `detached` gives it its own process group, as a shell gives a foreground job, so a test can
 * signal the group the way a terminal's Ctrl-C does.
 */
export function runReadie(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  { detached = false }: { detached?: boolean } = {},
): Child {
  const bin = fileURLToPath(new URL('../../bin/readie.js', import.meta.url));
  return watch(
    spawn(process.execPath, [bin, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
      detached,
    }),
  );
}

/** Follows a child's stdout line by line. */
function watch(child: ChildProcess): Child {
  const owner = testChildren;
  owner?.add(child);
  child.on('exit', () => owner?.delete(child));
  const lines: string[] = [];
  const listeners = new Set<(line: string) => void>();
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
    lines.push(line);
    for (const listener of listeners) listener(line);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    process: child,
    lines,
    exited,
    stderr: () => stderr,
    waitFor(pattern, timeoutMs = 20_000) {
      const seen = lines.find((line) => pattern.test(line));
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(
            new Error(`no line matching ${pattern} within ${timeoutMs} ms; stderr: ${stderr}`),
          );
        }, timeoutMs);
        const listener = (line: string) => {
          if (!pattern.test(line)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(line);
        };
        listeners.add(listener);
        void exited.then(() => {
          if (!listeners.has(listener)) return;
          clearTimeout(timer);
          listeners.delete(listener);
          reject(new Error(`child exited before a line matching ${pattern}; stderr: ${stderr}`));
        });
      });
    },
  };
}
