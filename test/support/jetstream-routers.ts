/**
 * `readie router` child processes on a JetStream log (a leader and standbys) for the tests of
 * what finds the leader: clients' address lists, workers' `--router a,b`, nginx over both.
 */
import { runReadie, type Child } from './processes.js';

/** The lease the tests run with, and the probe interval. */
export const LEASE_MS = 2_000;
export const PROBE_MS = 1_000;

/** A router child process and the address it listens on. */
export interface ChildRouter {
  readonly child: Child;
  readonly address: string;
  readonly routerId: string;
}

/** Options of one router. */
export interface ChildRouterOptions {
  readonly env?: Readonly<Record<string, string>>;
  /** `--listen` (default `127.0.0.1:0`). */
  readonly listen?: string;
}

/** Starts `readie router` on `location`; resolves once it listens (leading or standing by). */
export async function startChildRouter(
  location: string,
  routerId: string,
  options: ChildRouterOptions = {},
): Promise<ChildRouter> {
  const child = runReadie(
    [
      'router',
      '--listen',
      options.listen ?? '127.0.0.1:0',
      '--log',
      location,
      '--router-id',
      routerId,
      '--insecure',
      '--auth',
      'none',
    ],
    {
      LEADER_LEASE: `${LEASE_MS}ms`,
      PROBE_INTERVAL: `${PROBE_MS}ms`,
      REAPER_INTERVAL: '1h',
      LOG_LEVEL: 'info',
      ...options.env,
    },
  );
  const line = await child.waitFor(/"msg":"router serving"/, 60_000);
  const { address } = JSON.parse(line) as { address: string };
  return { child, address, routerId };
}

/** A leader (started first, waited until it leads) and a standby on `location`. */
export async function startLeaderAndStandby(
  location: string,
  options: ChildRouterOptions = {},
): Promise<{ leader: ChildRouter; standby: ChildRouter }> {
  const leader = await startChildRouter(location, 'router-a', options);
  await leader.child.waitFor(/took the lead/, 30_000);
  const standby = await startChildRouter(location, 'router-b', options);
  await standby.child.waitFor(/standing by/, 30_000);
  return { leader, standby };
}

/** SIGKILLs the router and waits for it to exit. */
export async function killRouter(router: ChildRouter): Promise<void> {
  if (router.child.process.exitCode === null && router.child.process.signalCode === null) {
    router.child.process.kill('SIGKILL');
  }
  await router.child.exited;
}

/** Waits until the async `check` holds, polling every 100 ms; fails with `what` after `timeoutMs`. */
export async function eventuallyAsync(
  check: () => Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
