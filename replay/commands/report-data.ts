/**
 * What `replay report --html` shows of one call, gathered from a log: the call as the history
 * tells it (the same shape the dashboard draws), each placement's table of workers with every
 * filter's verdict, the other calls on its worker around it, and the events around it that are
 * not its own (registrations, reports, evictions, pin changes): what changed around it.
 */
import type { ClusterEvent } from '../../src/events/index.js';
import type { PlacementExplanation } from '../../src/core/placement/index.js';
import { CallHistory, callView, type CallViewData } from '../../src/projections/index.js';
import type { LogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import type { ExplainedCall } from './explain-call.js';

/** One worker's line of a placement table. */
export interface WorkerRow {
  readonly workerId: string;
  readonly status: string;
  readonly flavor: string;
  readonly rank: number | null;
  readonly rankKey: string;
  readonly notCandidate: string | null;
  readonly filters: readonly { filter: string; verdict: string; reason: string }[];
}

/** One placement of the call, explained. */
export interface PlacementPart {
  readonly title: string;
  readonly outcome: string;
  readonly workers: readonly WorkerRow[];
  readonly checkpoint: string;
}

/** An event around the call, in a line. */
export interface NearbyEvent {
  readonly seq: number;
  readonly at: string;
  readonly type: string;
  readonly text: string;
}

/** Everything the report page draws. */
export interface ReportData {
  readonly log: string;
  readonly call: CallViewData;
  readonly placements: readonly PlacementPart[];
  readonly neighbours: readonly CallViewData[];
  readonly nearby: readonly NearbyEvent[];
}

/** Events this far (seqs) before the request and after the end are "around" the call. */
const NEARBY_SEQS = 30;
/** Other calls this far (ms) before the request and after the end are drawn beside it. */
const NEIGHBOUR_MS = 60_000;

function workerRows(explanation: PlacementExplanation): WorkerRow[] {
  return explanation.workers.map((worker) => ({
    workerId: worker.workerId,
    status: worker.status,
    flavor: worker.flavor,
    rank: worker.rank,
    rankKey: worker.rankKey
      ? `(${[...worker.rankKey.terms.map((t) => (Number.isInteger(t.value) ? String(t.value) : t.value.toFixed(3))), worker.rankKey.workerId].join(', ')})`
      : '-',
    notCandidate: worker.notCandidate,
    filters: worker.filters.map((f) => ({
      filter: f.filter,
      verdict: f.verdict,
      reason: f.reason,
    })),
  }));
}

function outcomeText(explanation: PlacementExplanation): string {
  const decision = explanation.decision;
  return decision.outcome === 'placed'
    ? `placed on ${decision.workerId}`
    : `refused ${decision.code}: ${decision.message}`;
}

/** A line for an event: its fields but the envelope. */
function eventText(event: ClusterEvent): string {
  const { seq: _seq, at: _at, type: _type, cause: _cause, ...fields } = event;
  return JSON.stringify(fields).slice(0, 400);
}

function touches(event: ClusterEvent, requestId: string): boolean {
  return 'requestId' in event && event.requestId === requestId;
}

/** Gathers the report of `explained` (found in `source`, read again here). */
export async function reportData(
  source: LogSource,
  logPath: string,
  explained: ExplainedCall,
): Promise<ReportData> {
  const requestId = explained.request.requestId;
  const history = new CallHistory({ maxCalls: 1_000_000, retentionMs: Number.MAX_SAFE_INTEGER });
  const before: ClusterEvent[] = [];
  const nearby: NearbyEvent[] = [];
  let endSeq: number | null = null;
  await forEachEvent(source, (event) => {
    history.observe(event);
    const record = history.get(requestId);
    if (record === undefined) {
      before.push(event);
      if (before.length > NEARBY_SEQS) before.shift();
      return true;
    }
    if (endSeq === null && record.finishedAt !== null) endSeq = event.seq;
    if (!touches(event, requestId) && event.type !== 'Snapshot') {
      nearby.push({ seq: event.seq, at: event.at, type: event.type, text: eventText(event) });
    }
    return endSeq === null || event.seq < endSeq + NEARBY_SEQS;
  });
  const record = history.get(requestId);
  if (record === undefined) throw new Error(`no call ${requestId} in ${logPath}`);
  const call = callView(record);
  const from = Date.parse(call.requestedAt) - NEIGHBOUR_MS;
  const to =
    (call.finishedAt ? Date.parse(call.finishedAt) : Date.parse(call.requestedAt)) + NEIGHBOUR_MS;
  const neighbours = history
    .list({ sinceMs: from })
    .filter((other) => Date.parse(other.requestedAt) <= to)
    .map(callView);
  const placements: PlacementPart[] = [
    {
      title: `Placement at seq ${explained.request.seq}`,
      outcome: outcomeText(explained.explanation),
      workers: workerRows(explained.explanation),
      checkpoint: explained.explanation.checkpoint?.reason ?? '',
    },
    ...explained.replacements.map((part) => ({
      title: `Placed again at seq ${part.dial.seq}, after ${part.dial.workerId} could not be reached (${part.dial.error})`,
      outcome: part.explanation ? outcomeText(part.explanation) : 'refused without a placement',
      workers: part.explanation ? workerRows(part.explanation) : [],
      checkpoint: part.explanation?.checkpoint?.reason ?? '',
    })),
  ];
  return {
    log: logPath,
    call,
    placements,
    neighbours,
    nearby: [
      ...before
        .filter((e) => e.type !== 'Snapshot')
        .map((e) => ({ seq: e.seq, at: e.at, type: e.type, text: eventText(e) })),
      ...nearby,
    ],
  };
}
