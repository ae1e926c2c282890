/**
 * `replay explain`'s page of one call, for core tests: the call explained against the state of
 * `log`, then decided into it (the page reads the `CallRequested` the decision records).
 */
import { explainScreen } from '../../replay/format/explain-screen.js';
import { decide } from '../../src/core/decisions.js';
import { explainPlacement, type CallToPlace } from '../../src/core/placement/index.js';
import type { History } from './events.js';

/** The lines of the explain page of `call` placed against `log` (which gains its events). */
export function explainPageLines(log: History, call: CallToPlace): string[] {
  const before = log.state();
  const explanation = explainPlacement(before, call);
  log.add(...decide('call', before, { call }).events);
  const requested = log.events.find((event) => event.type === 'CallRequested');
  if (requested?.type !== 'CallRequested') throw new Error('the call was not requested');
  return explainScreen(requested, explanation, undefined, {
    session: null,
    reservations: [],
  }).split('\n');
}
