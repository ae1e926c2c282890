/**
 * Replay over a synthetic 1M-event log (registrations, utilization, requests, placements, finishes,
 * containers, sessions over 1,000 workers): events per second for `state` (read + fold) and for
 * `verify` (read + fold + re-decide every call), beside the plain in-memory fold rate.
 */
import { join } from 'node:path';
import { readJsonl, writeJsonl, encodeEvent, type ClusterEvent } from '../src/events/index.js';
import { clusterProjection, fold, initialState } from '../src/projections/index.js';
import { Replayer } from '../replay/engine/replayer.js';
import { simulatedLog } from './simulated-log.js';
import { collectGarbage, perSecond, ratio, withTempDir } from './support.js';

const EVENTS = 1_000_000;
const WORKERS = 1_000;

/** Runs the replay benchmark. */
export async function run() {
  return withTempDir(async (dir) => {
    const file = join(dir, 'synthetic.jsonl');
    const events: ClusterEvent[] = [];
    const generationStart = performance.now();
    await writeJsonl(
      (function* () {
        for (const event of simulatedLog({ seed: 7, events: EVENTS, workers: WORKERS })) {
          events.push(event);
          yield encodeEvent(event);
        }
      })(),
      file,
    );
    const generationMs = performance.now() - generationStart;
    const calls = events.filter((e) => e.type === 'CallRequested').length;

    collectGarbage();
    const foldStart = performance.now();
    fold(events);
    const foldMs = performance.now() - foldStart;

    collectGarbage();
    const stateStart = performance.now();
    let state = initialState();
    for await (const { event } of readJsonl(file)) state = clusterProjection.apply(state, event);
    const stateMs = performance.now() - stateStart;

    collectGarbage();
    let matched = 0;
    let other = 0;
    const verifyStart = performance.now();
    const replayer = new Replayer({
      onCall: (result) => (result.recorded === 'match' ? (matched += 1) : (other += 1)),
    });
    for await (const { event } of readJsonl(file)) replayer.push(event);
    replayer.end();
    const verifyMs = performance.now() - verifyStart;
    if (other > 0) throw new Error(`${other} calls did not reproduce`);

    const foldRate = perSecond(events.length, foldMs);
    return {
      events: events.length,
      workers: WORKERS,
      calls,
      generationSeconds: Math.round(generationMs) / 1000,
      plainFoldEventsPerSecond: foldRate,
      state: {
        seconds: Math.round(stateMs) / 1000,
        eventsPerSecond: perSecond(events.length, stateMs),
        ratioToPlainFold: ratio(perSecond(events.length, stateMs), foldRate),
      },
      verify: {
        seconds: Math.round(verifyMs) / 1000,
        eventsPerSecond: perSecond(events.length, verifyMs),
        ratioToPlainFold: ratio(perSecond(events.length, verifyMs), foldRate),
        callsReproduced: matched,
      },
      targets: { verifySecondsAtMost: 10 },
      note: 'state and verify read the JSONL file from disk (parse, validate, fold); plain fold is fold() over the decoded events in memory',
    };
  });
}
