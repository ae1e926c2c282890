/** `readie pin status` and the pins part of `readie status`: the routing view as text. */
import type { PinStatusResponse } from '../../proto/gen/readie/v1/pins.js';
import { printableData } from '../../shared/printable.js';
import { formatSize } from '../../shared/units.js';

/**
 * The routing part of the cluster as text: the table and its revision, each pin's subset and the
 * calls in flight per version (the drain), staged pins and their pre-warm progress, retained
 * versions, every worker's residency and budget, and whether the table fits the fleet. Every
 * string of the answer is made printable first (tenant IDs, versions, workers' load errors).
 */
export function renderPins(answer: PinStatusResponse): string {
  const status = printableData(answer);
  const lines = [
    `routing revision ${status.revision}, catalogue ${status.catalogueRevision || '(none)'}`,
  ];
  lines.push('', status.pins.length === 0 ? 'pins: none' : 'pins:');
  for (const pin of status.pins) {
    lines.push(
      `  ${pin.tenantId}: ${pin.version} k=${pin.k} revision ${pin.revision} since ${pin.since}` +
        (pin.previousVersion ? ` (previous ${pin.previousVersion})` : ''),
    );
    lines.push(
      `    subset: ${pin.subset.map((m) => `${m.workerId} (${m.state || 'nothing reported'})`).join(', ') || '(no worker)'}`,
    );
    if (pin.inFlight.length > 0) {
      lines.push(
        `    in flight: ${pin.inFlight.map((v) => `${v.version || '(no version)'} ${v.calls}`).join(', ')}`,
      );
    }
  }
  lines.push('', status.staged.length === 0 ? 'staged: none' : 'staged:');
  for (const staged of status.staged) {
    lines.push(
      `  ${staged.tenantId}: ${staged.version} k=${staged.k} since ${staged.since}: ${staged.ready ? 'resident on its whole subset, ready to flip' : 'pre-warming'}`,
    );
    lines.push(
      `    progress: ${staged.subset.map((m) => `${m.workerId} ${m.state || 'waiting'}${m.error ? ` (${m.error})` : ''}`).join(', ') || '(no worker)'}`,
    );
  }
  if (status.retained.length > 0) {
    lines.push('', 'retained (PIN_RETENTION):');
    for (const kept of status.retained)
      lines.push(`  ${kept.tenantId}: ${kept.version} until ${kept.until}`);
  }
  lines.push('', 'workers:');
  for (const worker of status.workers) {
    const budget =
      worker.residentMemory === undefined
        ? 'no budget reported'
        : formatSize(worker.residentMemory);
    lines.push(
      `  ${worker.workerId}: resident ${formatSize(worker.residentUsed)} of ${budget}, protected ${formatSize(worker.protectedMemory)}` +
        (worker.coldLoads.length > 0 ? `, loading ${worker.coldLoads.join(', ')}` : ''),
    );
    for (const version of worker.versions) {
      lines.push(
        `    ${version.checkpointId} ${version.state}${version.protected ? ' (protected)' : ''}${version.error ? `: ${version.error}` : ''}`,
      );
    }
  }
  const budget = status.budget;
  if (budget) {
    lines.push(
      '',
      `resident budget: the table needs ${formatSize(budget.required)}, the workers offer ${formatSize(budget.offered)}` +
        (budget.workersWithoutBudget > 0 ? ` (${budget.workersWithoutBudget} report none)` : '') +
        `: ${budget.fits ? 'fits' : 'does not fit'}` +
        (budget.overBudget.length > 0
          ? `; over their own budget: ${budget.overBudget.join(', ')}`
          : ''),
    );
  }
  return `${lines.join('\n')}\n`;
}
