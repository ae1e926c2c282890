/**
 * Standbys sized to demand (docs/container-lifecycle.md, "Standbys"): per held checkpoint, a
 * worker keeps as many ready standbys as its recent demand for new containers of that checkpoint
 * needs: the most it started within any `burstMs` of the last `windowMs` (the worker remembers
 * demand for EXECUTOR_TTL, as long as it keeps an idle session container; a map that opens eight
 * sessions at once asks for eight; plain calls at 30 a second ask for 30, a second's worth), at
 * least `floor` (`--standby`) and at most `cap` (`--standby-max`), and always within the free slots
 * and memory (`standbyMemoryRoom`). Demand older than the window is forgotten, and the standbys
 * above the target then go. Pure: the time is an argument and the state a value.
 */

/** How standbys follow demand. */
export interface StandbyDemandPolicy {
  /** Standbys always kept per held checkpoint (`--standby`); 0 turns standbys off. */
  readonly floor: number;
  /** The most standbys demand keeps per checkpoint (`--standby-max`). */
  readonly cap: number;
  /** Demand is the most new containers started within this span (ms)... */
  readonly burstMs: number;
  /** ...of those started within this window (ms). */
  readonly windowMs: number;
}

/** The spans demand is counted over (the pool remembers it for EXECUTOR_TTL instead). */
export const STANDBY_DEMAND_SPANS = { burstMs: 1_000, windowMs: 60_000 } as const;

/** The starts remembered per checkpoint at most (the oldest go first). */
export const MAX_REMEMBERED_STARTS = 1_024;

/** When new containers of each checkpoint were started for calls (epoch ms, ascending). */
export type StandbyDemand = ReadonlyMap<string, readonly number[]>;

/** No demand yet. */
export const NO_DEMAND: ReadonlyMap<string, readonly number[]> = new Map();

function recent(starts: readonly number[], now: number, windowMs: number): readonly number[] {
  let first = 0;
  while (first < starts.length && starts[first]! <= now - windowMs) first += 1;
  return first === 0 ? starts : starts.slice(first);
}

/** The demand after a call started a new container of `checkpointId` at `now`. */
export function demandAfterStart(
  demand: StandbyDemand,
  checkpointId: string,
  now: number,
  policy: StandbyDemandPolicy,
): StandbyDemand {
  const starts = [...recent(demand.get(checkpointId) ?? [], now, policy.windowMs), now];
  const next = new Map(demand);
  next.set(checkpointId, starts.slice(-MAX_REMEMBERED_STARTS));
  return next;
}

/** The most starts within any `burstMs` span of `starts` (ascending). */
function peak(starts: readonly number[], burstMs: number): number {
  let most = 0;
  let first = 0;
  for (let last = 0; last < starts.length; last += 1) {
    while (starts[last]! - starts[first]! >= burstMs) first += 1;
    most = Math.max(most, last - first + 1);
  }
  return most;
}

/** How many ready standbys of `checkpointId` the worker keeps at `now`, before room. */
export function standbyTarget(
  demand: StandbyDemand,
  checkpointId: string,
  now: number,
  policy: StandbyDemandPolicy,
): number {
  if (policy.floor <= 0) return 0;
  const starts = recent(demand.get(checkpointId) ?? [], now, policy.windowMs);
  const wanted = Math.max(policy.floor, peak(starts, policy.burstMs));
  return Math.min(wanted, Math.max(policy.floor, policy.cap));
}

/** The demand at `now` without what the window forgot (and without checkpoints left with none). */
export function demandAt(
  demand: StandbyDemand,
  now: number,
  policy: StandbyDemandPolicy,
): StandbyDemand {
  const next = new Map<string, readonly number[]>();
  for (const [checkpointId, starts] of demand) {
    const kept = recent(starts, now, policy.windowMs);
    if (kept.length > 0) next.set(checkpointId, kept);
  }
  return next;
}

/**
 * How many more standbys fit in `freeMemory` bytes (the worker's memory less what its containers
 * may use: held ones their limits, standbys what one was measured to use), each using `perStandby`.
 */
export function standbyMemoryRoom(freeMemory: number, perStandby: number): number {
  if (perStandby <= 0) return Number.POSITIVE_INFINITY;
  return Math.max(0, Math.floor(freeMemory / perStandby));
}

/** How many of `have` shelved standbys go because the target fell to `target`. */
export function standbysAboveTarget(have: number, target: number): number {
  return Math.max(0, have - target);
}
