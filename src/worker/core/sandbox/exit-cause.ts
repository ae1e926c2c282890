/** Turning a container's end into words a user can act on. Pure. */

/** How a container's first process ended, as its spawner reported it. */
export interface ContainerExit {
  /** Exit code, when it exited. */
  readonly code: number | null;
  /** Signal number, when a signal killed it. */
  readonly signal: number | null;
  /** The sandbox could not be entered; what failed. */
  readonly sandboxError?: string;
  /** The spawner vanished without reporting (its zygote died). */
  readonly lost?: boolean;
}

const SIGNAL_NAMES: Readonly<Record<number, string>> = {
  1: 'SIGHUP',
  2: 'SIGINT',
  3: 'SIGQUIT',
  4: 'SIGILL',
  5: 'SIGTRAP',
  6: 'SIGABRT',
  7: 'SIGBUS',
  8: 'SIGFPE',
  9: 'SIGKILL',
  11: 'SIGSEGV',
  13: 'SIGPIPE',
  15: 'SIGTERM',
  24: 'SIGXCPU',
  25: 'SIGXFSZ',
  31: 'SIGSYS',
};

/** The executor's exit code when its sandbox could not be entered (container.py). */
export const EXECUTOR_EXIT_SANDBOX_FAILED = 70;
/** The executor's exit code when it failed internally after entering its sandbox (container.py). */
export const EXECUTOR_EXIT_INTERNAL = 71;

/** A signal's name, e.g. SIGSEGV. */
export function signalName(signal: number): string {
  return SIGNAL_NAMES[signal] ?? `signal ${signal}`;
}

/** What happened, in one sentence, given whether the kernel's OOM killer acted. */
export function describeExit(
  exit: ContainerExit,
  memory: { readonly oomKilled: boolean; readonly limitText: string },
): string {
  if (exit.sandboxError !== undefined) {
    return `the container's sandbox could not start: ${exit.sandboxError}`;
  }
  if (memory.oomKilled) {
    return `the call ran out of memory: it was killed when it exceeded its memory budget of ${memory.limitText} (the container's limit); ask for more memory (the memory option of the call)`;
  }
  if (exit.lost) return 'the container vanished: its spawner died without reporting how';
  if (exit.signal !== null) {
    const name = signalName(exit.signal);
    const hint =
      exit.signal === 11 || exit.signal === 7
        ? ' (a crash in native code)'
        : exit.signal === 6
          ? ' (an abort, often a failed assertion in native code)'
          : exit.signal === 9
            ? ' (killed from outside the executor)'
            : '';
    return `the executor was killed by ${name}${hint}`;
  }
  if (exit.code === EXECUTOR_EXIT_SANDBOX_FAILED) {
    return "the container's sandbox could not start (code 70)";
  }
  if (exit.code === EXECUTOR_EXIT_INTERNAL) {
    return 'the executor failed internally and exited (code 71)';
  }
  return `the executor exited with code ${exit.code ?? 'unknown'} during the call (os._exit, sys.exit in a thread, or a fatal error)`;
}
