/** The screen `replay explain` prints: the one an operator reads during an incident. */
import type { QueueWait } from '../engine/queue-wait.js';
import { queueWaitSection } from './queue-wait-screen.js';
import type { ClusterEvent } from '../../src/events/index.js';
import type { Reservation, SessionRecord } from '../../src/projections/index.js';
import {
  costText,
  type PlacementExplanation,
  type WorkerExplanation,
} from '../../src/core/placement/index.js';
import { printableData } from '../../src/shared/printable.js';
import { formatDuration, formatSize } from '../../src/shared/units.js';
import type { CallViewData } from '../../src/projections/index.js';
import type { CallResult } from '../engine/call-result.js';
import { describeDecision, describeRecorded } from './decision.js';
import { reservationsTable, sessionsTable, sortedReservations } from './state-view.js';
import { cell, table } from './table.js';

/** The parts of the state a call met that the explain screen shows (copies, safe to keep). */
export interface StateAtCall {
  /** The call's session, when it names one the state knows. */
  readonly session: SessionRecord | null;
  /** Every call in flight: their reservations count against the workers' memory and slots. */
  readonly reservations: readonly Reservation[];
  /**
   * The chosen worker's ready standbys per checkpoint, as its last load report before the call
   * listed them (`at`); null when the call was not placed or the report listed none at all.
   */
  readonly standbys?: {
    readonly workerId: string;
    readonly at: string;
    readonly ready: readonly { readonly checkpointId: string; readonly ready: number }[];
  } | null;
}

/**
 * Whether the chosen worker had a ready standby of the chosen checkpoint (a new container started
 * from one skips the restore): what the worker's last load report before the call said.
 */
function standbySection(explanation: PlacementExplanation, atCall: StateAtCall): string[] {
  const { decision } = explanation;
  if (decision.outcome !== 'placed' || decision.containerId !== null) return [];
  if (decision.checkpointId === null) return ['Standbys: none used (a cold start)'];
  const report = atCall.standbys;
  if (!report || report.workerId !== decision.workerId) {
    return [`Standbys: ${decision.workerId} reported none before this call`];
  }
  const listed = report.ready.map((entry) => `${entry.checkpointId} ${entry.ready}`).join(', ');
  const ready = report.ready.find((entry) => entry.checkpointId === decision.checkpointId);
  return [
    `Standbys on ${report.workerId} (its load report at ${report.at}): ${listed || 'none'}; ` +
      (ready && ready.ready > 0
        ? `${decision.checkpointId} had ${ready.ready} ready: the new container was likely one`
        : `none of ${decision.checkpointId}: the container was likely restored on demand`),
  ];
}

function stateSection(atCall: StateAtCall): string[] {
  const lines = atCall.session
    ? [`Session ${atCall.session.sessionId} at this call:`, sessionsTable([atCall.session]), '']
    : [];
  const { length } = atCall.reservations;
  lines.push(
    length === 0
      ? 'Reservations at this call: none'
      : `Reservations at this call (${length}):\n${reservationsTable(sortedReservations(atCall.reservations))}`,
  );
  return lines;
}

function rankKeyText(worker: WorkerExplanation): string {
  if (!worker.rankKey) return '-';
  const terms = worker.rankKey.terms.map((term) =>
    Number.isInteger(term.value) ? String(term.value) : term.value.toFixed(3),
  );
  return `(${[...terms, worker.rankKey.workerId].join(', ')})`;
}

