/**
 * The JetStream reader against what the NATS client library may deliver: an ordered consumer the
 * library recreates (after missed heartbeats on a loaded host) can hand over a message again, or
 * one before where the read began. The library's side is played by a stand-in; the reader is the
 * real one.
 */
import { expect } from 'chai';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { ObjectStore } from '@nats-io/obj';
import { encodeEvent } from '../../src/events/decode.js';
import {
  formatSeqRange,
  SEQ_HEADER,
  streamNames,
} from '../../src/events/jetstream/stream-format.js';
import { StreamReader } from '../../src/events/jetstream/stream-reader.js';
import type { ClusterEvent } from '../../src/events/types.js';

/** A stream message holding one event, whose stream sequence and log seq are both `seq`. */
function message(seq: number) {
  const event: ClusterEvent = {
    seq,
    at: '2026-12-06T00:00:00.000Z',
    cause: null,
    type: 'WorkerLeaving',
    workerId: `w${seq}`,
  };
  const headers = new Map([[SEQ_HEADER, formatSeqRange(seq, seq)]]);
  return { seq, headers, string: () => encodeEvent(event) };
}

/** A reader whose consumer delivers the messages of `delivered`, in that order. */
function readerDelivering(delivered: readonly number[]): StreamReader {
  const consumer = {
    consume: () =>
      Promise.resolve({
        stop: () => undefined,
        *[Symbol.iterator]() {
          for (const seq of delivered) yield message(seq);
        },
      }),
  };
  const js = { consumers: { get: () => Promise.resolve(consumer) } };
  return new StreamReader({
    js: js as unknown as JetStreamClient,
    jsm: {} as JetStreamManager,
    names: streamNames('readie-test'),
    location: 'jetstream://test/readie-test',
    objects: () => Promise.reject<ObjectStore>(new Error('no object store here')),
    closed: () => false,
  });
}

async function seqsRead(reader: StreamReader, start: number, end: number): Promise<number[]> {
  const seqs: number[] = [];
  for await (const stored of reader.messages(start, end)) seqs.push(stored.event.seq);
  return seqs;
}

describe('StreamReader: each stream message once, from where the read began', () => {
  it('passes over a message the consumer hands over again after it was recreated', async () => {
    // Delivered 10, 11, then (a recreated consumer) from 10 again.
    expect(await seqsRead(readerDelivering([10, 11, 10, 11, 12]), 10, 12)).to.deep.equal([
      10, 11, 12,
    ]);
  });

  it('passes over messages before the start', async () => {
    expect(await seqsRead(readerDelivering([5, 6, 7, 8, 9, 10, 11, 12]), 10, 12)).to.deep.equal([
      10, 11, 12,
    ]);
  });
});
