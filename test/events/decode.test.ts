import { expect } from 'chai';
import { Readable } from 'node:stream';
import {
  decodeEvent,
  InvalidEventError,
  readJsonl,
  SeqOrder,
  validateEvent,
  type ClusterEvent,
} from '../../src/events/index.js';

const AT = '2026-11-30T10:00:00.000Z';

function line(fields: Record<string, unknown>): string {
  return JSON.stringify({ seq: 12, at: AT, ...fields });
}

function refusal(run: () => unknown): InvalidEventError {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(InvalidEventError);
    return error as InvalidEventError;
  }
  throw new Error('expected the event to be refused');
}

async function readAll(text: string): Promise<ClusterEvent[]> {
  const events: ClusterEvent[] = [];
  for await (const { event } of readJsonl(Readable.from([text]))) events.push(event);
  return events;
}

async function jsonlRefusal(text: string): Promise<InvalidEventError> {
  try {
    await readAll(text);
  } catch (error) {
    expect(error).to.be.instanceOf(InvalidEventError);
    return error as InvalidEventError;
  }
  throw new Error('expected the log to be refused');
}

describe('reading events', () => {
  it('accepts a valid event and fills absent optional fields with null', () => {
    const event = decodeEvent(
      line({ type: 'WorkerUtilization', workerId: 'w1', memoryUsed: 5, containerCount: 0 }),
    );
    expect(event).to.deep.include({
      type: 'WorkerUtilization',
      cpuUsed: null,
      cpuTotal: null,
      gpuMemoryUsed: null,
    });
  });

  it('fills absent optional fields of a nested demand with null', () => {
    const event = decodeEvent(
      line({ type: 'CallRequested', requestId: 'r1', demand: { memory: 1024 } }),
    );
    expect(event.type === 'CallRequested' && event.demand).to.deep.equal({
      memory: 1024,
      gpuMemory: null,
      gpu: null,
      disableOptimizedExecution: null,
      checkpointId: null,
      imports: null,
      packages: null,
      pinned: null,
    });
    expect(event).to.have.property('sessionId', null);
  });

  it('keeps fields it does not know (fields may be added)', () => {
    const event = decodeEvent(line({ type: 'WorkerLeaving', workerId: 'w1', note: 'drain' }));
    expect(event).to.have.property('note', 'drain');
  });

  it('accepts a cause whose subject holds a line break, and refuses an unknown cause kind', () => {
    // A subject is whatever named the trigger; a line break in it must not fail an append.
    const event = decodeEvent(
      line({ type: 'CallFinished', requestId: 'r1', ok: true, cause: 'end:r1\nr2' }),
    );
    expect(event.cause).to.equal('end:r1\nr2');
    const error = refusal(() =>
      decodeEvent(line({ type: 'CallFinished', requestId: 'r1', ok: true, cause: 'bogus:r1' })),
    );
    expect(error.message).to.match(/cause/);
  });

  it('refuses an unknown type, naming the seq and the field', () => {
    const error = refusal(() => decodeEvent(line({ type: 'WorkerExploded', workerId: 'w1' })));
    expect(error.seq).to.equal(12);
    expect(error.field).to.equal('type');
    expect(error.message).to.equal('seq 12: field "type": unknown event type "WorkerExploded"');
  });

  it('refuses an event without a type', () => {
    const error = refusal(() => decodeEvent(line({ workerId: 'w1' })));
    expect(error.message).to.equal('seq 12: field "type": is required but missing');
  });

  it('refuses a missing required field, naming it', () => {
    const error = refusal(() => decodeEvent(line({ type: 'WorkerEvicted', workerId: 'w1' })));
    expect(error.field).to.equal('reason');
    expect(error.message).to.equal('seq 12: field "reason": is required but missing');
  });

  it('refuses a field of the wrong type, saying what was expected and what came', () => {
    const error = refusal(() =>
      decodeEvent(
        line({ type: 'WorkerUtilization', workerId: 'w1', memoryUsed: '5GiB', containerCount: 0 }),
      ),
    );
    expect(error.field).to.equal('memoryUsed');
    expect(error.message).to.equal(
      'seq 12: field "memoryUsed": expected an integer >= 0, got "5GiB"',
    );
  });

  it('refuses a wrong nested field with its dotted path', () => {
    const error = refusal(() =>
      decodeEvent(line({ type: 'CallRequested', requestId: 'r1', demand: { memory: -1 } })),
    );
    expect(error.field).to.equal('demand.memory');
  });

  it('refuses a value outside an enumeration', () => {
    const error = refusal(() =>
      decodeEvent(line({ type: 'WorkerEvicted', workerId: 'w1', reason: 'bored' })),
    );
    expect(error.message).to.contain(
      'field "reason": expected "probe" or "ttl" or "left" or "restarted", got "bored"',
    );
  });

  it('refuses a wrong envelope: seq not an integer, at not an ISO instant', () => {
    expect(
      refusal(() => validateEvent({ seq: 1.5, at: AT, type: 'WorkerLeaving', workerId: 'w' }))
        .field,
    ).to.equal('seq');
    const error = refusal(() =>
      validateEvent({ seq: 3, at: '2026-11-30 10:00', type: 'WorkerLeaving', workerId: 'w' }),
    );
    expect(error.field).to.equal('at');
    expect(error.seq).to.equal(3);
  });

  it('refuses text that is not JSON, naming the seq it can still see', () => {
    const error = refusal(() => decodeEvent('{"seq": 7, "at": "x", "type": ', { line: 3 }));
    expect(error.message).to.match(/^line 3, seq 7: not valid JSON/);
  });

  it('refuses JSON that is not an object', () => {
    expect(refusal(() => decodeEvent('[1,2]', { line: 2 })).message).to.equal(
      'line 2: not a JSON object: [1,2]',
    );
  });
});

