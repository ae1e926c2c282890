/**
 * What placement rules 8's image step costs a call: calls that name an image held by a few of
 * 1,000 workers (each holding 3 images of 50 tenants' 700 declarations), and calls naming an image
 * no worker holds, beside the same calls without an image (the baseline), each decided against
 * the same folded state. Rounds alternate between the three; the best of each is reported.
 */
import type { NewEvent } from '../src/events/index.js';
import { place, PlacementCaches, type CallToPlace } from '../src/core/placement/index.js';
import { applyInPlace, initialState, type ClusterState } from '../src/projections/index.js';
import { demand, GiB, registered, started, utilization } from '../test/support/events.js';
import { collectGarbage, perSecond, ratio } from './support.js';

const WORKERS = 1_000;
const IMAGES_PER_WORKER = 3;
const KEYS = 700;
const CALLS = 20_000;
const ROUNDS = 3;

/** A 64-hex key for declaration `i`. */
function key(i: number): string {
  return i.toString(16).padStart(64, '0');
}

function clusterEvents(): NewEvent[] {
  const events: NewEvent[] = [started()];
  for (let w = 0; w < WORKERS; w += 1) {
    events.push(registered(`w${w}`, { memoryTotal: 64 * GiB, maxContainers: 64 }));
    events.push(
      utilization(`w${w}`, {
        memoryUsed: (w % 17) * GiB,
        cpuUsed: (w % 5) / 2,
        cpuTotal: 8,
        containerCount: w % 4,
      }),
    );
    for (let i = 0; i < IMAGES_PER_WORKER; i += 1) {
      events.push({
        type: 'ImageBuilt',
        workerId: `w${w}`,
        tenantId: `t${(w + i) % 50}`,
        imageId: key(1_000_000 + w * IMAGES_PER_WORKER + i),
        bytes: 1024,
        buildMs: 1,
        declarations: [key((w * IMAGES_PER_WORKER + i) % KEYS)],
      });
    }
  }
  return events;
}

function folded(): { state: ClusterState; caches: PlacementCaches } {
  let state = initialState();
  const caches = new PlacementCaches();
  let seq = 0;
  for (const event of clusterEvents()) {
    seq += 1;
    state = applyInPlace(
      state,
      { seq, at: '2026-12-05T10:00:00.000Z', cause: null, ...event },
      caches,
    );
  }
  return { state, caches };
}

type Kind = 'none' | 'held' | 'heldNowhere';

function call(i: number, kind: Kind): CallToPlace {
  return {
    requestId: `req-${i}`,
    sessionId: null,
    tenantId: `t${i % 50}`,
    demand: demand({ memory: ((i % 3) + 1) * GiB }),
    imageKey: kind === 'none' ? null : kind === 'held' ? key(i % KEYS) : key(KEYS + (i % KEYS)),
  };
}

/** Calls decided per second; `placedOnHolder` counts the held calls placed on a holder. */
function decide(
  state: ClusterState,
  caches: PlacementCaches,
  kind: Kind,
): { perSecond: number; placedOnHolder: number } {
  collectGarbage();
  let placedOnHolder = 0;
  const start = performance.now();
  for (let i = 0; i < CALLS; i += 1) {
    const decision = place(state, call(i, kind), { caches });
    if (kind === 'held' && decision.outcome === 'placed') {
      const holders = state.imageKeys.get(key(i % KEYS));
      if (holders?.has(decision.workerId)) placedOnHolder += 1;
    }
  }
  return { perSecond: perSecond(CALLS, performance.now() - start), placedOnHolder };
}

/** The benchmark's JSON. */
export function run(): Promise<unknown> {
  const { state, caches } = folded();
  const best = { none: 0, held: 0, heldNowhere: 0 };
  let placedOnHolder = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const kind of ['none', 'held', 'heldNowhere'] as const) {
      const measured = decide(state, caches, kind);
      best[kind] = Math.max(best[kind], measured.perSecond);
      if (kind === 'held') placedOnHolder = measured.placedOnHolder;
    }
  }
  return Promise.resolve({
    workers: WORKERS,
    imagesPerWorker: IMAGES_PER_WORKER,
    declarations: KEYS,
    calls: CALLS,
    rounds: ROUNDS,
    withoutImage: { perSecond: best.none },
    imageHeld: {
      perSecond: best.held,
      vsWithoutImage: ratio(best.held, best.none),
      placedOnHolder,
    },
    imageHeldNowhere: {
      perSecond: best.heldNowhere,
      vsWithoutImage: ratio(best.heldNowhere, best.none),
    },
  });
}
