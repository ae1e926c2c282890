/**
 * The executor's zygote processes (src/executor/readie_executor/zygote.py) seen from the worker:
 * a resident template per checkpoint, or a one-off cold start. Both report on stdout, one JSON
 * event per line, for the containers they start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import type { ContainerExit } from '../core/sandbox/exit-cause.js';
import type { ContainerSpec } from '../core/sandbox/container-spec.js';
import { parseZygoteEvent, type ZygoteEvent } from '../core/sandbox/zygote-events.js';

/** The directory holding the `readie_executor` package. */
export const EXECUTOR_DIR = fileURLToPath(new URL('../../executor', import.meta.url));

export type { ZygoteEvent } from '../core/sandbox/zygote-events.js';

/** A container could not be started by its zygote; says why. */
export class SpawnError extends Error {
  override readonly name = 'SpawnError';
}

/** A started container's first process, as the worker tracks it. */
export interface ContainerProcess {
  /** Host pid of the container's pid 1 (the executor). */
  readonly pid: number;
  /** Resolves once the container's pid 1 is gone, with how it ended. */
  readonly exited: Promise<ContainerExit>;
  /**
   * Resolves once the container has its own network namespace (it reports that only in the
   * egress mode, where the worker then attaches slirp4netns); never resolves otherwise.
   */
  readonly network: Promise<void>;
}

/** How to run the executor's Python. */
export interface ZygoteLaunch {
  readonly python: string;
  readonly log: Logger;
}

function pythonArgs(extra: readonly string[]): string[] {
  // -s: no user site; -E: ignore PYTHON* variables; -B: write no bytecode; -m from the cwd.
  return ['-s', '-E', '-B', '-m', 'readie_executor', ...extra];
}

interface Pending {
  resolveSpawned: (pid: number) => void;
  rejectSpawned: (error: Error) => void;
  resolveExited: (exit: ContainerExit) => void;
  resolveNetwork: () => void;
  spawned: boolean;
  sandboxError?: string;
}

/** Reads a zygote's event lines and routes container events to their waiters. */
class EventRouter {
  private readonly pending = new Map<string, Pending>();
  private closed = false;
  readonly lifecycle: ((event: ZygoteEvent) => void)[] = [];

  constructor(child: ChildProcess, log: Logger) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const parsed = parseZygoteEvent(line);
      if (!parsed.ok) {
        log.warn(
          { line: line.slice(0, 200), problem: parsed.problem },
          'zygote wrote a line that is not an event',
        );
        return;
      }
      this.route(parsed.event);
    });
    child.stdout!.on('close', () => this.close());
    createInterface({ input: child.stderr! }).on('line', (line) =>
      log.warn({ stderr: line.slice(0, 500) }, 'zygote stderr'),
    );
  }

  private route(event: ZygoteEvent): void {
    if (event.event === 'ready' || event.event === 'failed') {
      for (const listener of this.lifecycle) listener(event);
      return;
    }
    if (event.event === 'seeded') return;
    const waiter = this.pending.get(event.container);
    if (!waiter) return;
    switch (event.event) {
      case 'spawned':
        waiter.spawned = true;
        waiter.resolveSpawned(event.pid);
        return;
      case 'spawn-failed':
        this.pending.delete(event.container);
        waiter.rejectSpawned(new SpawnError(event.error));
        waiter.resolveExited({ code: null, signal: null, sandboxError: event.error });
        return;
      case 'network':
        // It may come before `spawned`: the container and its spawner write independently.
        waiter.resolveNetwork();
        return;
      case 'sandbox-failed':
        waiter.sandboxError = event.error;
        return;
      case 'exited': {
        this.pending.delete(event.container);
        const exit: ContainerExit = {
          code: event.code,
          signal: event.signal,
          ...(waiter.sandboxError !== undefined ? { sandboxError: waiter.sandboxError } : {}),
        };
        if (!waiter.spawned) {
          const why = waiter.sandboxError === undefined ? '' : `: ${waiter.sandboxError}`;
          waiter.rejectSpawned(new SpawnError(`the container exited at once${why}`));
        }
        waiter.resolveExited(exit);
        return;
      }
    }
  }

  /** Registers a container before asking for it; resolves once it has a pid. */
  expect(containerId: string): Promise<ContainerProcess> {
    if (this.closed) return Promise.reject(new SpawnError('the zygote is gone'));
    let resolveExited!: (exit: ContainerExit) => void;
    const exited = new Promise<ContainerExit>((resolve) => (resolveExited = resolve));
    let resolveNetwork!: () => void;
    const network = new Promise<void>((resolve) => (resolveNetwork = resolve));
    return new Promise<ContainerProcess>((resolve, reject) => {
      this.pending.set(containerId, {
        resolveSpawned: (pid) => resolve({ pid, exited, network }),
        rejectSpawned: reject,
        resolveExited,
        resolveNetwork,
        spawned: false,
      });
    });
  }

  /** Forgets a container whose spawn request could not even be sent. */
  forget(containerId: string): void {
    this.pending.delete(containerId);
  }

  private close(): void {
    this.closed = true;
    for (const [, waiter] of this.pending) {
      if (!waiter.spawned) waiter.rejectSpawned(new SpawnError('the zygote exited'));
      waiter.resolveExited({
        code: null,
        signal: null,
        lost: true,
        ...(waiter.sandboxError !== undefined ? { sandboxError: waiter.sandboxError } : {}),
      });
    }
    this.pending.clear();
  }
}