describe('seq order', () => {
  const event = (seq: number) =>
    validateEvent({ seq, at: AT, type: 'WorkerLeaving', workerId: 'w' });

  it('accepts a run starting anywhere', () => {
    const order = new SeqOrder();
    for (const seq of [41, 42, 43]) order.accept(event(seq));
    expect(order.lastSeq).to.equal(43);
  });

  it('refuses a gap, naming the seq and the field', () => {
    const order = new SeqOrder();
    order.accept(event(1));
    const error = refusal(() => order.accept(event(3), { line: 2 }));
    expect(error.message).to.equal('line 2, seq 3: field "seq": gap: expected 2 after 1, got 3');
  });

  it('refuses a seq that goes backwards or repeats', () => {
    const order = new SeqOrder();
    order.accept(event(5));
    expect(refusal(() => order.accept(event(5))).message).to.contain(
      'out of order: 5 comes after 5',
    );
  });
});

describe('JSONL reading', () => {
  const good = [
    line({ seq: 1, type: 'WorkerLeaving', workerId: 'w1' }),
    line({ seq: 2, type: 'WorkerLeaving', workerId: 'w2' }),
  ];

  it('reads every line in order, skipping blank lines and CRLF endings', async () => {
    const events = await readAll(`${good[0]}\r\n\n${good[1]}\n`);
    expect(events.map((e) => e.seq)).to.deep.equal([1, 2]);
  });

  it('names the line of a malformed event', async () => {
    const bad = line({ seq: 3, type: 'WorkerEvicted', workerId: 'w1', reason: 1 });
    const error = await jsonlRefusal([...good, bad].join('\n'));
    expect(error.message).to.match(/^line 3, seq 3: field "reason"/);
  });

  it('names the line of an out-of-order event', async () => {
    const error = await jsonlRefusal([good[1], good[0]].join('\n'));
    expect(error.line).to.equal(2);
    expect(error.field).to.equal('seq');
  });

  it('names the line of a truncated last line', async () => {
    const error = await jsonlRefusal(`${good.join('\n')}\n{"seq":3,"at":"${AT}","ty`);
    expect(error.line).to.equal(3);
    expect(error.message).to.contain('not valid JSON');
  });
});
