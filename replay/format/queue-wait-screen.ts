/**
 * The "Waited in the admission queue" part of `replay explain`: queued at, admitted at (or how it
 * left), the earlier calls of other tenants it was admitted ahead of and why, and who was
 * admitted before it and why (their tenant's slots held beside its own). The
 * wait's strings are printable already (the caller escapes them with the rest of the screen).
 */
import { formatDuration } from '../../src/shared/units.js';
import type { QueueWait } from '../engine/queue-wait.js';

function waited(from: string, to: string): string {
  const ms = Date.parse(to) - Date.parse(from);
  return Number.isFinite(ms) ? formatDuration(Math.max(0, ms)) : '?';
}

/** The section's lines. */
export function queueWaitSection(wait: QueueWait): string[] {
  const lines = [
    'Waited in the admission queue',
    `  queued at ${wait.queuedAt} (seq ${wait.queuedSeq}): ${wait.why}`,
  ];
  if (wait.admitted) {
    lines.push(
      `  admitted at ${wait.admitted.at} (seq ${wait.admitted.seq}), after ${waited(wait.queuedAt, wait.admitted.at)}`,
    );
  } else if (wait.left) {
    lines.push(
      `  left the queue at ${wait.left.at} (seq ${wait.left.seq}), after ${waited(wait.queuedAt, wait.left.at)}: ${wait.left.reason}, ${wait.left.code}`,
    );
  } else {
    lines.push('  still waiting when the log ends');
  }
  if (wait.admittedAhead > 0) {
    lines.push(
      `  admitted ahead of ${wait.admittedAhead} ${wait.admittedAhead === 1 ? 'call of another tenant' : 'calls of other tenants'} queued before it (fair order: fewest slots held first, ties by tenant ID):`,
    );
    for (const other of wait.ahead) {
      lines.push(
        `    ${other.requestId} of ${other.tenantId === '' ? '(no tenant)' : `tenant ${other.tenantId}`}, queued at seq ${other.queuedSeq}: ${other.why}`,
      );
    }
    const unlisted = wait.admittedAhead - wait.ahead.length;
    if (unlisted > 0) lines.push(`    ... and ${unlisted} more`);
  }
  if (wait.admittedBefore === 0) {
    lines.push('  no call was admitted before it while it waited');
    return lines;
  }
  lines.push(
    `  ${wait.admittedBefore} call${wait.admittedBefore === 1 ? ' was' : 's were'} admitted before it (fair order: fewest slots held first, ties by tenant ID):`,
  );
  for (const other of wait.before) {
    lines.push(
      `    seq ${other.seq} ${other.at} ${other.requestId} of ${other.tenantId === '' ? '(no tenant)' : `tenant ${other.tenantId}`}: ${other.why}`,
    );
  }
  const unlisted = wait.admittedBefore - wait.before.length;
  if (unlisted > 0) lines.push(`    ... and ${unlisted} more`);
  return lines;
}