function workersSection(explanation: PlacementExplanation): string[] {
  const { workers } = explanation;
  if (workers.length === 0) {
    return [
      explanation.routing
        ? 'Workers: only the routing above decides a pinned call (its subset, filtered and ranked)'
        : 'Workers: not considered (the session decided alone)',
    ];
  }
  const candidates = workers.filter((w) => w.notCandidate === null).length;
  const eligible = workers.filter((w) => w.eligible).length;
  const lines = [
    `Workers: ${workers.length} known, ${candidates} candidate${candidates === 1 ? '' : 's'}, ${eligible} passing every filter`,
    explanation.image === undefined
      ? 'ranking key: (flavor-penalty, memory-pressure, cpu-pressure, in-flight, worker ID), lowest wins'
      : explanation.image.buildCost === undefined
        ? "ranking key: a holder of the call's image first, then (flavor-penalty, memory-pressure, cpu-pressure, in-flight, worker ID), lowest wins"
        : "ranking key: the lowest image cost first (cover, plus the image's build where it is not held), then (flavor-penalty, memory-pressure, cpu-pressure, in-flight, worker ID), lowest wins",
    ...imageLines(explanation),
    '',
  ];
  for (const worker of workers) {
    const rank =
      worker.rank === null ? '' : `  rank ${worker.rank}${worker.rank === 1 ? ' (chosen)' : ''}`;
    const image = imageColumn(worker);
    lines.push(
      `${worker.workerId}  ${worker.status} ${worker.flavor}${rank}${image}  key ${rankKeyText(worker)}`,
    );
    if (worker.notCandidate !== null) {
      lines.push(`    not a candidate: ${worker.notCandidate}`);
      continue;
    }
    const rows = worker.filters.map((filter) => [
      `    ${filter.filter}`,
      filter.verdict,
      filter.reason,
    ]);
    lines.push(table(['    FILTER', 'VERDICT', 'REASON'], rows));
  }
  return lines;
}

/**
 * A worker's image column: under rules 10 its image cost in parts (held, or the build it would
 * pay), under 8 and 9 whether it holds the image; empty when the call names none.
 */
function imageColumn(worker: WorkerExplanation): string {
  const cost = worker.imageCost;
  if (cost === undefined) {
    return worker.holdsImage === undefined ? '' : `  image ${worker.holdsImage ? 'held' : '-'}`;
  }
  const cover = costText(cost.cover);
  if (cost.held) return `  image held: cost ${cover} (cover ${cover})`;
  return cost.build === null || cost.total === null
    ? `  image build: cost unknown (cover ${cover} + a build of unknown cost)`
    : `  image build: cost ${costText(cost.total)} (cover ${cover} + build ${costText(cost.build)})`;
}

/** The call's image (rules v8, v10): who holds it, and what that decided. */
function imageLines(explanation: PlacementExplanation): string[] {
  const image = explanation.image;
  if (image === undefined) return [];
  return [
    `image ${image.imageKey.slice(0, 16)}: held by ${image.holders.join(', ') || 'no worker'}; ${image.reason}`,
  ];
}

function checkpointSection(explanation: PlacementExplanation): string[] {
  const part = explanation.checkpoint;
  if (!part) return ['Checkpoint: not chosen (the call was refused before, or reuses a container)'];
  const lines = [
    `Checkpoint (flavor ${part.flavor}, catalogue ${part.catalogueRevision ?? 'none loaded'}): ${part.chosen ?? 'cold start'} (${part.reason})`,
  ];
  if (part.rows.length > 0) {
    lines.push(
      table(
        ['CHECKPOINT', 'BASE COST', 'MISSING IMPORTS', 'IMPORT COST', 'TOTAL', ''],
        part.rows.map((row) => [
          row.checkpointId ?? '(cold start)',
          row.baseCost,
          cell(row.missingImports),
          row.importCost,
          row.total,
          row.checkpointId === part.chosen ? '<- chosen' : '',
        ]),
      ),
    );
  }
  return lines;
}

function routingSection(explanation: PlacementExplanation): string[] {
  const part = explanation.routing;
  if (!part) return [];
  const lines = [
    `Routing (a pinned call of tenant ${part.tenantId ?? '(none)'}):`,
    `  resolution: ${part.resolved ?? 'not resolved'}`,
  ];
  if (part.flavor !== null)
    lines.push(`  flavor: ${part.flavor} (its catalogue lists the version)`);
  if (part.candidates.length > 0) {
    lines.push(
      '  candidates by rendezvous score (SHA-256 of tenant, version, worker; highest first):',
      table(
        ['    WORKER', 'SCORE', 'SUBSET', 'VERSION HERE', 'LOADING', 'FILTERS'],
        part.candidates.map((candidate) => [
          `    ${candidate.workerId}`,
          candidate.score,
          candidate.subsetRank === null ? '-' : `#${candidate.subsetRank}`,
          candidate.holds ? 'resident (holds it)' : (candidate.residency ?? '-'),
          candidate.loading ?? '-',
          candidate.subsetRank === null
            ? ''
            : candidate.unreachable
              ? 'unreachable: a failed dial of this call'
              : candidate.failedFilter === null
                ? 'pass'
                : `${candidate.failedFilter.filter}: ${candidate.failedFilter.reason}`,
        ]),
      ),
    );
  }
  lines.push(`  verdict: ${part.verdict}`, '');
  return lines;
}

