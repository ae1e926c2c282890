/**
 * The binary event codec: every event of real and generated logs comes back as it went in, an
 * event the codec would not give back exactly is kept as its text, the bytes of a value are pinned
 * (a log written today must decode tomorrow), and damaged bytes are refused naming the seq.
 */
import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  encodeEvent,
  EVENT_TYPES,
  InvalidEventError,
  validateEvent,
  type ClusterEvent,
  type StoredEvent,
} from '../../src/events/index.js';
import { createHash } from 'node:crypto';
import {
  CODEC_EVENT_TYPES,
  FORMAT_FIELDS,
  type FieldCodec,
  type ValueFormat,
} from '../../src/events/codec/field-codecs.js';
import { CanonicalInstant } from '../../src/events/codec/event-codec.js';
import {
  BINARY_VALUE_V1,
  BINARY_VALUE_V2,
  BINARY_VALUE_V3,
  BINARY_VALUE_V4,
  BINARY_VALUE_V5,
  ByteReader,
  ByteWriter,
  decodeBlockEvent,
  decodeLogValue,
  DecodeContext,
  EncodeContext,
  encodeBlockEvent,
  encodeLogValue,
  isSnapshotValue,
  SNAPSHOT_VALUE_V1,
  TEXT_EVENT_CODE,
} from '../../src/events/codec/stored-codec.js';
import { readEvents, ROOT } from '../support/replay.js';
import { stamped, syntheticLog } from '../support/synthetic-log.js';

/** A generated history's events, stamped and validated as a log reads them. */
function generated(seed: number, events: number): ClusterEvent[] {
  // As a log writes them: the envelope first, then the type and the fields.
  return [...stamped(syntheticLog({ seed, events, workers: 20 }))].map(({ seq, at, ...rest }) =>
    validateEvent({ seq, at, cause: null, ...rest }),
  );
}

/** Every event of every recorded fixture. */
function fixtureEvents(): ClusterEvent[] {
  const dir = join(ROOT, 'fixtures');
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl') && !name.endsWith('.expected.jsonl'))
    .flatMap((name) => readEvents(join(dir, name)));
}

const scratch = new ByteWriter();

/** A field's place in the binary layout: its key, kind, nullability and what is inside it. */
function layoutOf(field: FieldCodec): string {
  const inner =
    field.kind === 'enum'
      ? `(${field.values.join('|')})`
      : field.kind === 'obj' || field.kind === 'objs'
        ? `{${field.fields.map(layoutOf).join(',')}}`
        : '';
  return `${field.key}:${field.kind}${field.nullable ? '?' : ''}${inner}`;
}

/** Every type's layout in a value format, a line each. */
function layoutIn(format: ValueFormat): string {
  return [...(FORMAT_FIELDS.get(format) ?? [])]
    .map(([type, fields]) => `${type}[${fields.map(layoutOf).join(',')}]`)
    .join('\n');
}

