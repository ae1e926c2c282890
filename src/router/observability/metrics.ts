/**
 * The router's Prometheus metrics (prom-client), in a registry of its own so several routers can
 * live in one process (tests). Gauges that mirror the cluster state are computed when scraped.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ClusterState } from '../../projections/cluster-state.js';
import type { LogView } from '../../proto/gen/readie/v1/admin.js';

/** Where a relayed chunk went. */
export type RelayDirection = 'to_worker' | 'to_client';

/** What the state-backed gauges read when scraped. */
export interface MetricsSources {
  state(): ClusterState;
  inFlight(): number;
  sessionsWaiting(): number;
  /** The live log and its archive, as of the last retention pass. */
  log?(): LogView | undefined;
}

/** Every metric the router exports. */
export class RouterMetrics {
  readonly registry = new Registry();
  /** Calls placed (a reservation made). */
  readonly placements: Counter<string>;
  /** Calls that found no room now and waited in the admission queue. */
  readonly queued: Counter<string>;
  /** Seconds a call waited in the admission queue, by tenant and how it left (admitted or why not). */
  readonly queueWait: Histogram<'tenant' | 'outcome'>;
  /** Calls refused before running, by gRPC code: placement, session busy, malformed stream. */
  readonly rejections: Counter<'code'>;
  /** Calls that ran, by the gRPC code they ended with. */
  readonly finished: Counter<'code' | 'raised'>;
  /** Seconds from an append to its commit. */
  readonly appendLatency: Histogram<string>;
  /** Payload bytes relayed, by direction. */
  readonly relayBytes: Counter<'direction'>;
  /** `relayBytes` from clients to workers (the labelled child, made once for the hot path). */
  readonly relayBytesToWorker: Counter.Internal;
  /** `relayBytes` from workers to clients. */
  readonly relayBytesToClient: Counter.Internal;
  /** Failed health probes. */
  readonly probeFailures: Counter<string>;
  readonly dialFailures: Counter<string>;
  /** Calls refused for a missing or wrong bearer token. */
  readonly unauthenticated: Counter<string>;
  /** Calls refused because the caller's credential does not allow them. */
  readonly permissionDenied: Counter<string>;
  /** Segment runs of the log moved to the archive. */
  readonly archivedSegments: Counter<string>;
  /** Archive files deleted past `ARCHIVE_RETENTION`. */
  readonly expiredArchives: Counter<string>;
  /** Retention passes that failed (each is tried again at the next). */
  readonly archiveFailures: Counter<string>;

