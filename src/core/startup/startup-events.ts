/**
 * What the router appends when it starts over a log (pure): `RouterStarted`, `CatalogueLoaded`
 * when the catalogue changed, and the recovery of calls in flight when it last stopped.
 *
 * Recovery after a restart. The state folded from the log (newest snapshot plus tail) is
 * the router's memory; what it cannot trust is the calls that were in flight when the previous
 * process died: their streams died with it. Their reservations are force-released, with the
 * usual consequences. Session pins stay: a pin whose worker is gone is expired by liveness as
 * usual (a worker that neither reports nor answers probes within `WORKER_TTL` of the restart).
 */
import type { NewEvent } from '../../events/types.js';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { Config } from '../../shared/config.js';
import { reservationExpiredEvents } from '../consequences/index.js';
import type { Decision } from '../decision.js';
import { PLACEMENT_RULES_VERSION } from '../placement/rules-version.js';
import type { Catalogue } from '../../events/catalogue.js';
import { EVENT_SCHEMA_VERSION } from '../../events/schema.js';

/**
 * The `RouterStarted` event for a config (canonical units) and version, with the placement rules'
 * version and the event schema the router writes from here on. Never holds secrets.
 */
export function routerStartedEvent(
  config: Config,
  version: string,
  router?: RouterIdentity,
): NewEvent {
  return {
    type: 'RouterStarted',
    config: { ...config },
    version,
    rulesVersion: PLACEMENT_RULES_VERSION,
    routerId: router?.routerId ?? null,
    takeoverFrom: router?.takeoverFrom ?? null,
    schemaVersion: EVENT_SCHEMA_VERSION,
  };
}

/** Which router of a shared (JetStream) log starts, and whose lease it took over. */
export interface RouterIdentity {
  readonly routerId: string;
  /** The router that held the lease before (its lease expired or was handed on); null: none. */
  readonly takeoverFrom: string | null;
}

/** `CatalogueLoaded` for a catalogue, or nothing when that revision is already in force. */
export function catalogueEvents(
  state: ClusterState,
  catalogue: Catalogue,
  revision: string,
): NewEvent[] {
  if (state.catalogue?.revision === revision) return [];
  return [{ type: 'CatalogueLoaded', revision, catalogue }];
}

/** Force-releases every reservation in the state: the calls in flight when the router died. */
export function inFlightReleaseEvents(state: ClusterState): NewEvent[] {
  const events: NewEvent[] = [];
  for (const requestId of state.reservations.keys()) {
    events.push(...reservationExpiredEvents(state, requestId));
  }
  return events;
}

/**
 * The calls that waited in the admission queue when the router last stopped: their streams died
 * with it, so each leaves the queue (`CallLeftQueue`, reason `restart`).
 */
export function queuedReleaseEvents(state: ClusterState): NewEvent[] {
  return [...state.queue.keys()].map((requestId) => ({
    type: 'CallLeftQueue',
    requestId,
    reason: 'restart',
    code: 'UNAVAILABLE',
    message: 'the router restarted while the call waited in its queue',
  }));
}

/** What the router starts with. */
export interface StartInput {
  /** The config in force from here on (canonical units). */
  readonly config: Config;
  /** The readie version. */
  readonly version: string;
  /** The catalogue to put in force, if one was given, and its revision. */
  readonly catalogue?: { readonly catalogue: Catalogue; readonly revision: string } | undefined;
  /** On a shared log: this router and whose lease it took over. */
  readonly router?: RouterIdentity;
}

/**
 * The router starts over its log: `RouterStarted`, `CatalogueLoaded` when the catalogue changed,
 * then the release of the calls that were in flight and of those that were queued (`start`).
 */
export function decideStart(state: ClusterState, input: StartInput): Decision {
  const { catalogue } = input;
  return {
    cause: { kind: 'start' },
    events: [
      routerStartedEvent(input.config, input.version, input.router),
      ...(catalogue ? catalogueEvents(state, catalogue.catalogue, catalogue.revision) : []),
      ...inFlightReleaseEvents(state),
      ...queuedReleaseEvents(state),
    ],
  };
}