function packagesSection(explanation: PlacementExplanation): string[] {
  const part = explanation.packages;
  if (part.requested.length === 0) return ['Packages: none requested'];
  return [
    'Packages:',
    `  requested:                ${cell(part.requested)}`,
    ...(part.problem ? [`  refused:                  ${part.problem}`] : []),
    `  duplicates removed:       ${cell(part.duplicates)}`,
    `  skipped (in base image):  ${cell(part.skipped)}`,
    `  to install:               ${cell(part.kept)}`,
  ];
}

/** A placement of the call again after a failed dial, as `explainCall` found it. */
export interface ReplacementView {
  readonly dial: Extract<ClusterEvent, { type: 'CallDialFailed' }>;
  readonly explanation: PlacementExplanation | null;
  readonly result: CallResult | undefined;
}

function recordedLine(result: CallResult | undefined): string {
  return `Recorded:     ${result?.recordedEvents ? `${describeRecorded(result.recordedEvents)} (${result.recorded}${result.divergence ? `: ${result.divergence}` : ''})` : 'nothing (the log does not record this outcome)'}`;
}

/** The section of one placement again after a failed dial. */
function replacementSection(replacement: ReplacementView, attempt: number): string[] {
  const { dial, explanation, result } = replacement;
  const lines = [
    `Attempt ${attempt}: placed again after a failed dial (seq ${dial.seq}, ${dial.at}): ${dial.workerId} could not be reached: ${dial.error}`,
    '',
  ];
  if (explanation === null) {
    // Refused without a placement: no attempt left, or the failed worker's eviction expired the
    // call's session.
    const now = result ? describeDecision(result.decision) : 'not settled';
    lines.push(`Decision now: ${now}`, recordedLine(result));
    return lines;
  }
  lines.push(`Decision now: ${describeDecision(explanation.decision)}`, recordedLine(result), '');
  lines.push(...routingSection(explanation), ...workersSection(explanation));
  return lines;
}

/** The call's steps as the log tells them: each with its seq-ordered time and offset. */
export function lifecycleSection(call: CallViewData): string[] {
  const first = Date.parse(call.requestedAt);
  const offset = (at: string) => {
    const ms = Date.parse(at) - first;
    return Number.isFinite(ms) ? `+${ms}ms` : '';
  };
  const rows: string[][] = [
    ['requested', call.requestedAt, offset(call.requestedAt), `seq ${call.requestedSeq}`],
  ];
  if (call.turnWaitMs !== undefined) {
    rows.push([
      'turn waited',
      call.requestedAt,
      offset(call.requestedAt),
      `${call.turnWaitMs}ms for its session's turn before it was requested`,
    ]);
  }
  if (call.queuedAt) rows.push(['queued', call.queuedAt, offset(call.queuedAt), call.queuedWhy]);
  if (call.admittedAt) {
    const wait = call.queueWaitMs === undefined ? '' : `after ${call.queueWaitMs}ms in the queue`;
    rows.push(['admitted', call.admittedAt, offset(call.admittedAt), wait]);
  }
  call.attempts.forEach((attempt, index) => {
    const where = [
      `worker ${attempt.workerId}`,
      attempt.containerId ? `container ${attempt.containerId}` : 'a new container',
      attempt.checkpointId ? `checkpoint ${attempt.checkpointId}` : 'cold start',
      ...(attempt.version ? [`version ${attempt.version}@${attempt.routingRevision}`] : []),
      ...(attempt.coldLoad ? ['cold load'] : []),
    ].join(', ');
    rows.push([
      index === 0 ? 'placed' : 'placed again',
      attempt.placedAt,
      offset(attempt.placedAt),
      where,
    ]);
    if (attempt.dialError) {
      rows.push([
        'dial failed',
        attempt.dialFailedAt,
        offset(attempt.dialFailedAt),
        attempt.dialError,
      ]);
    }
  });
  if (call.boundAt) {
    rows.push([
      'bound',
      call.boundAt,
      offset(call.boundAt),
      `container ${call.containerId}${call.checkpointId ? ` (checkpoint ${call.checkpointId})` : ''}`,
    ]);
  }
  if (call.finishedAt) {
    const step =
      call.state === 'rejected' ? 'refused' : call.state === 'expired' ? 'released' : 'finished';
    const duration = call.durationMs === undefined ? '' : ` after ${call.durationMs}ms`;
    rows.push([
      step,
      call.finishedAt,
      offset(call.finishedAt),
      `${[call.code, call.message].filter(Boolean).join(': ')}${duration}`,
    ]);
  } else {
    rows.push(['(running)', '', '', 'the log holds no end of it']);
  }
  return ['Lifecycle:', table(['STEP', 'AT', 'OFFSET', 'DETAIL'], rows)];
}

