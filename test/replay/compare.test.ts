/**
 * Comparing a recorded decision with the one made now: `eventsDifference`, read from the events
 * themselves, says exactly what `firstDifference` says of their `decisionFields` (the text replay
 * reports), for matches and for every kind of difference, values whose JSON is the same though
 * they are not (key order, non-finite numbers, undefined fields) included.
 */
import { expect } from 'chai';
import type { ClusterEvent, NewEvent } from '../../src/events/index.js';
import { decisionFields, eventsDifference, firstDifference } from '../../replay/engine/compare.js';

type Event = ClusterEvent | NewEvent;

function utilization(fields: Record<string, unknown> = {}): Event {
  return {
    type: 'WorkerUtilization',
    workerId: 'w1',
    memoryUsed: 1024,
    containerCount: 1,
    cpuUsed: null,
    cpuTotal: null,
    gpuMemoryUsed: null,
    containers: [{ containerId: 'c1', state: 'idle', checkpointId: 'k1' }],
    reportSeq: 3,
    standbys: [{ checkpointId: 'k1', ready: 2 }],
    ...fields,
  } as unknown as Event;
}

const placed = (fields: Record<string, unknown> = {}): Event =>
  ({
    seq: 9,
    at: '2026-11-30T10:00:00.000Z',
    cause: 'call:r1',
    type: 'CallPlaced',
    requestId: 'r1',
    workerId: 'w1',
    containerId: null,
    ...fields,
  }) as unknown as Event;

/** Pairs (recorded, computed): the first five match, the rest differ. */
const CASES: [string, Event[], Event[]][] = [
  ['the same events', [utilization(), placed()], [utilization(), placed({ seq: 1 })]],
  [
    'an undefined field inside a nested object (left out of its JSON)',
    [utilization({ standbys: [{ checkpointId: 'k1', ready: 2, extra: undefined }] })],
    [utilization()],
  ],
  [
    'NaN against Infinity (both null in JSON)',
    [utilization({ cpuUsed: Number.NaN })],
    [utilization({ cpuUsed: Number.POSITIVE_INFINITY })],
  ],
  ['a non-finite number against null', [utilization({ cpuUsed: Number.NaN })], [utilization()]],
  ['a field absent against its meaning', [placed()], [placed({ coldLoad: false })]],
  ['a number changed', [utilization()], [utilization({ memoryUsed: 2048 })]],
  [
    'a nested object with its keys in another order (other JSON text)',
    [utilization()],
    [utilization({ containers: [{ state: 'idle', containerId: 'c1', checkpointId: 'k1' }] })],
  ],
  [
    'a nested number changed',
    [utilization()],
    [utilization({ standbys: [{ checkpointId: 'k1', ready: 3 }] })],
  ],
  [
    'an array grown',
    [utilization()],
    [
      utilization({
        standbys: [
          { checkpointId: 'k1', ready: 2 },
          { checkpointId: 'k2', ready: 1 },
        ],
      }),
    ],
  ],
  ['a field absent against another value', [placed()], [placed({ coldLoad: true })]],
  ['another type', [utilization()], [placed()]],
  ['an event more recorded', [utilization(), placed()], [utilization()]],
  ['an event more made', [utilization()], [utilization(), placed()]],
  ['nothing against something', [], [placed()]],
];

describe('comparing a recorded decision with the one made now', () => {
  for (const [name, recorded, computed] of CASES) {
    it(`says what firstDifference says of their fields: ${name}`, () => {
      const expected = firstDifference(recorded.map(decisionFields), computed.map(decisionFields));
      expect(eventsDifference(recorded, computed)).to.equal(expected);
    });
  }

  it('finds the differences there are, and none where the JSON is the same', () => {
    const said = CASES.map(([, recorded, computed]) => eventsDifference(recorded, computed));
    expect(said.slice(0, 5)).to.deep.equal([null, null, null, null, null]);
    expect(said.slice(5).every((difference) => difference !== null)).to.equal(true);
    expect(said[5]).to.equal('WorkerUtilization.memoryUsed: recorded 1024, now 2048');
  });
});
