/** One-line descriptions of decisions, recorded or computed, with their strings printable. */
import type { PlacementDecision } from '../../src/core/placement/index.js';
import { printableData } from '../../src/shared/printable.js';
import { cell } from './table.js';

/** "placed on w1 (new container, checkpoint ckpt-numpy)" or "rejected RESOURCE_EXHAUSTED: ...". */
export function describeDecision(made: PlacementDecision): string {
  const decision = printableData(made);
  const routed =
    decision.version === null
      ? ''
      : `, version ${decision.version} at revision ${decision.routingRevision ?? '-'}`;
  if (decision.outcome === 'rejected') {
    const hint = decision.retryAfterMs === null ? '' : `, retry after ${decision.retryAfterMs} ms`;
    return `rejected ${decision.code}: ${decision.message}${routed ? ` (${routed.slice(2)}${hint})` : ''}`;
  }
  const where =
    decision.containerId === null ? 'new container' : `container ${decision.containerId}`;
  const checkpoint =
    decision.checkpointId === null ? 'cold start' : `checkpoint ${decision.checkpointId}`;
  const packages = decision.packages.length > 0 ? `, install ${decision.packages.join(' ')}` : '';
  const load = decision.coldLoad ? ', cold load' : '';
  return `placed on ${decision.workerId} (${where}, ${checkpoint}${packages}${routed}${load})`;
}

/** The recorded decision events in one line. */
export function describeRecorded(recorded: readonly Record<string, unknown>[]): string {
  const events = printableData(recorded);
  const outcome = events.find((e) => e.type === 'CallPlaced' || e.type === 'CallRejected');
  if (!outcome) return 'no outcome recorded';
  if (outcome.type === 'CallRejected') {
    return `rejected ${String(outcome.code)}: ${String(outcome.message)}`;
  }
  const container =
    typeof outcome.containerId === 'string' ? `container ${outcome.containerId}` : 'new container';
  const checkpoint =
    typeof outcome.checkpointId === 'string' ? `checkpoint ${outcome.checkpointId}` : 'cold start';
  return `placed on ${String(outcome.workerId)} (${container}, ${checkpoint}, packages ${cell(outcome.packages as string[])})`;
}
