/**
 * What placement's image step (rules 10's image cost; 8's holder first before it) costs a call:
 * calls that name an image held by a few of 1,000 workers (each holding 3 images of 50 tenants'
 * 700 declarations), and calls naming an image no worker holds, beside the same calls without an
 * image (the baseline), each decided against the same folded state: once with no catalogue
 * loaded, and once with the synthetic logs' catalogue (a cpu and a gpu flavor) and calls hinting
 * numpy, so every cover is worked out. Rounds alternate between the six; the best of each is
 * reported.
 */
import type { NewEvent } from '../src/events/index.js';
import { place, PlacementCaches, type CallToPlace } from '../src/core/placement/index.js';
import { applyInPlace, initialState, type ClusterState } from '../src/projections/index.js';
import { demand, GiB, registered, started, utilization } from '../test/support/events.js';
import { CATALOGUE } from '../test/support/synthetic-log.js';
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

function clusterEvents(catalogue: boolean): NewEvent[] {
  const events: NewEvent[] = [started()];
  if (catalogue) events.push({ type: 'CatalogueLoaded', revision: 'r1', catalogue: CATALOGUE });
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

function folded(catalogue: boolean): { state: ClusterState; caches: PlacementCaches } {
  let state = initialState();
  const caches = new PlacementCaches();
  let seq = 0;
  for (const event of clusterEvents(catalogue)) {
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

const HINTS = ['numpy'];

function call(i: number, kind: Kind, imports: readonly string[] | null): CallToPlace {
  return {
    requestId: `req-${i}`,
    sessionId: null,
    tenantId: `t${i % 50}`,
    demand: demand({
      memory: ((i % 3) + 1) * GiB,
      imports: imports === null ? null : [...imports],
    }),
    imageKey: kind === 'none' ? null : kind === 'held' ? key(i % KEYS) : key(KEYS + (i % KEYS)),
  };
}

/** Calls decided per second; `placedOnHolder` counts the held calls placed on a holder. */
function decide(
  state: ClusterState,
  caches: PlacementCaches,
  kind: Kind,
  imports: readonly string[] | null,
): { perSecond: number; placedOnHolder: number } {
  collectGarbage();
  let placedOnHolder = 0;
  const start = performance.now();
  for (let i = 0; i < CALLS; i += 1) {
    const decision = place(state, call(i, kind, imports), { caches });
    if (kind === 'held' && decision.outcome === 'placed') {
      const holders = state.imageKeys.get(key(i % KEYS));
      if (holders?.has(decision.workerId)) placedOnHolder += 1;
    }
  }
  return { perSecond: perSecond(CALLS, performance.now() - start), placedOnHolder };
}

type Measured = Record<Kind, number> & { placedOnHolder: number };

/** The figures of one state's three kinds of call. */
function figures(best: Measured) {
  return {
    withoutImage: { perSecond: best.none },
    imageHeld: {
      perSecond: best.held,
      vsWithoutImage: ratio(best.held, best.none),
      placedOnHolder: best.placedOnHolder,
    },
    imageHeldNowhere: {
      perSecond: best.heldNowhere,
      vsWithoutImage: ratio(best.heldNowhere, best.none),
    },
  };
}

/** The benchmark's JSON. */
export function run(): Promise<unknown> {
  const clusters = [
    {
      ...folded(false),
      imports: null,
      best: { none: 0, held: 0, heldNowhere: 0, placedOnHolder: 0 },
    },
    {
      ...folded(true),
      imports: HINTS,
      best: { none: 0, held: 0, heldNowhere: 0, placedOnHolder: 0 },
    },
  ];
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const cluster of clusters) {
      for (const kind of ['none', 'held', 'heldNowhere'] as const) {
        const measured = decide(cluster.state, cluster.caches, kind, cluster.imports);
        cluster.best[kind] = Math.max(cluster.best[kind], measured.perSecond);
        if (kind === 'held') cluster.best.placedOnHolder = measured.placedOnHolder;
      }
    }
  }
  const [bare, catalogued] = clusters as [(typeof clusters)[0], (typeof clusters)[0]];
  return Promise.resolve({
    workers: WORKERS,
    imagesPerWorker: IMAGES_PER_WORKER,
    declarations: KEYS,
    calls: CALLS,
    rounds: ROUNDS,
    ...figures(bare.best),
    withCatalogue: { imports: HINTS, ...figures(catalogued.best) },
  });
}
