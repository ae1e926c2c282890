/**
 * `replay whatif <log> --set NAME=VALUE ...`: decide every call again under a changed config,
 * against the recorded state, and list the calls whose outcome would change. With `--quota` or
 * `--quota-file`, admission is decided again under another quota table instead (whatif-quota.ts).
 */
import { place, type PlacementDecision } from '../../src/core/placement/index.js';
import { decisionFields, eventsDifference } from '../engine/compare.js';
import { Replayer } from '../engine/replayer.js';
import { describeDecision, describeRecorded } from '../format/decision.js';
import { table } from '../format/table.js';
import { openLogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { ReplayInputError } from '../io/replay-input-error.js';
import { out, parseOverrides, type SourceOptions } from './options.js';
import { parseQuotaTable } from './quota-options.js';
import { whatifQuotaCommand } from './whatif-quota.js';

/** Options of `replay whatif`. */
export interface WhatifOptions extends SourceOptions {
  readonly set?: readonly string[];
  /** `tenant=ID,weight=N,max-slots=N|none,max-queued=N`, one per tenant. */
  readonly quota?: readonly string[];
  /** A quota table as `readie quota status --json` prints it. */
  readonly quotaFile?: string;
  readonly json?: boolean;
}

type Kind =
  'placed-to-rejected' | 'rejected-to-placed' | 'other-worker' | 'other-checkpoint' | 'other';

function kindOf(before: Record<string, unknown> | undefined, after: PlacementDecision): Kind {
  const wasPlaced = before?.type === 'CallPlaced';
  if (wasPlaced && after.outcome === 'rejected') return 'placed-to-rejected';
  if (!wasPlaced && after.outcome === 'placed') return 'rejected-to-placed';
  if (wasPlaced && after.outcome === 'placed') {
    if (before.workerId !== after.workerId) return 'other-worker';
    if ((before.checkpointId ?? null) !== after.checkpointId) return 'other-checkpoint';
  }
  return 'other';
}

/** Runs `replay whatif`; resolves to the exit status. */
export async function whatifCommand(
  logPaths: string | readonly string[],
  options: WhatifOptions,
): Promise<number> {
  const overrides = parseOverrides(options.set);
  const quotas = parseQuotaTable(options.quota, options.quotaFile);
  if (quotas !== null) {
    if (Object.keys(overrides).length > 0) {
      throw new ReplayInputError(
        'whatif decides either a changed config (--set) or another quota table (--quota, --quota-file), not both at once: run them apart',
      );
    }
    return whatifQuotaCommand(logPaths, quotas, options);
  }
  if (Object.keys(overrides).length === 0)
    throw new ReplayInputError(
      'whatif needs at least one --set NAME=VALUE, or a quota table (--quota, --quota-file)',
    );
  const source = await openLogSource(logPaths, options);
  const alternatives = new Map<number, PlacementDecision>();
  const counts: Record<Kind, number> = {
    'placed-to-rejected': 0,
    'rejected-to-placed': 0,
    'other-worker': 0,
    'other-checkpoint': 0,
    other: 0,
  };
  const rows: string[][] = [];
  let calls = 0;
  const replayer = new Replayer({
    onDecide: (call, state, config, request, caches) => {
      const changed = { ...config, ...overrides };
      alternatives.set(request.seq, place(state, call, { config: changed, caches }));
    },
    onCall: (result) => {
      calls += 1;
      const after = alternatives.get(result.seq) as PlacementDecision;
      alternatives.delete(result.seq);
      const baseline = result.recordedEvents ?? result.decision.events.map(decisionFields);
      const difference = eventsDifference(baseline, after.events);
      if (difference === null) return;
      const outcome = baseline.find((e) => e.type === 'CallPlaced' || e.type === 'CallRejected');
      const kind = kindOf(outcome, after);
      counts[kind] += 1;
      const was = result.recordedEvents
        ? describeRecorded(baseline)
        : describeDecision(result.decision);
      if (options.json) {
        out(
          JSON.stringify({
            seq: result.seq,
            requestId: result.requestId,
            change: kind,
            before: was,
            after: describeDecision(after),
            difference,
          }),
        );
      } else {
        rows.push([String(result.seq), result.requestId, kind, was, describeDecision(after)]);
      }
    },
  });
  try {
    await forEachEvent(source, (event) => replayer.push(event), 0, true);
    replayer.end();
  } finally {
    await source.close();
  }
  const changed = Object.values(counts).reduce((sum, n) => sum + n, 0);
  const settings = (options.set ?? []).join(' ');
  if (options.json) {
    out(JSON.stringify({ summary: { calls, changed, ...counts, set: options.set ?? [] } }));
    return 0;
  }
  if (rows.length > 0)
    out(table(['SEQ', 'REQUEST', 'CHANGE', 'RECORDED / BEFORE', `WITH ${settings}`], rows));
  out(
    `${calls} call${calls === 1 ? '' : 's'} decided again with ${settings}: ${changed} would change ` +
      `(placed -> rejected ${counts['placed-to-rejected']}, rejected -> placed ${counts['rejected-to-placed']}, ` +
      `another worker ${counts['other-worker']}, another checkpoint ${counts['other-checkpoint']}, other ${counts.other})`,
  );
  return 0;
}
