/**
 * Builders for routing tests: a catalogue with two on-demand versions, pin changes and residency
 * reports as a router would log them, and a pinned call for placement.
 */
import type { Catalogue, NewEvent, ResidencyState } from '../../src/events/index.js';
import type { CallToPlace } from '../../src/core/placement/index.js';
import { rendezvousSubset } from '../../src/core/placement/index.js';
import { demand, GiB } from './events.js';

/** A catalogue whose cpu flavor lists two versions of a policy model (on demand, 2 GiB each). */
export const VERSIONS_CATALOGUE: Catalogue = {
  flavors: {
    cpu: {
      coldStartCost: 900,
      basePackages: ['numpy'],
      checkpoints: [
        { id: 'checkpoint_0', modules: [], restoreCost: 60 },
        {
          id: 'policy-v1',
          modules: ['numpy'],
          restoreCost: 10,
          onDemand: true,
          residentMemory: 2 * GiB,
        },
        {
          id: 'policy-v2',
          modules: ['numpy'],
          restoreCost: 10,
          onDemand: true,
          residentMemory: 2 * GiB,
        },
      ],
    },
    gpu: {
      coldStartCost: 2000,
      basePackages: [],
      checkpoints: [{ id: 'policy-gpu', modules: [], restoreCost: 10, onDemand: true }],
    },
  },
  importCosts: { numpy: 150 },
  defaultImportCost: 100,
};

/** The router started with the versions catalogue (and `config`). */
export function routerWithVersions(config: Record<string, number> = {}): NewEvent[] {
  return [
    {
      type: 'RouterStarted',
      config,
      version: 'test',
      rulesVersion: 1,
      routerId: null,
      takeoverFrom: null,
      schemaVersion: null,
    },
    { type: 'CatalogueLoaded', revision: 'v', catalogue: VERSIONS_CATALOGUE },
  ];
}

/** The table entry of `tenantId` set to `version` on `k` workers at `revision`. */
export function revised(
  revision: number,
  tenantId: string,
  version: string | null,
  k: number | null = 2,
  previousVersion: string | null = null,
): NewEvent {
  return {
    type: 'RoutingRevised',
    revision,
    tenantId,
    version,
    k: version === null ? null : k,
    previousVersion,
  };
}

/** A worker's report about a version. */
export function residency(
  workerId: string,
  checkpointId: string,
  state: ResidencyState,
  error: string | null = null,
): NewEvent {
  return { type: 'ResidencyChanged', workerId, checkpointId, state, error };
}

/** A pinned call of `tenantId`. */
export function pinnedCall(
  requestId: string,
  tenantId: string | null,
  fields: Partial<Omit<CallToPlace, 'demand'>> & { demand?: Partial<CallToPlace['demand']> } = {},
): CallToPlace {
  return {
    sessionId: null,
    retryOf: null,
    ...fields,
    requestId,
    tenantId,
    demand: demand({ pinned: true, ...fields.demand }),
  };
}

/** The subset (best first) of the key among `workers`, as the contract computes it. */
export function subsetOf(
  tenantId: string,
  version: string,
  workers: readonly string[],
  k: number,
): string[] {
  return rendezvousSubset(tenantId, version, workers, k);
}