/** A resident template: a zygote that imported a checkpoint's modules and forks containers. */
export class TemplateZygote {
  private alive = true;
  /** Resolves when the template process exits. */
  readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    private readonly events: EventRouter,
    /** What the template reported when ready. */
    readonly ready: Extract<ZygoteEvent, { event: 'ready' }>,
  ) {
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      else child.once('exit', () => resolve());
    });
    void this.exited.then(() => (this.alive = false));
  }

  /**
   * Starts a template that imports `modules` (and runs the setup in `setupFile`, if any); resolves
   * once it is ready (or rejects why not).
   */
  static start(
    launch: ZygoteLaunch,
    checkpointId: string,
    modules: readonly string[],
    timeoutMs: number,
    setupFile?: string,
  ): Promise<TemplateZygote> {
    const args = ['--checkpoint', checkpointId, '--modules', modules.join(',')];
    if (setupFile !== undefined) args.push('--setup', setupFile);
    return TemplateZygote.launch(launch, args, { checkpointId }, timeoutMs);
  }

  /**
   * Starts a resident zygote with `args` (a template, or the CRIU backend's launcher) that forks
   * containers on request; resolves once it says it is ready.
   */
  static launch(
    launch: ZygoteLaunch,
    args: readonly string[],
    logBindings: Readonly<Record<string, string>>,
    timeoutMs: number,
  ): Promise<TemplateZygote> {
    const child = spawn(launch.python, pythonArgs([...args, '--worker-pid', String(process.pid)]), {
      cwd: EXECUTOR_DIR,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: zygoteEnv(),
    });
    const events = new EventRouter(child, launch.log.child(logBindings));
    // A template that died makes its stdin fail (EPIPE); its exit is what the backend acts on.
    child.stdin?.on('error', () => undefined);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new SpawnError(`the zygote was not ready (imports, setup) within ${timeoutMs} ms`));
      }, timeoutMs);
      const settle = (error: Error | null, event?: Extract<ZygoteEvent, { event: 'ready' }>) => {
        clearTimeout(timer);
        if (error) reject(error);
        else resolve(new TemplateZygote(child, events, event!));
      };
      events.lifecycle.push((event) => {
        if (event.event === 'ready') settle(null, event);
        else if (event.event === 'failed') settle(new SpawnError(event.error));
      });
      child.once('error', (error) =>
        settle(new SpawnError(`cannot run ${launch.python}: ${error.message}`)),
      );
      child.once('exit', (code, signal) =>
        settle(
          new SpawnError(`the template exited (${signal ?? `code ${code}`}) before it was ready`),
        ),
      );
    });
  }

  /** Whether the template process still runs. */
  get running(): boolean {
    return this.alive;
  }

  /** The template's pid. */
  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** Forks a container from the template (`extra` fields reach the zygote with the spec). */
  fork(
    spec: ContainerSpec,
    extra: Readonly<Record<string, unknown>> = {},
  ): Promise<ContainerProcess> {
    if (!this.alive || !this.child.stdin?.writable) {
      return Promise.reject(new SpawnError('the template process is not running'));
    }
    const started = this.events.expect(spec.container);
    // One short line per spawn: the pipe's buffer takes it without waiting for a drain.
    this.child.stdin.write(`${JSON.stringify({ op: 'spawn', spec: { ...spec, ...extra } })}\n`);
    return started;
  }

  /** Stops the template (its containers keep running). */
  stop(): void {
    this.child.stdin?.end();
    this.child.kill('SIGKILL');
  }
}

/**
 * Runs a one-container zygote (a cold start) with `args` and resolves
 * once its container has a pid.
 */
export function startOneContainer(
  launch: ZygoteLaunch,
  args: readonly string[],
  containerId: string,
  onChild?: (child: ChildProcess) => void,
): Promise<ContainerProcess> {
  const child = spawn(launch.python, pythonArgs(['--worker-pid', String(process.pid), ...args]), {
    cwd: EXECUTOR_DIR,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: zygoteEnv(),
  });
  const events = new EventRouter(child, launch.log.child({ containerId }));
  const started = events.expect(containerId);
  child.once('error', (error) => launch.log.error({ err: error.message }, 'cannot start a zygote'));
  onChild?.(child);
  return started;
}

/** Starts one container cold: a fresh interpreter that imported only the executor. */
export function coldStart(launch: ZygoteLaunch, spec: ContainerSpec): Promise<ContainerProcess> {
  return startOneContainer(launch, ['--once', JSON.stringify(spec)], spec.container);
}

/** Runs the executor module with `args` to completion, collecting its events (a CRIU seed). */
export function runZygote(
  launch: ZygoteLaunch,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ code: number | null; events: ZygoteEvent[] }> {
  const child = spawn(launch.python, pythonArgs(['--worker-pid', String(process.pid), ...args]), {
    cwd: EXECUTOR_DIR,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: zygoteEnv(),
  });
  const events: ZygoteEvent[] = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    const parsed = parseZygoteEvent(line);
    if (parsed.ok) events.push(parsed.event);
    else launch.log.warn({ line: line.slice(0, 200), problem: parsed.problem }, 'not an event');
  });
  createInterface({ input: child.stderr }).on('line', (line) =>
    launch.log.warn({ stderr: line.slice(0, 500) }, 'zygote stderr'),
  );
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', () => undefined);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, events });
    });
  });
}

function zygoteEnv(): NodeJS.ProcessEnv {
  // Only what Python needs: never the worker's own environment (it may hold READIE_AUTH_TOKEN).
  return { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LANG: 'C.UTF-8' };
}