  constructor(sources: MetricsSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'readie_router_' });
    this.placements = new Counter({
      name: 'readie_router_placements_total',
      help: 'Calls placed on a worker',
      registers,
    });
    this.queued = new Counter({
      name: 'readie_router_calls_queued_total',
      help: 'Calls that found no room now and waited in the admission queue',
      registers,
    });
    this.queueWait = new Histogram({
      name: 'readie_router_queue_wait_seconds',
      help: 'Time calls waited in the admission queue, by tenant (calls without one: tenant="") and outcome (admitted, timeout, deadline, cancelled, restart)',
      labelNames: ['tenant', 'outcome'],
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers,
    });
    new Gauge({
      name: 'readie_router_queue_depth',
      help: 'Calls waiting in the admission queue, by tenant (calls without one: tenant="")',
      labelNames: ['tenant'],
      registers,
      collect() {
        this.reset();
        const depth = new Map<string, number>();
        for (const call of sources.state().queue.values()) {
          const tenant = call.tenantId ?? '';
          depth.set(tenant, (depth.get(tenant) ?? 0) + 1);
        }
        for (const [tenant, count] of depth) this.set({ tenant }, count);
      },
    });
    this.rejections = new Counter({
      name: 'readie_router_rejections_total',
      help: 'Calls refused before running, by gRPC status code',
      labelNames: ['code'],
      registers,
    });
    this.finished = new Counter({
      name: 'readie_router_calls_finished_total',
      help: 'Placed calls that ended, by gRPC status code and whether the function raised (code OK)',
      labelNames: ['code', 'raised'],
      registers,
    });
    this.appendLatency = new Histogram({
      name: 'readie_router_log_append_seconds',
      help: 'Time from appending events to the event log until their transaction committed',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
      registers,
    });
    this.relayBytes = new Counter({
      name: 'readie_router_relay_bytes_total',
      help: 'Payload bytes relayed between clients and workers, by direction',
      labelNames: ['direction'],
      registers,
    });
    this.relayBytesToWorker = this.relayBytes.labels({ direction: 'to_worker' });
    this.relayBytesToClient = this.relayBytes.labels({ direction: 'to_client' });
    this.probeFailures = new Counter({
      name: 'readie_router_probe_failures_total',
      help: 'Worker health probes that failed',
      registers,
    });
    this.dialFailures = new Counter({
      name: 'readie_router_dial_failures_total',
      help: 'Calls whose placed worker could not be reached before anything was sent (placed again)',
      registers,
    });
    this.unauthenticated = new Counter({
      name: 'readie_router_unauthenticated_total',
      help: 'Calls refused for a missing or wrong bearer token',
      registers,
    });
    this.permissionDenied = new Counter({
      name: 'readie_router_permission_denied_total',
      help: "Calls refused because the caller's credential does not allow them",
      registers,
    });
    this.archivedSegments = new Counter({
      name: 'readie_router_log_archived_total',
      help: 'Runs of event log segments moved to the archive (LogSegmentArchived)',
      registers,
    });
    this.expiredArchives = new Counter({
      name: 'readie_router_archive_expired_total',
      help: 'Archive files deleted past ARCHIVE_RETENTION (LogArchiveExpired)',
      registers,
    });
    this.archiveFailures = new Counter({
      name: 'readie_router_archive_failures_total',
      help: 'Retention passes that failed (tried again at the next pass)',
      registers,
    });
    const logGauge = (name: string, help: string, read: (view: LogView) => number) =>
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const view = sources.log?.();
          if (view) this.set(read(view));
        },
      });
    logGauge(
      'readie_router_log_live_bytes',
      'Bytes the live event log holds (LMDB: pages in use; JetStream: the stream), at the last retention pass',
      (view) => view.liveBytes,
    );
    logGauge(
      'readie_router_log_first_seq',
      'The seq of the oldest event still in the live log',
      (view) => view.firstSeq,
    );
    logGauge(
      'readie_router_log_oldest_event_timestamp_seconds',
      'When the oldest event still in the live log was appended (Unix time)',
      (view) => (view.firstAt === '' ? 0 : Date.parse(view.firstAt) / 1000),
    );
    logGauge(
      'readie_router_archive_bytes',
      "Bytes of the log's archive files",
      (view) => view.archiveBytes,
    );
    logGauge('readie_router_archive_files', "The log's archive files", (view) => view.archiveFiles);
    logGauge(
      'readie_router_archive_last_seq',
      'The last seq the archive holds',
      (view) => view.archiveLastSeq,
    );
    new Gauge({
      name: 'readie_router_calls_in_flight',
      help: 'Calls placed and not yet finished on this router',
      registers,
      collect() {
        this.set(sources.inFlight());
      },
    });
    new Gauge({
      name: 'readie_router_session_calls_waiting',
      help: 'Calls waiting for their session turn',
      registers,
      collect() {
        this.set(sources.sessionsWaiting());
      },
    });
    new Gauge({
      name: 'readie_router_workers',
      help: 'Workers known to the router, by status',
      labelNames: ['status'],
      registers,
      collect() {
        const counts = { ready: 0, error: 0, leaving: 0, evicted: 0 };
        for (const worker of sources.state().workers.values()) counts[worker.status] += 1;
        for (const [status, count] of Object.entries(counts)) this.set({ status }, count);
      },
    });
    new Gauge({
      name: 'readie_router_sessions',
      help: 'Sessions the log knows, by state (pinned to a container, unpinned, expired)',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = { pinned: 0, unpinned: 0, expired: 0 };
        for (const session of sources.state().sessions.values()) {
          if (session.expired) counts.expired += 1;
          else if (session.pin) counts.pinned += 1;
          else counts.unpinned += 1;
        }
        for (const [state, count] of Object.entries(counts)) this.set({ state }, count);
      },
    });
    new Gauge({
      name: 'readie_router_reservations',
      help: 'Reservations held in the cluster state (placed calls not yet released)',
      registers,
      collect() {
        this.set(sources.state().reservations.size);
      },
    });
    new Gauge({
      name: 'readie_router_log_last_seq',
      help: 'The seq of the last event appended to the event log',
      registers,
      collect() {
        this.set(sources.state().lastSeq);
      },
    });
  }
}
