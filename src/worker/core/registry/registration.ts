/**
 * Registration's retries: a worker reports its status until a router takes it. An unreachable
 * router is retried, the next configured router at once and a pause only after a whole round of
 * them failed (the pause doubling each round), up to `retriesPerRouter` more attempts per router;
 * while the routers answer as standbys (a shared log whose routers are still electing a leader,
 * or waiting out the lease an earlier run left), it waits up to `leaderWaitMs`, pausing after each round; any other refusal ends
 * it at once. Pure: the time is an argument; the registry client sends the reports, sleeps and
 * logs.
 */

/** How registration retries. */
export interface RegistrationPolicy {
  /** The routers as configured (`--router`), for messages. */
  readonly routers: string;
  /** How many routers that names. */
  readonly routerCount: number;
  /** Retries after the first attempt while a router is unreachable, per router. */
  readonly retriesPerRouter: number;
  /** The pause after the first round of unreachable routers; doubles for each later round. */
  readonly retryDelayMs: number;
  /** How long to wait while no router leads, in ms. */
  readonly leaderWaitMs: number;
}

/** Where a registration stands. */
export interface Registration {
  /** Attempts made and failed so far. */
  readonly failedAttempts: number;
  /** Of those, the ones whose router was unreachable (or refused). */
  readonly unreachable: number;
  /** When the routers first answered that none leads (epoch ms); null: they have not. */
  readonly leaderlessSince: number | null;
}

/** A registration before its first attempt. */
export const REGISTRATION_START: Registration = {
  failedAttempts: 0,
  unreachable: 0,
  leaderlessSince: null,
};

/** Why one status report failed, as the retries tell failures apart. */
export interface FailedReport {
  /**
   * `leaderless`: a standby's refusal (naming no leader, or one that has not taken the lead yet);
   * `unreachable`: the router did not answer
   * (UNAVAILABLE, DEADLINE_EXCEEDED); `refused`: any other answer.
   */
  readonly kind: 'leaderless' | 'unreachable' | 'refused';
  /** The router the report went to. */
  readonly router: string;
  /** Its answer, on one line. */
  readonly details: string;
  /** For an unreachable router, what to change (which side speaks what), when known. */
  readonly diagnosis: string | null;
}

/** What registration does after a failed report. */
export type RegistrationStep =
  | {
      readonly next: 'retry';
      readonly registration: Registration;
      /** The pause before the next attempt (0: at once). */
      readonly delayMs: number;
      /** Dial the next attempt on a fresh channel (after an unreachable router). */
      readonly freshChannel: boolean;
      /** What to warn about before pausing; null: nothing (the next router is tried at once). */
      readonly warning:
        | { readonly kind: 'leaderless'; readonly waitedMs: number }
        | { readonly kind: 'unreachable'; readonly attempt: number; readonly error: string }
        | null;
    }
  | { readonly next: 'give-up'; readonly problem: string };

function duration(ms: number): string {
  return ms < 1_000 ? `${ms} ms` : `${Math.round(ms / 1_000)} s`;
}

/** The step after `failed`, the report of attempt `registration.failedAttempts + 1`, at `now`. */
export function afterFailedReport(
  registration: Registration,
  failed: FailedReport,
  policy: RegistrationPolicy,
  now: number,
): RegistrationStep {
  const attempt = registration.failedAttempts;
  if (failed.kind === 'leaderless') {
    // The routers run and are electing a leader: not a retry of an unreachable one.
    const since = registration.leaderlessSince ?? now;
    const waitedMs = now - since;
    if (waitedMs >= policy.leaderWaitMs) {
      return {
        next: 'give-up',
        problem: `no router led within ${duration(policy.leaderWaitMs)}: ${failed.router} answered "${failed.details}"`,
      };
    }
    const pause = (attempt + 1) % policy.routerCount === 0;
    return {
      next: 'retry',
      registration: { ...registration, failedAttempts: attempt + 1, leaderlessSince: since },
      delayMs: pause ? policy.retryDelayMs : 0,
      freshChannel: false,
      warning: pause ? { kind: 'leaderless', waitedMs } : null,
    };
  }
  const unreachable = registration.unreachable + 1;
  if (failed.kind === 'refused') {
    return {
      next: 'give-up',
      problem: `the router at ${failed.router} refused the status report: ${failed.details}`,
    };
  }
  const why = failed.diagnosis === null ? failed.details : `${failed.details}; ${failed.diagnosis}`;
  // Every router gets the retries.
  if (unreachable > policy.retriesPerRouter * policy.routerCount) {
    return {
      next: 'give-up',
      problem: `the router at ${policy.routers} is unreachable after ${unreachable} attempts: ${why}`,
    };
  }
  const round = Math.floor((unreachable - 1) / policy.routerCount);
  // The next router at once; a pause only after a whole round of them failed.
  const delayMs = unreachable % policy.routerCount !== 0 ? 0 : policy.retryDelayMs * 2 ** round;
  return {
    next: 'retry',
    registration: { ...registration, failedAttempts: attempt + 1, unreachable },
    delayMs,
    freshChannel: true,
    warning: { kind: 'unreachable', attempt: unreachable, error: why },
  };
}
