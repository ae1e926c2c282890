/**
 * `replay whatif --quota`: admission decided again under another quota table (docs/quotas.md),
 * against the recorded state, as `--set` decides calls again. The given table replaces the
 * recorded one from the start: the log's `QuotaChanged` and `QuotaRemoved` are folded into the
 * recorded state (so the recorded decisions stay what they were) but never reach the other table.
 * Three kinds of point are compared, each decided twice against the same recorded state, once
 * with the table in force and once with the given one, so a difference is the table's alone:
 *
 * - a call's request (`CallRequested`): placed, queued or refused (a slot cap, a queue cap);
 * - an admission (`CallAdmitted`): which call fair order admits, or none;
 * - the end of an append after which the router decides admission (capacity can have changed, or
 *   an admission was appended): a call the given table admits where the recorded one admits none
 *   is admitted earlier.
 *
 * Each point is one decision, not a new history: what follows a changed decision is still the
 * recorded log. Pure: no I/O, no clock.
 */
import { mayAdmitAfter, slotCapReached } from '../../src/core/admission/index.js';
import { decide } from '../../src/core/decisions.js';
import { callOfRequested, PlacementCaches } from '../../src/core/placement/index.js';
import type { ClusterEvent, EventOf, NewEvent } from '../../src/events/types.js';
import {
  applyInPlace,
  initialState,
  type ClusterState,
  type QuotaTable,
} from '../../src/projections/index.js';
import type { Config } from '../../src/shared/config.js';

/** What happened to a call under the given table where the recorded one decided otherwise. */
export type QuotaChangeKind =
  | 'placed-to-queued'
  | 'placed-to-refused'
  | 'queued-to-placed'
  | 'queued-to-refused'
  | 'refused-to-placed'
  | 'refused-to-queued'
  /** At an admission: another call is admitted first (it waits less, the recorded one longer). */
  | 'admitted-another'
  /** At an admission: none is admitted (the recorded one waits longer). */
  | 'admits-none'
  /** After an append: a call is admitted where the recorded table admitted none (waits less). */
  | 'admitted-earlier';

/** The kinds, in the order a summary counts them. */
export const QUOTA_CHANGE_KINDS: readonly QuotaChangeKind[] = [
  'placed-to-queued',
  'placed-to-refused',
  'queued-to-placed',
  'queued-to-refused',
  'refused-to-placed',
  'refused-to-queued',
  'admitted-another',
  'admits-none',
  'admitted-earlier',
];

/** One decision the given table makes otherwise. */
export interface QuotaWhatifChange {
  /** The seq of the request or admission compared, or of the append's last event. */
  readonly seq: number;
  readonly at: string;
  /** The call the recorded decision is about (at an admission: the call the log admitted). */
  readonly requestId: string;
  readonly change: QuotaChangeKind;
  /** The recorded table's decision, in words. */
  readonly before: string;
  /** The given table's decision, in words. */
  readonly after: string;
  /** The calls that would wait longer than recorded. */
  readonly waitsLonger: readonly string[];
  /** The calls that would wait less than recorded (or not at all). */
  readonly waitsLess: readonly string[];
  /** The calls that would be refused. */
  readonly refused: readonly string[];
  /** For `admitted-earlier`: the seq of the call's recorded admission (null: none recorded). */
  readonly recordedAdmission: number | null;
}

/** The options of a quota what-if. */
export interface QuotaWhatifOptions {
  /** The table decided under instead of the recorded one, from the start. */
  readonly quotas: QuotaTable;
}

type Outcome = 'placed' | 'queued' | 'refused';

/** Watches a log, event by event, deciding its admissions again under another quota table. */
export class QuotaWhatif {
  private state: ClusterState = initialState();
  private readonly caches = new PlacementCaches();
  /** The events of the append being read (they share one cause). */
  private append: ClusterEvent[] = [];
  private readonly changes: QuotaWhatifChange[] = [];
  /** Calls already reported as waiting less (so a long wait is reported once). */
  private readonly sooner = new Set<string>();
  /** Each call's recorded admission, by request ID. */
  private readonly admissions = new Map<string, number>();
  private calls = 0;

  constructor(private readonly options: QuotaWhatifOptions) {}

  /** Takes the next event of the log in. */
  push(event: ClusterEvent): void {
    if (this.append.length > 0 && startsAppend(this.append, event)) this.closeAppend();
    if (event.type === 'CallRequested') this.compareCall(event);
    if (event.type === 'CallAdmitted') {
      this.compareAdmission(event);
      this.admissions.set(event.requestId, event.seq);
    }
    this.state = applyInPlace(this.state, event, this.caches);
    this.append.push(event);
  }

