/**
 * Comparing a recorded decision with the one made now: `eventsDifference`, read from the events
 * themselves, finds no difference where the fields' JSON is the same though the values are not
 * (non-finite numbers, undefined fields, a field absent against what absent means), and names the
 * first difference there is in the words replay reports (the texts a comparison of the events'
 * JSON fields gave before it, field by field).
 */
import { expect } from 'chai';
import type { ClusterEvent, NewEvent } from '../../src/events/index.js';
import { eventsDifference } from '../../replay/engine/compare.js';

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

/** (recorded, computed, what replay says of them): the first five match, the rest differ. */
const CASES: [string, Event[], Event[], string | null][] = [
  ['the same events', [utilization(), placed()], [utilization(), placed({ seq: 1 })], null],
  [
    'an undefined field inside a nested object (left out of its JSON)',
    [utilization({ standbys: [{ checkpointId: 'k1', ready: 2, extra: undefined }] })],
    [utilization()],
    null,
  ],
  [
    'NaN against Infinity (both null in JSON)',
    [utilization({ cpuUsed: Number.NaN })],
    [utilization({ cpuUsed: Number.POSITIVE_INFINITY })],
    null,
  ],
  [
    'a non-finite number against null',
    [utilization({ cpuUsed: Number.NaN })],
    [utilization()],
    null,
  ],
  ['a field absent against its meaning', [placed()], [placed({ coldLoad: false })], null],
  [
    'a number changed',
    [utilization()],
    [utilization({ memoryUsed: 2048 })],
    'WorkerUtilization.memoryUsed: recorded 1024, now 2048',
  ],
  [
    'a nested object with its keys in another order (other JSON text)',
    [utilization()],
    [utilization({ containers: [{ state: 'idle', containerId: 'c1', checkpointId: 'k1' }] })],
    'WorkerUtilization.containers: recorded [{"containerId":"c1","state":"idle","checkpointId":"k1"}], now [{"state":"idle","containerId":"c1","checkpointId":"k1"}]',
  ],
  [
    'a nested number changed',
    [utilization()],
    [utilization({ standbys: [{ checkpointId: 'k1', ready: 3 }] })],
    'WorkerUtilization.standbys: recorded [{"checkpointId":"k1","ready":2}], now [{"checkpointId":"k1","ready":3}]',
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
    'WorkerUtilization.standbys: recorded [{"checkpointId":"k1","ready":2}], now [{"checkpointId":"k1","ready":2},{"checkpointId":"k2","ready":1}]',
  ],
  [
    'a field absent against another value',
    [placed()],
    [placed({ coldLoad: true })],
    'CallPlaced.coldLoad: recorded false, now true',
  ],
  ['another type', [utilization()], [placed()], 'recorded WorkerUtilization, now CallPlaced'],
  [
    'an event more recorded',
    [utilization(), placed()],
    [utilization()],
    'recorded a CallPlaced that placement no longer makes',
  ],
  [
    'an event more made',
    [utilization()],
    [utilization(), placed()],
    'placement now also makes a CallPlaced the log does not record',
  ],
  [
    'nothing against something',
    [],
    [placed()],
    'placement now also makes a CallPlaced the log does not record',
  ],
];

describe('comparing a recorded decision with the one made now', () => {
  for (const [name, recorded, computed, said] of CASES) {
    it(`${said === null ? 'finds no difference' : 'names the first difference'}: ${name}`, () => {
      expect(eventsDifference(recorded, computed)).to.equal(said);
    });
  }
});
