/**
 * The call history as people read it (`readie calls`, `readie call`, `readie logs`): pure
 * renderers of the router's answers. Every string of an answer is made printable before it is
 * laid out (`printableData`): tenants chose request IDs, function names, messages and output.
 */
import type { CallView, HistoryWindow, OutputLine } from '../../proto/gen/readie/v1/history.js';
import { LogSource } from '../../proto/gen/readie/v1/call.js';
import { escapedWhole, printable, printableData } from '../../shared/printable.js';
import { formatDuration, roughDuration } from '../../shared/units.js';
import { table } from '../text-table.js';
import { age, roughSize } from '../status/status-sections.js';

export { roughDuration };

/** `readie calls`: one line per call, newest first, then what the history holds. */
export function renderCallList(
  calls: readonly CallView[],
  window: HistoryWindow | undefined,
  now: number,
): string {
  const rows = printableData(calls).map((call) => [
    call.requestId,
    call.tenantId || '-',
    call.function || '-',
    call.state,
    inputsText(call),
    call.code || '-',
    age(call.requestedAt, now),
    roughDuration(call.durationMs),
    waited(call, now),
    call.workerId || '-',
    call.attempts.length > 1 ? String(call.attempts.length) : '',
  ]);
  const body =
    calls.length === 0
      ? 'no calls match\n'
      : `${table(['REQUEST', 'TENANT', 'FUNCTION', 'STATE', 'INPUTS', 'CODE', 'AGO', 'TOOK', 'QUEUED', 'WORKER', 'TRIES'], rows)}\n`;
  return window === undefined ? body : `${body}${windowLine(window)}\n`;
}

/** A batch's inputs (`25`, `25, 2 raised`); empty for a plain call. */
function inputsText(call: CallView): string {
  if (call.inputs === undefined) return '';
  return call.inputsRaised ? `${call.inputs}, ${call.inputsRaised} raised` : String(call.inputs);
}

/**
 * How long a call waited in the admission queue: its wait, or for one still waiting the wait so
 * far (`12s…`); empty for a call that never waited.
 */
function waited(call: CallView, now: number): string {
  if (call.queueWaitMs !== undefined) return roughDuration(call.queueWaitMs);
  const since = Date.parse(call.queuedAt);
  if (!call.queuedAt || !Number.isFinite(since)) return '';
  return `${roughDuration(Math.max(0, now - since))}…`;
}

/** The history's window in one line. */
export function windowLine(window: HistoryWindow): string {
  const since =
    window.oldestRequestedAt === '' ? '' : ` since ${printable(window.oldestRequestedAt)}`;
  return (
    `history: ${window.calls} of at most ${window.maxCalls} calls${since}, ` +
    `kept ${formatDuration(window.retentionMs)}, about ${roughSize(window.approxBytes)}`
  );
}

/** `readie call`: one call's whole story, step by step. */
export function renderCall(raw: CallView): string {
  const call = printableData(raw);
  const lines = [
    `call ${call.requestId}`,
    `  tenant     ${call.tenantId || '-'}`,
    `  function   ${call.function || '-'}`,
    `  session    ${call.sessionId || '-'}`,
    ...(call.inputs === undefined ? [] : [`  inputs     ${inputsText(call)} (a batch of a map)`]),
    ...(call.retryOf ? [`  retry of   ${call.retryOf}`] : []),
    `  state      ${call.state}${call.code ? ` (${call.code})` : ''}`,
    ...(call.raisedType
      ? [`  raised     ${call.raisedType}${call.raisedMessage ? `: ${call.raisedMessage}` : ''}`]
      : call.message
        ? [`  message    ${call.message}`]
        : []),
    `  took       ${roughDuration(call.durationMs)}`,
    ...(call.queuedAt
      ? [
          `  queued     ${
            call.queueWaitMs === undefined ? 'waiting' : roughDuration(call.queueWaitMs)
          }${call.queuedWhy ? `: ${call.queuedWhy}` : ''}`,
        ]
      : []),
    `  memory     ${call.memory === undefined ? 'default' : roughSize(call.memory)}${call.gpu ? ', GPU' : ''}`,
    '',
    'steps',
  ];
  const steps: [string, string, string][] = [
    ['requested', call.requestedAt, `seq ${call.requestedSeq}`],
  ];
  if (call.turnWaitMs !== undefined) {
    steps.push([
      'turn waited',
      call.requestedAt,
      `${call.turnWaitMs}ms for its session's turn before it was requested`,
    ]);
  }
  if (call.queuedAt) steps.push(['queued', call.queuedAt, call.queuedWhy]);
  if (call.admittedAt) {
    steps.push([
      'admitted',
      call.admittedAt,
      `after ${roughDuration(call.queueWaitMs)} in the queue`,
    ]);
  }
  call.attempts.forEach((attempt, index) => {
    const where = [
      `worker ${attempt.workerId}`,
      attempt.containerId ? `container ${attempt.containerId}` : 'a new container',
      attempt.checkpointId ? `checkpoint ${attempt.checkpointId}` : 'cold start',
      ...(attempt.version
        ? [`version ${attempt.version} (revision ${attempt.routingRevision})`]
        : []),
      ...(attempt.coldLoad ? ['cold load'] : []),
    ].join(', ');
    steps.push([index === 0 ? 'placed' : 'placed again', attempt.placedAt, where]);
    if (attempt.dialError) steps.push(['dial failed', attempt.dialFailedAt, attempt.dialError]);
  });
  if (call.boundAt) {
    steps.push([
      'bound',
      call.boundAt,
      `container ${call.containerId}${call.checkpointId ? ` (checkpoint ${call.checkpointId})` : ''}`,
    ]);
  }
  if (call.finishedAt) {
    steps.push([
      endStep(call),
      call.finishedAt,
      [call.code, call.message].filter(Boolean).join(': '),
    ]);
  }
  const first = Date.parse(call.requestedAt);
  for (const [step, at, detail] of steps) {
    const offset = Number.isFinite(Date.parse(at))
      ? `+${roughDuration(Date.parse(at) - first)}`
      : '';
    lines.push(`  ${step.padEnd(13)} ${at.padEnd(25)} ${offset.padEnd(8)} ${detail}`.trimEnd());
  }
  return `${lines.join('\n')}\n`;
}

/** How a call's last step is named: it finished, was refused, left the queue or was released. */
function endStep(call: CallView): string {
  if (call.state === 'expired') return 'released';
  if (call.state !== 'rejected') return 'finished';
  return call.queuedAt && !call.admittedAt ? 'left queue' : 'refused';
}

const SOURCE_TAGS: Readonly<Record<number, string>> = {
  [LogSource.LOG_SOURCE_STDOUT]: 'stdout',
  [LogSource.LOG_SOURCE_STDERR]: 'stderr',
  [LogSource.LOG_SOURCE_SYSTEM]: 'readie',
};

/** One kept line of output, as `readie logs` prints it (escaped: a function's output is hostile). */
export function renderOutputLine(line: OutputLine, withTimes: boolean): string {
  const tag = SOURCE_TAGS[line.source] ?? 'output';
  const text = escapedWhole(line.text);
  const prefix = withTimes ? `${printable(line.at)} ` : '';
  return tag === 'stdout' ? `${prefix}${text}\n` : `${prefix}[${tag}] ${text}\n`;
}
