/**
 * `replay verify <log> [--rules recorded|current]`: exit 0 when every recorded decision is
 * reproduced; at the first divergence, exit 1 (an incident: the rules the log was recorded under
 * decide otherwise now) or 3 (the rules changed: `--rules current` asked what today's rules would
 * do with a log recorded under others, or the log's version is one this build does not keep).
 */
import type { DecisionResult } from '../engine/append-check.js';
import { describeDecision, describeRecorded } from '../format/decision.js';
import { explainScreen } from '../format/explain-screen.js';
import { openLogSource } from '../io/log-source.js';
import { explainCall } from './explain-call.js';
import { out, type SourceOptions } from './options.js';
import { verifyLog } from './verify-log.js';
import {
  keepsRulesVersion,
  KEPT_RULES_VERSIONS,
  PLACEMENT_RULES_VERSION,
} from '../../src/core/placement/index.js';
import { printable } from '../../src/shared/printable.js';

/** Exit status of a divergence recorded under another version of the placement rules. */
export const RULES_CHANGED_STATUS = 3;

/** Options of `replay verify`. */
export interface VerifyOptions {
  /** `recorded` (default): each decision by the rules it was recorded under; `current`: today's. */
  readonly rules?: 'recorded' | 'current';
}

/** The words for a decision other than a call's, in the reports of a divergence. */
const TRIGGER_WORDS: Readonly<Record<DecisionResult['trigger'], string>> = {
  start: "router's start (and its recovery of the calls in flight)",
  answer: "call's first answer (its container, and its session's pin)",
  reaper: 'reaper pass',
  probeFailure: 'failed health probe',
  probeSuccess: 'health probe that answered',
  statusReport: "worker's status report",
  utilizationReport: "worker's load report",
  containerReport: "worker's container report",
  residencyReport: "worker's residency report",
  end: "call's end",
  sessionEnd: "session's end",
  protection: 'routing pass (what workers keep)',
  turnRefusal: "session-busy refusal (a session call's wait for its turn)",
  stage: 'pin stage',
  pinChange: 'pin change',
  quotaChange: 'quota change',
};

function eventsText(events: readonly Record<string, unknown>[]): string {
  if (events.length === 0) return 'nothing';
  return events.map((event) => printable(JSON.stringify(event))).join('\n                    ');
}

/** Prints a divergence of a decision other than a call's; the exit status. */
function reportOther(
  result: DecisionResult,
  recorded: number,
  rules: 'recorded' | 'current',
): number {
  const rulesChanged =
    recorded !== PLACEMENT_RULES_VERSION && (rules === 'current' || !keepsRulesVersion(recorded));
  const what = `the ${TRIGGER_WORDS[result.trigger]} (cause ${printable(result.cause)}) at seq ${result.seq}, ${result.at}`;
  out(
    rulesChanged
      ? `RULES CHANGED at ${what}: the log was recorded under placement rules v${recorded}; this replay decides by v${PLACEMENT_RULES_VERSION}`
      : `DIVERGED at ${what}: decided by placement rules v${recorded}, the log's own`,
  );
  out(`  recorded:         ${eventsText(result.recordedEvents)}`);
  out(`  decided now:      ${eventsText(result.computedEvents)}`);
  out(`  first difference: ${printable(result.divergence ?? '')}`);
  return rulesChanged ? RULES_CHANGED_STATUS : 1;
}

/** Verifies a log; resolves to 0 (reproduced), 1 (diverged) or 3 (rules changed). */
export async function verifyCommand(
  logPaths: string | readonly string[],
  options: VerifyOptions & SourceOptions & { readonly jobs?: number } = {},
): Promise<number> {
  const rules = options.rules ?? 'recorded';
  const { counts, divergence, otherDivergence } = await verifyLog(logPaths, options);
  const { checked, unrecorded, others, undecidedDials } = counts;
  if (otherDivergence)
    return reportOther(otherDivergence.result, otherDivergence.rulesVersion, rules);
  if (!divergence) {
    out(
      `verified: ${checked} recorded decision${checked === 1 ? '' : 's'} reproduced exactly${unrecorded > 0 ? ` (${unrecorded} call${unrecorded === 1 ? '' : 's'} had no recorded outcome)` : ''}` +
        (others > 0
          ? `, and ${others} other decision${others === 1 ? '' : 's'} of the core (starts, reports, answers, probes, reaper passes, session turns, ends, pin changes)`
          : '') +
        (undecidedDials > 0
          ? undecidedDials === 1
            ? "; 1 failed dial of a call requested before the log's first event was folded, not decided again (give the part of the log that holds its request to decide it)"
            : `; ${undecidedDials} failed dials of calls requested before the log's first event were folded, not decided again (give the part of the log that holds their requests to decide them)`
          : ''),
    );
    return 0;
  }
  const recorded = divergence.rulesVersion;
  // Decided by another version than the log's: today's, asked for, or the only one this build has.
  const rulesChanged =
    recorded !== PLACEMENT_RULES_VERSION && (rules === 'current' || !keepsRulesVersion(recorded));
  const at = `at seq ${divergence.seq}, request ${printable(divergence.requestId)}`;
  if (rulesChanged) {
    out(
      rules === 'current'
        ? `RULES CHANGED ${at}: the log was recorded under placement rules v${recorded}; ` +
            `--rules current decides by today's v${PLACEMENT_RULES_VERSION}`
        : `RULES CHANGED ${at}: the log was recorded under placement rules v${recorded}, which ` +
            `this build does not keep (it keeps v${KEPT_RULES_VERSIONS.join(', v')}); it decides by ` +
            `v${PLACEMENT_RULES_VERSION}`,
    );
  } else {
    out(`DIVERGED ${at}: decided by placement rules v${recorded}, the log's own`);
  }
  out(`  recorded:         ${describeRecorded(divergence.recordedEvents ?? [])}`);
  out(`  placement now:    ${describeDecision(divergence.decision)}`);
  out(`  first difference: ${printable(divergence.divergence ?? '')}`);
  if (rulesChanged) {
    out('');
    out(
      rules === 'current'
        ? `The difference is what today's rules change, not an incident: replay without --rules ` +
            `current to check the log by its own rules v${recorded} (docs/placement.md lists what ` +
            `each version changed); to pin the new decision, re-record it.`
        : `The difference may be the change of the placement rules, not an incident: replay it ` +
            `with a readie that keeps rules v${recorded} (docs/placement.md lists what each ` +
            `version changed).`,
    );
  }
  out('');
  out('Why placement decides this now:');
  const again = await openLogSource(logPaths, options);
  try {
    // From the snapshot before the call (the whole log when that misses the call's request).
    const from = (await again.snapshotAtOrBefore(divergence.seq - 1)) ?? 0;
    const explained =
      (await explainCall(again, { seq: divergence.seq }, {}, from, rules)) ??
      (from > 0 ? await explainAgain(logPaths, options, divergence.seq, rules) : undefined);
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
  rules: 'recorded' | 'current',
): ReturnType<typeof explainCall> {
  const source = await openLogSource(logPaths, options);
  try {
    return await explainCall(source, { seq }, {}, 0, rules);
  } finally {
    await source.close();
  }
}
