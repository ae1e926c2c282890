import { expect } from 'chai';
import fc from 'fast-check';
import {
  decodeGrpcMessage,
  encodeGrpcMessage,
  framed,
  FrameError,
  FrameReader,
  timeoutHeader,
  timeoutMsOf,
  type GrpcFrame,
} from '../../src/router/wire/index.js';

/** Every frame `pieces` hold, read by a fresh reader. */
function read(pieces: readonly Buffer[], max = 1 << 20): GrpcFrame[] {
  const reader = new FrameReader(max);
  const frames: GrpcFrame[] = [];
  for (const piece of pieces) reader.push(piece, (frame) => frames.push(frame));
  expect(reader.idle, 'no partial frame left').to.equal(true);
  return frames;
}

describe('the gRPC wire on node:http2', () => {
  it('reads messages back however the stream splits their frames', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 20 }),
        (messages, cuts) => {
          const wire = Buffer.concat(messages.map((message) => framed(message)));
          const pieces: Buffer[] = [];
          for (let at = 0, cut = 0; at < wire.length; cut += 1) {
            const size = cuts[cut % cuts.length] ?? 1;
            pieces.push(wire.subarray(at, at + size));
            at += size;
          }
          const frames = read(pieces);
          expect(frames.map((frame) => Buffer.from(frame.message))).to.deep.equal(
            messages.map((message) => Buffer.from(message)),
          );
          for (const frame of frames) {
            expect(frame.frame.subarray(5).equals(frame.message)).to.equal(true);
            expect(frame.compressed).to.equal(false);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps a frame that lies within one piece as a view of it, not a copy', () => {
    const piece = Buffer.concat([framed(Buffer.from('one')), framed(Buffer.from('two'))]);
    const frames = read([piece]);
    expect(frames).to.have.length(2);
    expect(frames[1]?.frame.buffer).to.equal(piece.buffer);
  });

  it('refuses a message over the limit from its prefix, before its bytes arrive', () => {
    const reader = new FrameReader(1024);
    const prefix = Buffer.from([0, 0, 0, 4, 1]); // 1025 bytes announced
    expect(() => reader.push(prefix, () => undefined))
      .to.throw(FrameError, 'Received message larger than max (1025 vs. 1024)')
      .with.property('code', 'RESOURCE_EXHAUSTED');
  });

  it('says when a stream ends inside a frame', () => {
    const reader = new FrameReader(1024);
    reader.push(framed(Buffer.from('whole')).subarray(0, 7), () => expect.fail('no frame yet'));
    expect(reader.idle).to.equal(false);
  });

  it('reads and writes grpc-timeout as the spec spells it', () => {
    expect(timeoutMsOf(undefined)).to.equal(Infinity);
    expect(timeoutMsOf('1500m')).to.equal(1500);
    expect(timeoutMsOf('2S')).to.equal(2000);
    expect(timeoutMsOf('1H')).to.equal(3_600_000);
    expect(timeoutMsOf('250000u')).to.equal(250);
    expect(timeoutMsOf('123456789m')).to.be.NaN; // nine digits
    expect(timeoutMsOf('10x')).to.be.NaN;
    expect(timeoutHeader(0.2)).to.equal('1m');
    expect(timeoutHeader(3_600_000)).to.equal('3600000m');
    expect(timeoutHeader(1e9)).to.equal('1000000S');
    for (const ms of [1, 999, 60_000, 99_999_999, 1e8, 1e12]) {
      expect(timeoutMsOf(timeoutHeader(ms))).to.be.at.least(ms);
    }
  });

  it('percent-encodes grpc-message and decodes it back', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        const encoded = encodeGrpcMessage(text);
        expect(encoded).to.match(/^[\x20-\x7e]*$/);
        expect(decodeGrpcMessage(encoded)).to.equal(Buffer.from(text).toString('utf8'));
      }),
      { numRuns: 300 },
    );
    expect(encodeGrpcMessage('100% ready')).to.equal('100%25 ready');
    expect(encodeGrpcMessage('plain words')).to.equal('plain words');
    expect(decodeGrpcMessage('bad %zz escape')).to.equal('bad %zz escape');
  });
});