describe('events: the binary codec', () => {
  it('gives every type a code, in an order that only ever grows at the end', () => {
    expect([...CODEC_EVENT_TYPES]).to.have.members(EVENT_TYPES);
    // Values already written name types by these codes: a new type goes last, none moves.
    expect(CODEC_EVENT_TYPES.slice(0, 27).join(' ')).to.equal(
      'RouterStarted CatalogueLoaded WorkerRegistered WorkerUtilization WorkerLeaving ' +
        'WorkerProbeFailed WorkerProbeSucceeded WorkerEvicted ContainerStateChanged ' +
        'ContainerForgotten CallRequested CallPlaced CallDialFailed CallRejected CallBound ' +
        'CallFinished ReservationExpired SessionPinned SessionUnpinned SessionExpired ' +
        'SessionEnded PinStaged RoutingRevised ResidencyChanged ResidencyProtected ' +
        'ResidencyBudget Snapshot',
    );
    expect(CODEC_EVENT_TYPES.length).to.be.below(TEXT_EVENT_CODE);
  });

  it('lays out every type in value format 1 as the schemas did when it was made (v2 schemas)', () => {
    // The codec is positional: a field added to, removed from or moved in a schema (or a word
    // added to a closed list) changes how values already on disk decode. Such a change needs a
    // new value format (and the reader of the old one), not a new pin here.
    const layout = layoutIn(1);
    expect(layout).to.contain('SessionExpired[sessionId:str,reason:enum');
    expect(layout).to.match(/SessionExpired\[[^\n]*causeSeq:int\?\]/);
    expect(layout).to.match(/RouterStarted\[[^\n]*schemaVersion:int\?\]/);
    // Types appended later extend the layout at its end; the layout before them never changes.
    const beforeImages = layout.slice(0, layout.indexOf('\nImageBuilt['));
    expect(createHash('sha256').update(beforeImages).digest('hex')).to.equal(
      '7dafc0cbcdecf1d72b9ff18b6931f95c105a8c54b4df29b4300f1349bf7db581',
    );
    // The quota table's two events come after the images' and lay out their own fields.
    expect(layout).to.contain(
      'QuotaChanged[revision:int,tenantId:str,weight:num,maxSlots:int?,maxQueued:int]',
    );
    expect(createHash('sha256').update(layout).digest('hex'), layout).to.equal(
      '35100feecfacc26282aac1ac7ce0930afe714cac1b65aeac30a38c82cccedf01',
    );
  });

  it('lays out value format 2 as format 1 with CallRequested.deadlineMs at its end', () => {
    const before = layoutIn(1).split('\n');
    const after = layoutIn(2).split('\n');
    expect(after).to.have.length(before.length);
    const changed = after.filter((line, i) => line !== before[i]);
    expect(changed).to.have.length(1);
    const previous = before.find((line) => line.startsWith('CallRequested[')) as string;
    expect(changed[0]).to.equal(`${previous.slice(0, -1)},deadlineMs:int?]`);
    expect(createHash('sha256').update(layoutIn(2)).digest('hex')).to.equal(
      'ea6db149dd8633657fb5f826fee1003c0d666e32537f02d1fd4f7fd76b6e7061',
    );
  });

  it('lays out value format 3 as format 2 with CallFinished.raised, CallRequested.imageKey and ImageBuilt.declarations at their ends', () => {
    const before = layoutIn(2).split('\n');
    const after = layoutIn(3).split('\n');
    expect(after).to.have.length(before.length);
    const changed = after.filter((line, i) => line !== before[i]);
    const previous = (type: string) => before.find((line) => line.startsWith(`${type}[`)) as string;
    expect(changed).to.deep.equal([
      `${previous('CallRequested').slice(0, -1)},imageKey:str?]`,
      `${previous('CallFinished').slice(0, -1)},raised:obj?{type:str,message:str}]`,
      `${previous('ImageBuilt').slice(0, -1)},declarations:strs?]`,
    ]);
    expect(createHash('sha256').update(layoutIn(3)).digest('hex')).to.equal(
      '23ebb22372b05570b6cbd35fd059940cda5d49bec90895d24f1f60a83a3b70aa',
    );
  });

  it('lays out value format 4 as format 3 with the word absent added to ImageRemoved.reason', () => {
    const before = layoutIn(3).split('\n');
    const after = layoutIn(4).split('\n');
    expect(after).to.have.length(before.length);
    const changed = after.filter((line, i) => line !== before[i]);
    const previous = before.find((line) => line.startsWith('ImageRemoved[')) as string;
    expect(previous).to.contain('reason:enum(evicted|removed)');
    expect(changed).to.deep.equal([
      previous.replace('reason:enum(evicted|removed)', 'reason:enum(evicted|removed|absent)'),
    ]);
  });

  it('lays out value format 5 as format 4 with CallFinished.inputsRaised at its end', () => {
    const before = layoutIn(4).split('\n');
    const after = layoutIn(5).split('\n');
    expect(after).to.have.length(before.length);
    const changed = after.filter((line, i) => line !== before[i]);
    const previous = before.find((line) => line.startsWith('CallFinished[')) as string;
    expect(changed).to.deep.equal([`${previous.slice(0, -1)},inputsRaised:int?]`]);
  });

  it('given a CallFinished written in format 4 (before inputsRaised), reads it with none; format 5 keeps a batch count', () => {
    const fields = {
      seq: 12,
      at: '2026-12-05T10:00:01.000Z',
      cause: 'end:r1',
      type: 'CallFinished',
      requestId: 'r1',
      ok: true,
      code: null,
      message: null,
      raised: null,
    };
    // The bytes a readie of format 4 wrote for this end (a log on disk today).
    const v4 = Buffer.from('050fd0d3abdac8680106656e643a72310102723102000000', 'hex');
    const read = decodeLogValue(v4, 12).event;
    expect(read).to.deep.equal(validateEvent({ ...fields, inputsRaised: null }));
    const batch = validateEvent({ ...fields, inputsRaised: 3 });
    const value = encodeLogValue(batch, undefined, 'append', scratch);
    expect(value[0]).to.equal(BINARY_VALUE_V5);
    expect(value.subarray(1, v4.length).toString('hex')).to.equal(v4.subarray(1).toString('hex'));
    expect(decodeLogValue(value, 12).event).to.deep.equal(batch);
    // Format 4 never laid the count out: its bytes as a format-4 value are refused, not misread.
    const misread = Buffer.concat([Buffer.of(BINARY_VALUE_V4), value.subarray(1)]);
    expect(() => decodeLogValue(misread, 12)).to.throw(/seq 12/);
  });

  it('given an ImageRemoved written in format 3, reads it; absent is written in format 4 and no older format takes it', () => {
    const imageId = 'ab'.repeat(32);
    const removed = (reason: 'evicted' | 'absent') =>
      validateEvent({
        seq: 4,
        at: '2026-12-01T10:00:00.000Z',
        cause: 'report:w1',
        type: 'ImageRemoved',
        workerId: 'w1',
        tenantId: 'acme',
        imageId,
        reason,
      });
    const evicted = encodeLogValue(removed('evicted'), undefined, 'append', scratch);
    expect(evicted[0]).to.equal(BINARY_VALUE_V5);
    // The same word keeps its index: a format-3 value of it is the same bytes after the first.
    const v3 = Buffer.concat([Buffer.of(BINARY_VALUE_V3), evicted.subarray(1)]);
    expect(decodeLogValue(v3, 4).event).to.deep.equal(removed('evicted'));
    const absent = encodeLogValue(removed('absent'), undefined, 'append', scratch);
    expect(absent[0]).to.equal(BINARY_VALUE_V5);
    expect(decodeLogValue(absent, 4).event).to.deep.equal(removed('absent'));
    // Format 3 never had the word: its bytes as a format-3 value are refused, not misread.
    const misread = Buffer.concat([Buffer.of(BINARY_VALUE_V3), absent.subarray(1)]);
    expect(() => decodeLogValue(misread, 4)).to.throw(/seq 4/);
  });

  it('given a CallFinished written in format 2 (before raised), reads it with raised null; format 3 keeps what was raised', () => {
    const fields = {
      seq: 12,
      at: '2026-12-05T10:00:01.000Z',
      cause: 'end:r1',
      type: 'CallFinished',
      requestId: 'r1',
      ok: true,
      code: null,
      message: null,
    };
    // The bytes a readie before format 3 wrote for this end (a log on disk today).
    const v2 = Buffer.from('030fd0d3abdac8680106656e643a723101027231020000', 'hex');
    const read = decodeLogValue(v2, 12).event;
    expect(read).to.deep.equal(validateEvent({ ...fields, raised: null }));
    const raised = validateEvent({
      ...fields,
      raised: { type: 'ValueError', message: 'bad input: ünïcode 😀' },
    });
    const value = encodeLogValue(raised, undefined, 'append', scratch);
    expect(value[0]).to.equal(BINARY_VALUE_V5);
    expect(value.subarray(1, v2.length).toString('hex')).to.equal(v2.subarray(1).toString('hex'));
    expect(decodeLogValue(value, 12).event).to.deep.equal(raised);
    // A format-5 value without it (raised and inputsRaised null: 00 00), and an archive block of
    // format 2, read alike.
    const none = encodeLogValue(read, undefined, 'append', scratch);
    expect(none.toString('hex')).to.equal(`06${v2.subarray(1).toString('hex')}0000`);
    const reader = new ByteReader(v2.subarray(1));
    const back = decodeBlockEvent(reader, 12, new DecodeContext(undefined, 2)) as StoredEvent;
    expect(back.event).to.deep.equal(read);
    expect(reader.done).to.equal(true);
  });

  it('given a CallRequested written in format 1 (before deadlines), reads it with no deadline; format 2 keeps its deadline', () => {
    const fields = {
      seq: 9,
      at: '2026-12-05T10:00:00.250Z',
      cause: 'call:r1',
      type: 'CallRequested',
      requestId: 'r1',
      sessionId: null,
      tenantId: 'acme',
      demand: {
        memory: null,
        gpuMemory: null,
        gpu: null,
        disableOptimizedExecution: null,
        checkpointId: null,
        imports: null,
        packages: null,
        pinned: true,
      },
      retryOf: null,
      inputs: null,
      function: 'm.f',
      turnWaitMs: null,
    };
    // The bytes a readie before format 2 wrote for this call (a log on disk today).
    const v1 = Buffer.from(
      '010af4c7abdac868010763616c6c3a72310102723100010461636d65010000000000000002000001036d2e6600',
      'hex',
    );
    const read = decodeLogValue(v1, 9).event;
    expect(read).to.deep.equal(validateEvent({ ...fields, deadlineMs: null }));
    const withDeadline = validateEvent({ ...fields, deadlineMs: 1500 });
    const value = encodeLogValue(withDeadline, undefined, 'append', scratch);
    // Written today in format 5 (laid out as format 3 for this type): format 2's bytes, then the image key (none: a null's 00).
    expect(value.toString('hex')).to.equal(`06${v1.subarray(1).toString('hex')}dd0b00`);
    expect(decodeLogValue(value, 9).event).to.deep.equal({ ...withDeadline, imageKey: null });
    // The bytes a readie of format 2 wrote for it read as they were, with no image key.
    const v2 = Buffer.from(`03${v1.subarray(1).toString('hex')}dd0b`, 'hex');
    expect(decodeLogValue(v2, 9).event).to.deep.equal({ ...withDeadline, imageKey: null });
    // An archive block written in format 1 reads by format 1's layout.
    const reader = new ByteReader(v1.subarray(1));
    const back = decodeBlockEvent(reader, 9, new DecodeContext(undefined, 1)) as StoredEvent;
    expect(back.event).to.deep.equal(read);
    expect(reader.done).to.equal(true);
  });

  it('given the fields schema v2 added and the quota events, stores them in the codec and gives them back', () => {
    const events = [
      validateEvent({
        seq: 1,
        at: '2026-11-30T10:00:00.000Z',
        cause: 'start',
        type: 'RouterStarted',
        config: {},
        version: '1.0.0',
        rulesVersion: 3,
        routerId: 'r1',
        takeoverFrom: null,
        schemaVersion: 2,
      }),
      validateEvent({
        seq: 2,
        at: '2026-11-30T10:00:01.000Z',
        cause: 'probe:w1',
        type: 'SessionExpired',
        sessionId: 's1',
        reason: 'worker_evicted',
        causeSeq: 41,
      }),
      validateEvent({
        seq: 3,
        at: '2026-11-30T10:00:02.000Z',
        cause: 'admin:acme',
        type: 'QuotaChanged',
        revision: 1,
        tenantId: 'acme',
        weight: 2.5,
        maxSlots: 12,
        maxQueued: 500,
      }),
      validateEvent({
        seq: 4,
        at: '2026-11-30T10:00:03.000Z',
        cause: 'admin:acme',
        type: 'QuotaRemoved',
        revision: 2,
        tenantId: 'acme',
      }),
    ];
    for (const event of events) {
      const value = encodeLogValue(event, undefined, 'append', scratch);
      expect(value[0]).to.equal(BINARY_VALUE_V5);
      expect(decodeLogValue(value, event.seq).event).to.deep.equal(event);
    }
  });

  it('given the image events (appended codes), stores them in the codec and gives them back', () => {
    const base = { at: '2026-12-05T10:00:00.000Z', cause: 'report:w1', workerId: 'w1' };
    const imageId = 'ab'.repeat(32);
    const events = [
      {
        ...base,
        seq: 1,
        type: 'ImageBuilt',
        tenantId: 't1',
        imageId,
        bytes: 27_000,
        buildMs: 12_054,
        declarations: ['cd'.repeat(32), 'ef'.repeat(32)],
      },
      { ...base, seq: 2, type: 'ImageBuildFailed', tenantId: null, error: 'ERROR: no wheel' },
      { ...base, seq: 3, type: 'ImageRemoved', tenantId: 't1', imageId, reason: 'evicted' },
    ].map((event) => validateEvent(event));
    for (const event of events) {
      const value = encodeLogValue(event, undefined, 'append', scratch);
      expect(value[0], event.type).to.equal(BINARY_VALUE_V5);
      expect(decodeLogValue(value, event.seq).event).to.deep.equal(event);
    }
  });

  it('given the events of every fixture and a generated history, each LMDB value decodes to the same event and text', () => {
    const events = [...fixtureEvents(), ...generated(11, 3_000)];
    let binary = 0;
    for (const event of events) {
      const text = encodeEvent(event);
      const value = encodeLogValue(event, text, 'canonical', scratch);
      if (value[0] === BINARY_VALUE_V5) binary += 1;
      const back = decodeLogValue(value, event.seq);
      expect(back.event, text).to.deep.equal(event);
      expect(JSON.parse(back.text)).to.deep.equal(JSON.parse(text));
      expect(value.length).to.be.at.most(Buffer.byteLength(text));
    }
    // Snapshots are compressed text; everything else the codec takes.
    const snapshots = events.filter((event) => event.type === 'Snapshot').length;
    expect(binary).to.equal(events.length - snapshots);
  });

  it('keeps a Snapshot as its JSON text compressed, a fraction of its size, and gives the text back', () => {
    const state = {
      workers: Object.fromEntries(
        Array.from({ length: 200 }, (_, i) => [`w${i}`, { memoryUsed: i, status: 'ready' }]),
      ),
    };
    const snapshot = validateEvent({
      seq: 40,
      at: '2026-11-30T10:00:00.000Z',
      cause: null,
      type: 'Snapshot',
      schemaVersion: 1,
      state,
    });
    const text = encodeEvent(snapshot);
    const value = encodeLogValue(snapshot, text, 'exact', scratch);
    expect(value[0]).to.equal(SNAPSHOT_VALUE_V1);
    expect(value.length).to.be.below(Buffer.byteLength(text) / 5);
    expect(isSnapshotValue(value)).to.equal(true);
    const back = decodeLogValue(value, 40);
    expect(back.text).to.equal(text);
    expect(back.event).to.deep.equal(snapshot);
    expect(() => decodeLogValue(Buffer.concat([value.subarray(0, 20)]), 40)).to.throw(
      InvalidEventError,
      /^seq 40: not a readable snapshot/,
    );
  });

  it('given a block of events sharing strings and instants, decodes them in order and smaller than alone', () => {
    const events = generated(12, 5_000);
    const block = new ByteWriter();
    const context = new EncodeContext();
    let alone = 0;
    for (const event of events) {
      encodeBlockEvent({ event, text: encodeEvent(event) }, block, context, 'canonical');
      alone += encodeLogValue(event, undefined, 'append', scratch).length;
    }
    const reader = new ByteReader(block.view());
    const decode = new DecodeContext();
    const back: ClusterEvent[] = [];
    while (!reader.done) {
      const seq = (events[back.length] as ClusterEvent).seq;
      back.push((decodeBlockEvent(reader, seq, decode) as StoredEvent).event);
    }
    expect(back).to.deep.equal(events);
    expect(block.length).to.be.below(alone / 1.5);
  });

  it('given an instant kept as canonical across values, writes each value as without it, and still keeps a non-canonical instant as text', () => {
    const canonical = new CanonicalInstant();
    for (const event of generated(14, 2_000)) {
      const plain = encodeLogValue(event, undefined, 'append', scratch);
      expect(encodeLogValue(event, undefined, 'append', scratch, canonical)).to.deep.equal(plain);
    }
    const event = generated(15, 1)[0] as ClusterEvent;
    // The same millisecond without its fraction: valid, but not the text `isoInstant` gives.
    const bare = { ...event, at: `${event.at.slice(0, 19)}Z` };
    canonical.text = `${bare.at.slice(0, 19)}.000Z`;
    canonical.ms = Date.parse(bare.at);
    const value = encodeLogValue(bare, undefined, 'append', scratch, canonical);
    expect(value.toString('utf8')).to.equal(encodeEvent(bare));
  });

  it('keeps an event as its text when the codec would not give that text back', () => {
    const base = generated(13, 1).find((e) => e.type === 'RouterStarted') as ClusterEvent;
    const text = encodeEvent(base);
    const { type, ...rest } = base;
    const cases: [string, string][] = [
      // The documented vocabulary leaves optional fields out: reading adds them as null.
      ['a field left out', text.replace(/,"takeoverFrom":null/, '')],
      ['spaces', text.replace(/,/g, ', ')],
      ['another key order', JSON.stringify({ type, ...rest })],
      ['an unknown field', text.replace(/}$/, ',"extra":1}')],
    ];
    for (const [what, stored] of cases) {
      const parsed = validateEvent(JSON.parse(stored));
      const value = encodeLogValue(parsed, stored, 'exact', scratch);
      expect(value.toString('utf8'), what).to.equal(stored);
      expect(decodeLogValue(value, base.seq).text, what).to.equal(stored);
    }
    // In the schema's order, the same fields in the canonical text are the codec's.
    expect(encodeLogValue(validateEvent(JSON.parse(text)), text, 'exact', scratch)[0]).to.equal(
      BINARY_VALUE_V5,
    );
    // A string that is not well-formed UTF-16 would not survive UTF-8: text, even when appended.
    const broken = { ...base, version: 'v\ud800' } as ClusterEvent;
    expect(encodeLogValue(broken, undefined, 'append', scratch)[0]).to.equal(0x7b);
    // An instant that parses to another day is not the codec's either.
    const strange = { ...base, at: '2026-02-30T10:00:00.000Z' };
    expect(encodeLogValue(strange, undefined, 'append', scratch)[0]).to.equal(0x7b);
  });

  it('writes the bytes it always wrote (the format of logs on disk)', () => {
    const event = validateEvent({
      seq: 7,
      at: '2026-11-30T10:00:01.500Z',
      cause: 'report:w1',
      type: 'WorkerUtilization',
      workerId: 'w1',
      memoryUsed: 3 * 1024 ** 3,
      containerCount: 2,
      cpuUsed: 1.25,
      cpuTotal: 8,
      gpuMemoryUsed: null,
      containers: [{ containerId: 'c1', state: 'busy', checkpointId: null }],
      reportSeq: 4,
    });
    const value = encodeLogValue(event, undefined, 'append', scratch);
    // Format 5 (0x06) lays a load report out as formats 4 (0x05), 3 (0x04), 2 (0x03) and 1 (0x01)
    // did: the same bytes after the first.
    const body =
      '03b8abadbec56801097265706f72743a773101027731818080800c0302000000000000f43f01080002010102633101000500';
    expect(value.toString('hex')).to.equal(`06${body}`);
    expect(decodeLogValue(value, 7).event).to.deep.equal(event);
    expect(decodeLogValue(Buffer.from(`05${body}`, 'hex'), 7).event).to.deep.equal(event);
    expect(decodeLogValue(Buffer.from(`03${body}`, 'hex'), 7).event).to.deep.equal(event);
    expect(decodeLogValue(Buffer.from(`01${body}`, 'hex'), 7).event).to.deep.equal(event);
  });

  it('refuses damaged bytes, naming the seq', () => {
    const [event] = generated(14, 30).filter((e) => e.type === 'WorkerRegistered');
    const value = encodeLogValue(event as ClusterEvent, undefined, 'append', scratch);
    for (const damaged of [
      value.subarray(0, value.length - 3),
      Buffer.concat([value, Buffer.from([1, 2])]),
      Buffer.from([BINARY_VALUE_V1, 99]),
      Buffer.from([BINARY_VALUE_V2, 99]),
      Buffer.from([BINARY_VALUE_V3, 99]),
      Buffer.from([0x05, 1, 2, 3]),
      Buffer.from([0x06, 1, 2, 3]),
      Buffer.from([0x02, 1, 2, 3]),
    ]) {
      expect(() => decodeLogValue(damaged, 42), damaged.toString('hex')).to.throw(
        InvalidEventError,
        /^seq 42: /,
      );
    }
  });
});
