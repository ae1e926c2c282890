/**
 * The executor link's frames (docs/executor-protocol.md): a 4-byte big-endian length, a 1-byte
 * type, then the body. The length counts the type byte and the body. Pure: no I/O.
 */

import { MAX_CHUNK_BYTES } from '../../../shared/chunks.js';

/** The protocol version this worker speaks; the executor announces its own in HELLO. */
export const PROTOCOL_VERSION = 1;

/** The longest frame (type byte plus body) either side accepts. */
export const MAX_FRAME_LENGTH = 4 * 1024 * 1024;

/** The most a PAYLOAD or RESULT piece carries: each is one gRPC payload chunk. */
export const MAX_PIECE = MAX_CHUNK_BYTES;

/** Frame types. */
export const FrameType = {
  HELLO: 0x01,
  INSTALL: 0x02,
  INSTALL_DONE: 0x03,
  CALL: 0x04,
  PAYLOAD: 0x05,
  PAYLOAD_END: 0x06,
  LOG: 0x07,
  RESULT: 0x08,
  RESULT_END: 0x09,
  ERROR: 0x0a,
  OUTCOME: 0x0b,
  INPUT_LOG: 0x0c,
  IMAGE: 0x0d,
  IMAGE_DONE: 0x0e,
} as const;

/** A frame type's number. */
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/** One decoded frame. */
export interface Frame {
  readonly type: number;
  readonly body: Buffer;
}

/** The peer broke the frame protocol: the connection cannot be trusted any more. */
export class FrameProtocolError extends Error {
  override readonly name = 'FrameProtocolError';
}

/** The name of a frame type, for messages. */
export function frameTypeName(type: number): string {
  const entry = Object.entries(FrameType).find(([, value]) => value === type);
  return entry ? entry[0] : `0x${type.toString(16)}`;
}

/** One frame as bytes. */
export function encodeFrame(type: FrameType, body: Uint8Array = Buffer.alloc(0)): Buffer {
  const length = body.length + 1;
  if (length > MAX_FRAME_LENGTH) {
    throw new FrameProtocolError(
      `a ${frameTypeName(type)} frame of ${length} bytes exceeds the ${MAX_FRAME_LENGTH}-byte maximum`,
    );
  }
  const header = Buffer.allocUnsafe(5);
  header.writeUInt32BE(length, 0);
  header.writeUInt8(type, 4);
  return Buffer.concat([header, body]);
}

/** A frame whose body is UTF-8 JSON. */
export function encodeJsonFrame(type: FrameType, value: unknown): Buffer {
  return encodeFrame(type, Buffer.from(JSON.stringify(value), 'utf8'));
}

/** The JSON value of a control frame's body. */
export function decodeJsonBody(frame: Frame): unknown {
  try {
    return JSON.parse(frame.body.toString('utf8')) as unknown;
  } catch (error) {
    throw new FrameProtocolError(
      `the ${frameTypeName(frame.type)} frame is not JSON: ${(error as Error).message}`,
    );
  }
}

/** A LOG frame's source byte and text. */
export function decodeLogBody(frame: Frame): { source: number; text: string } {
  if (frame.body.length < 1) throw new FrameProtocolError('a LOG frame without a source byte');
  return { source: frame.body[0]!, text: frame.body.subarray(1).toString('utf8') };
}

/** Splits a byte stream into frames; feed it chunks as they arrive. */
export class FrameDecoder {
  private pending: Buffer[] = [];
  private pendingLength = 0;

  /** Adds bytes and returns every frame now complete, in order. */
  push(chunk: Buffer): Frame[] {
    this.pending.push(chunk);
    this.pendingLength += chunk.length;
    const frames: Frame[] = [];
    for (;;) {
      if (this.pendingLength < 5) break;
      const head = this.peek(5);
      const length = head.readUInt32BE(0);
      if (length < 1 || length > MAX_FRAME_LENGTH) {
        throw new FrameProtocolError(`frame length ${length} is outside 1..${MAX_FRAME_LENGTH}`);
      }
      if (this.pendingLength < 4 + length) break;
      const whole = this.take(4 + length);
      frames.push({ type: whole[4]!, body: whole.subarray(5) });
    }
    return frames;
  }

  /** Bytes received that do not yet form a whole frame. */
  get buffered(): number {
    return this.pendingLength;
  }

  private peek(count: number): Buffer {
    if (this.pending[0]!.length >= count) return this.pending[0]!;
    const joined = Buffer.concat(this.pending);
    this.pending = [joined];
    return joined;
  }

  private take(count: number): Buffer {
    const joined = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    this.pending = joined.length > count ? [joined.subarray(count)] : [];
    this.pendingLength -= count;
    return joined.subarray(0, count);
  }
}
