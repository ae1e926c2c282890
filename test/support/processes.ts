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

const running = new Set<ChildProcess>();

/** Kills every child `runScript` started that is still running (run after each test). */
export function killStrayChildren(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

/** Starts `node --import tsx <script> ...args` with the script given relative to test/support. */
export function runScript(script: string, args: readonly string[]): Child {
  const path = fileURLToPath(new URL(script, import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', path, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.on('exit', () => running.delete(child));
  const lines: string[] = [];
  const listeners = new Set<(line: string) => void>();
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  createInterface({ input: child.stdout }).on('line', (line) => {
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
