/**
 * `readie router` child processes on a JetStream log (a leader and standbys) for the tests of
 * what finds the leader: clients' address lists, workers' `--router a,b`, nginx over both.
 */
import { openEventLog, type ClusterEvent } from '../../src/events/index.js';
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

/** Options of one router child process, besides those of `ChildRouterOptions`. */
export interface SpawnRouterOptions extends ChildRouterOptions {
  /** More arguments after the usual ones. */
  readonly extra?: readonly string[];
}

/**
 * Spawns `readie router` on `location` (plaintext, `--auth none`, the tests' lease and probe
 * interval), not waiting for anything.
 */
export function spawnRouter(
  location: string,
  routerId: string,
  options: SpawnRouterOptions = {},
): Child {
  return runReadie(
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
      ...(options.extra ?? []),
    ],
    {
      LEADER_LEASE: `${LEASE_MS}ms`,
      PROBE_INTERVAL: `${PROBE_MS}ms`,
      REAPER_INTERVAL: '1h',
      LOG_LEVEL: 'info',
      ...options.env,
    },
  );
}

/** Starts `readie router` on `location`; resolves once it listens (leading or standing by). */
export async function startChildRouter(
  location: string,
  routerId: string,
  options: ChildRouterOptions = {},
): Promise<ChildRouter> {
  const child = spawnRouter(location, routerId, options);
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

/** Every event of the log at `location` (a directory or a `nats://` stream), read once. */
export async function readLog(location: string): Promise<ClusterEvent[]> {
  const log = await openEventLog(location, { readOnly: true });
  try {
    const events: ClusterEvent[] = [];
    for await (const event of log.read()) events.push(event);
    return events;
  } finally {
    await log.close();
  }
}

/** Waits until the log at `location` holds an event of `type` (`what` names it in a timeout). */
export async function untilLogged(
  location: string,
  type: ClusterEvent['type'],
  what: string,
  timeoutMs = 30_000,
): Promise<void> {
  await eventuallyAsync(
    async () => (await readLog(location)).some((event) => event.type === type),
    what,
    timeoutMs,
  );
}