  /** Ends the log; returns every change, in log order, and how many calls were requested. */
  end(): { readonly changes: readonly QuotaWhatifChange[]; readonly calls: number } {
    if (this.append.length > 0) this.closeAppend();
    const changes = this.changes.map((change) =>
      change.change === 'admitted-earlier'
        ? { ...change, recordedAdmission: this.admissions.get(change.requestId) ?? null }
        : change,
    );
    return { changes, calls: this.calls };
  }

  /** The recorded state with the given table in force. */
  private underTable(): ClusterState {
    return { ...this.state, quotas: this.options.quotas };
  }

  private get config(): Config {
    return this.state.config;
  }

  private compareCall(event: EventOf<'CallRequested'>): void {
    this.calls += 1;
    const input = { call: callOfRequested(event), config: this.config, caches: this.caches };
    const recorded = decide('call', this.state, input).events;
    const given = decide('call', this.underTable(), input).events;
    const before = outcomeOf(recorded);
    const after = outcomeOf(given);
    if (before === after) return;
    const id = event.requestId;
    const waitsLess = after === 'placed' || (before === 'refused' && after === 'queued');
    if (waitsLess) this.sooner.add(id);
    this.changes.push({
      seq: event.seq,
      at: event.at,
      requestId: id,
      change: `${before}-to-${after}` as QuotaChangeKind,
      before: describeCall(recorded),
      after: describeCall(given),
      waitsLonger: before === 'placed' && after === 'queued' ? [id] : [],
      waitsLess: waitsLess ? [id] : [],
      refused: after === 'refused' ? [id] : [],
      recordedAdmission: null,
    });
  }

  private compareAdmission(event: EventOf<'CallAdmitted'>): void {
    const input = { config: this.config, caches: this.caches };
    const recorded = decide('admit', this.state, input);
    const given = decide('admit', this.underTable(), input);
    if (given.requestId === recorded.requestId) return;
    const admitted = recorded.requestId ?? event.requestId;
    const other = given.requestId;
    if (other !== null) this.sooner.add(other);
    this.changes.push({
      seq: event.seq,
      at: event.at,
      requestId: admitted,
      change: other === null ? 'admits-none' : 'admitted-another',
      before: `admits ${admitted}`,
      after:
        other === null
          ? `admits none: ${whyWaiting(this.underTable(), admitted)}`
          : `admits ${other} first`,
      waitsLonger: [admitted],
      waitsLess: other === null ? [] : [other],
      refused: [],
      recordedAdmission: null,
    });
  }

  /** After an append the router decides admission after: a call admitted earlier? */
  private closeAppend(): void {
    const events = this.append;
    this.append = [];
    const last = events.at(-1);
    if (last === undefined || this.state.queue.size === 0) return;
    const admitted = events[0]?.type === 'CallAdmitted';
    if (!admitted && !mayAdmitAfter({ events })) return;
    const input = { config: this.config, caches: this.caches };
    if (decide('admit', this.state, input).requestId !== null) return;
    const given = decide('admit', this.underTable(), input).requestId;
    if (given === null || this.sooner.has(given)) return;
    this.sooner.add(given);
    this.changes.push({
      seq: last.seq,
      at: last.at,
      requestId: given,
      change: 'admitted-earlier',
      before: `admits none: ${whyWaiting(this.state, given)}`,
      after: `admits ${given}`,
      waitsLonger: [],
      waitsLess: [given],
      refused: [],
      recordedAdmission: null,
    });
  }
}

/** Why a queued call is not admitted against `state`: its tenant's slot cap, or no room for it. */
function whyWaiting(state: ClusterState, requestId: string): string {
  const queued = state.queue.get(requestId);
  if (queued === undefined) return `${requestId} is not queued`;
  return (
    slotCapReached(state, queued.tenantId) ??
    `${requestId} does not fit now, and no other queued call fits either`
  );
}

/** Whether `event` opens an append after the events read of the one before. */
function startsAppend(append: readonly ClusterEvent[], event: ClusterEvent): boolean {
  if (
    event.type === 'CallRequested' ||
    event.type === 'CallAdmitted' ||
    event.type === 'CallDialFailed'
  ) {
    return true;
  }
  const cause = append[0]?.cause ?? null;
  return cause === null || event.cause !== cause;
}

function outcomeOf(events: readonly NewEvent[]): Outcome {
  if (events.some((e) => e.type === 'CallQueued')) return 'queued';
  return events.some((e) => e.type === 'CallPlaced') ? 'placed' : 'refused';
}

/** A call's decision in words. */
function describeCall(events: readonly NewEvent[]): string {
  for (const event of events) {
    if (event.type === 'CallQueued') return `queued: ${event.why}`;
    if (event.type === 'CallPlaced') return `placed on ${event.workerId}`;
    if (event.type === 'CallRejected') return `refused ${event.code}: ${event.message}`;
  }
  return 'no outcome';
}
