import { expect } from 'chai';
import { FrameProtocolError, MAX_PIECE } from '../../../src/worker/core/executor-link/frames.js';
import {
  BatchOutcomes,
  MAX_INPUT_OUTCOME_BYTES,
  OUTCOME_RECORD_HEAD_BYTES,
  RecordFlag,
} from '../../../src/worker/core/executor-link/outcomes.js';

describe('the worker core: a batch outcomes ledger', () => {
  const record = (index: number, flags: number, data: Buffer) => {
    const head = Buffer.alloc(OUTCOME_RECORD_HEAD_BYTES);
    head.writeUInt32BE(index, 0);
    head[4] = flags;
    head.writeUInt32BE(0, 5);
    head.writeUInt32BE(data.length, 9);
    return Buffer.concat([head, data]);
  };
  const last = RecordFlag.LAST | RecordFlag.OK;

  it('counts inputs answered, pieces and all, and is complete once every input is', () => {
    const ledger = new BatchOutcomes(3);
    expect(
      ledger.accept(
        Buffer.concat([
          record(0, last, Buffer.from('a')),
          record(2, RecordFlag.OK, Buffer.from('b')),
        ]),
      ),
    ).to.equal(1);
    expect(() => ledger.checkComplete()).to.throw(
      FrameProtocolError,
      '2 of 3 inputs unanswered (1, 2)',
    );
    expect(
      ledger.accept(
        Buffer.concat([
          record(2, last, Buffer.from('c')),
          record(1, RecordFlag.LAST, Buffer.alloc(0)),
        ]),
      ),
    ).to.equal(2);
    expect(() => ledger.checkComplete()).to.not.throw();
  });

  it('counts the inputs that raised: a last piece without OK, never a middle one', () => {
    const ledger = new BatchOutcomes(4);
    ledger.accept(
      Buffer.concat([
        record(0, last, Buffer.from('a')),
        record(1, 0, Buffer.from('part of a traceback')),
        record(2, RecordFlag.LAST, Buffer.from('raised')),
      ]),
    );
    expect(ledger.raised).to.equal(1);
    ledger.accept(
      Buffer.concat([
        record(1, RecordFlag.LAST, Buffer.from('end')),
        record(3, last, Buffer.from('d')),
      ]),
    );
    expect(ledger.raised).to.equal(2);
    expect(() => ledger.checkComplete()).to.not.throw();
  });

  it('refuses an index outside the batch, a second outcome, unknown flags, a short record', () => {
    expect(() => new BatchOutcomes(2).accept(record(2, last, Buffer.alloc(1)))).to.throw(
      'names input 2 of a batch of 2 inputs',
    );
    const twice = new BatchOutcomes(2);
    twice.accept(record(0, last, Buffer.alloc(1)));
    expect(() => twice.accept(record(0, last, Buffer.alloc(1)))).to.throw('already answered');
    expect(() => new BatchOutcomes(2).accept(record(0, 0x80, Buffer.alloc(1)))).to.throw(
      'unknown flags',
    );
    const short = record(0, last, Buffer.alloc(10)).subarray(0, 15);
    expect(() => new BatchOutcomes(2).accept(short)).to.throw('longer than its frame');
    expect(() => new BatchOutcomes(2).accept(Buffer.alloc(5))).to.throw('inside a record head');
    expect(() => new BatchOutcomes(2).accept(Buffer.alloc(MAX_PIECE + 1))).to.throw(
      'one carries at most',
    );
  });

  it("bounds what one input's outcome may hold, however many pieces it comes in", () => {
    const ledger = new BatchOutcomes(1);
    const piece = record(0, RecordFlag.OK, Buffer.alloc(MAX_PIECE - OUTCOME_RECORD_HEAD_BYTES));
    let sent = 0;
    expect(() => {
      for (;;) {
        ledger.accept(piece);
        sent += MAX_PIECE - OUTCOME_RECORD_HEAD_BYTES;
      }
    }).to.throw('the outcome of input 0 passed');
    expect(sent).to.be.at.most(MAX_INPUT_OUTCOME_BYTES);
    expect(sent).to.be.above(MAX_INPUT_OUTCOME_BYTES - MAX_PIECE);
  });
});
