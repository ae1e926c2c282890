/** `replay verify <log>`: exit 0 when every recorded decision is reproduced, 1 at the first divergence. */
import type { CallResult } from '../engine/call-result.js';
import { Replayer } from '../engine/replayer.js';
import { describeDecision, describeRecorded } from '../format/decision.js';
import { explainScreen } from '../format/explain-screen.js';
import { openLogSource } from '../io/log-source.js';
import { forEachEvent } from '../io/read-log.js';
import { explainCall } from './explain-call.js';
import { out } from './options.js';

/** Verifies a log; resolves to 0 (reproduced) or 1 (diverged), printing the first divergence. */
export async function verifyCommand(logPath: string): Promise<number> {
  let divergence: CallResult | undefined;
  let checked = 0;
  let unrecorded = 0;
  const source = openLogSource(logPath);
  const replayer = new Replayer({
    onCall: (result) => {
      if (result.recorded === 'none') unrecorded += 1;
      else checked += 1;
      if (result.recorded === 'diverged') divergence ??= result;
    },
  });
  try {
    await forEachEvent(source, (event) => {
      replayer.push(event);
      return divergence === undefined;
    });
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
  out(`DIVERGED at seq ${divergence.seq}, request ${divergence.requestId}`);
  out(`  recorded:         ${describeRecorded(divergence.recordedEvents ?? [])}`);
  out(`  placement now:    ${describeDecision(divergence.decision)}`);
  out(`  first difference: ${divergence.divergence ?? ''}`);
  out('');
  out('Why placement decides this now:');
  const again = openLogSource(logPath);
  try {
    const explained = await explainCall(again, { seq: divergence.seq });
    if (explained)
      process.stdout.write(
        explainScreen(explained.request, explained.explanation, divergence, explained.atCall),
      );
  } finally {
    await again.close();
  }
  return 1;
}
