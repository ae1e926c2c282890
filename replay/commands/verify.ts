/**
 * `replay verify <log>`: exit 0 when every recorded decision is reproduced; at the first
 * divergence, exit 1 (an incident: the same placement rules decide otherwise now), or exit 3 when
 * the log was recorded under another version of the placement rules (the rules changed).
 */
import type { CallResult } from '../engine/call-result.js';
import { Replayer } from '../engine/replayer.js';
import { describeDecision, describeRecorded } from '../format/decision.js';
import { explainScreen } from '../format/explain-screen.js';
import { openLogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { explainCall } from './explain-call.js';
import { out, type SourceOptions } from './options.js';
import { PLACEMENT_RULES_VERSION } from '../../src/core/placement/index.js';
import { printable } from '../../src/shared/printable.js';

/** Exit status of a divergence recorded under another version of the placement rules. */
export const RULES_CHANGED_STATUS = 3;

/** Verifies a log; resolves to 0 (reproduced), 1 (diverged) or 3 (rules changed). */
export async function verifyCommand(
  logPaths: string | readonly string[],
  options: SourceOptions = {},
): Promise<number> {
  let divergence: CallResult | undefined;
  let checked = 0;
  let unrecorded = 0;
  const source = await openLogSource(logPaths, options);
  const replayer = new Replayer({
    onCall: (result) => {
      if (result.recorded === 'none') unrecorded += 1;
      else checked += 1;
      if (result.recorded === 'diverged') divergence ??= result;
    },
  });
  try {
    // The replayer folds every event: the snapshots after the first are passed over.
    await forEachEvent(
      source,
      (event) => {
        replayer.push(event);
        return divergence === undefined;
      },
      0,
      true,
    );
    if (divergence === undefined) replayer.end();
  } finally {
    await source.close();
  }
  if (!divergence) {
    out(
      `verified: ${checked} recorded decision${checked === 1 ? '' : 's'} reproduced exactly${unrecorded > 0 ? ` (${unrecorded} call${unrecorded === 1 ? '' : 's'} had no recorded outcome)` : ''}`,
    );
    return 0;
  }
  const rulesChanged = divergence.rulesVersion !== PLACEMENT_RULES_VERSION;
  if (rulesChanged) {
    out(
      `RULES CHANGED at seq ${divergence.seq}, request ${printable(divergence.requestId)}: the log was ` +
        `recorded under placement rules v${divergence.rulesVersion}; this replay decides by ` +
        `v${PLACEMENT_RULES_VERSION}`,
    );
  } else {
    out(`DIVERGED at seq ${divergence.seq}, request ${printable(divergence.requestId)}`);
  }
  out(`  recorded:         ${describeRecorded(divergence.recordedEvents ?? [])}`);
  out(`  placement now:    ${describeDecision(divergence.decision)}`);
  out(`  first difference: ${printable(divergence.divergence ?? '')}`);
  if (rulesChanged) {
    out('');
    out(
      `The difference is the change of the placement rules, not an incident: to reproduce this ` +
        `log, replay it with a readie whose rules are v${divergence.rulesVersion} ` +
        `(docs/placement.md lists what each version changed); to pin the new decision, re-record it.`,
    );
  }
  out('');
  out('Why placement decides this now:');
  const again = await openLogSource(logPaths, options);
  try {
    // From the snapshot before the call (the whole log when that misses the call's request).
    const from = (await again.snapshotAtOrBefore(divergence.seq - 1)) ?? 0;
    const explained =
      (await explainCall(again, { seq: divergence.seq }, {}, from)) ??
      (from > 0 ? await explainAgain(logPaths, options, divergence.seq) : undefined);
    if (explained)
      process.stdout.write(
        explainScreen(explained.request, explained.explanation, divergence, explained.atCall),
      );
  } finally {
    await again.close();
  }
  return rulesChanged ? RULES_CHANGED_STATUS : 1;
}

/** The divergent call explained from the start of the log (its request came before the snapshot). */
async function explainAgain(
  logPaths: string | readonly string[],
  options: SourceOptions,
  seq: number,
): ReturnType<typeof explainCall> {
  const source = await openLogSource(logPaths, options);
  try {
    return await explainCall(source, { seq });
  } finally {
    await source.close();
  }
}