/**
 * The full explanation screen of one call. Every string it is given is made printable first: a
 * log's IDs, hints, packages and messages come from tenants and workers.
 */
export function explainScreen(
  requested: Extract<ClusterEvent, { type: 'CallRequested' }>,
  explained: PlacementExplanation,
  recorded: CallResult | undefined,
  state: StateAtCall,
  placedAgain: readonly ReplacementView[] = [],
  story?: CallViewData,
  queueWait: QueueWait | null = null,
): string {
  const [request, explanation, result, atCall, replacements, lifecycle, wait] = printableData([
    requested,
    explained,
    recorded,
    state,
    placedAgain,
    story,
    queueWait,
  ] as const);
  const { demand } = request;
  const { budget, config } = explanation;
  const lines = [
    `Request ${request.requestId}${request.sessionId ? ` in session ${request.sessionId}` : ''}, seq ${request.seq}, ${request.at}` +
      `${request.tenantId ? `, tenant ${request.tenantId}` : ''}${request.retryOf ? `, retry of ${request.retryOf}` : ''}` +
      `${request.deadlineMs === null ? '' : `, its caller's deadline ${formatDuration(request.deadlineMs)} away`}`,
    `Demand: memory ${demand.memory === null ? `none (default ${formatSize(config.DEFAULT_MEMORY)})` : formatSize(demand.memory)}, ` +
      `${budget.gpuCall ? `GPU call (GPU memory ${formatSize(budget.gpuMemory)})` : 'CPU call'}, imports ${cell(demand.imports)}, ` +
      `checkpoint ${cell(demand.checkpointId)}, disable_optimized_execution ${demand.disableOptimizedExecution === true ? 'yes' : 'no'}` +
      `${demand.pinned === true ? ", pinned (its tenant's version)" : ''}`,
    `Config in force: MEMORY_HEADROOM ${config.MEMORY_HEADROOM}, GPU_MEMORY_HEADROOM ${config.GPU_MEMORY_HEADROOM}, DEFAULT_MEMORY ${formatSize(config.DEFAULT_MEMORY)}`,
    '',
    `Decision now: ${describeDecision(explanation.decision)}`,
    recordedLine(result),
    '',
    ...(lifecycle ? [...lifecycleSection(lifecycle), ''] : []),
    ...(wait ? [...queueWaitSection(wait), ''] : []),
  ];
  if (explanation.session)
    lines.push(`Session ${explanation.session.sessionId}: ${explanation.session.verdict}`, '');
  lines.push(
    ...stateSection(atCall),
    '',
    ...routingSection(explanation),
    ...workersSection(explanation),
    '',
    ...checkpointSection(explanation),
    ...standbySection(explanation, atCall),
    '',
    ...packagesSection(explanation),
  );
  replacements.forEach((replacement, index) =>
    lines.push('', ...replacementSection(replacement, index + 2)),
  );
  return `${lines.join('\n')}\n`;
}
