/**
 * gRPC's length-prefixed messages on an HTTP/2 stream: a 5-byte prefix (a compressed flag, then
 * the message length as a big-endian uint32) and the message. The reader splits a stream's DATA
 * into messages, keeping each as the frame it arrived as (prefix and message), so a relay can
 * pass the frame on without encoding it again; a message that lies within one DATA piece is a
 * view of it, not a copy.
 */

/** The bytes of the prefix. */
export const PREFIX_BYTES = 5;

/** One message as it arrived. */
export interface GrpcFrame {
  /** Prefix and message: what to write to pass the message on unchanged. */
  readonly frame: Buffer;
  /** The message alone (a view of `frame`). */
  readonly message: Buffer;
  readonly compressed: boolean;
}

/** Why a stream's DATA cannot be read as messages. */
export class FrameError extends Error {
  constructor(
    message: string,
    /** The gRPC code name the peer is told. */
    readonly code: 'RESOURCE_EXHAUSTED' | 'INTERNAL',
  ) {
    super(message);
    this.name = 'FrameError';
  }
}

/** Splits DATA pieces into messages; throws `FrameError` for a message over `maxMessageBytes`. */
export class FrameReader {
  /** Pieces of the frame being read. */
  private pieces: Buffer[] = [];
  private held = 0;
  /** Bytes of the frame being read (prefix included); 0 until its prefix is complete. */
  private expected = 0;

  constructor(
    private maxMessageBytes: number,
    /** What a message over the limit is told (default: gRPC's words). */
    private tooLarge: (length: number, max: number) => string = grpcTooLarge,
  ) {}

  /** Messages whose prefix is read from now on may be up to `maxMessageBytes`. */
  limitTo(
    maxMessageBytes: number,
    tooLarge: (length: number, max: number) => string = grpcTooLarge,
  ): void {
    this.maxMessageBytes = maxMessageBytes;
    this.tooLarge = tooLarge;
  }

  /** True when no partial frame is held (a stream may end here). */
  get idle(): boolean {
    return this.held === 0;
  }

  /** Bytes of the partial frame held (prefix included). */
  get heldBytes(): number {
    return this.held;
  }

  /** Drops the partial frame held, so its bytes can be collected (the stream ended). */
  clear(): void {
    this.pieces = [];
    this.held = 0;
    this.expected = 0;
  }

  /** Reads `data`; calls `onFrame` for every message completed, in order. */
  push(data: Buffer, onFrame: (frame: GrpcFrame) => void): void {
    let offset = 0;
    while (offset < data.length) {
      if (this.held === 0) {
        // The common case: whole frames inside this piece, as views of it.
        const left = data.length - offset;
        if (left >= PREFIX_BYTES) {
          const total = PREFIX_BYTES + this.lengthAt(data, offset);
          if (left >= total) {
            onFrame(frameOf(data.subarray(offset, offset + total)));
            offset += total;
            continue;
          }
          this.expected = total;
        }
        this.pieces.push(data.subarray(offset));
        this.held = left;
        return;
      }
      if (this.expected === 0) {
        // Completing a prefix split across pieces.
        const need = PREFIX_BYTES - this.held;
        const part = data.subarray(offset, offset + need);
        this.pieces.push(part);
        this.held += part.length;
        offset += part.length;
        if (this.held < PREFIX_BYTES) return;
        const prefix = Buffer.concat(this.pieces, this.held);
        this.pieces = [prefix];
        this.expected = PREFIX_BYTES + this.lengthAt(prefix, 0);
        if (this.held === this.expected) this.complete(onFrame);
        continue;
      }
      const part = data.subarray(offset, offset + (this.expected - this.held));
      this.pieces.push(part);
      this.held += part.length;
      offset += part.length;
      if (this.held === this.expected) this.complete(onFrame);
    }
  }

  private complete(onFrame: (frame: GrpcFrame) => void): void {
    const frame =
      this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces, this.held);
    this.pieces = [];
    this.held = 0;
    this.expected = 0;
    onFrame(frameOf(frame));
  }

  private lengthAt(data: Buffer, offset: number): number {
    const length = data.readUInt32BE(offset + 1);
    if (length > this.maxMessageBytes) {
      throw new FrameError(this.tooLarge(length, this.maxMessageBytes), 'RESOURCE_EXHAUSTED');
    }
    return length;
  }
}

function grpcTooLarge(length: number, max: number): string {
  return `Received message larger than max (${length} vs. ${max})`;
}

function frameOf(frame: Buffer): GrpcFrame {
  return { frame, message: frame.subarray(PREFIX_BYTES), compressed: frame[0] !== 0 };
}

/**
 * A message made of `parts` as the pieces of one gRPC frame: the length prefix joined to the
 * first part, then the others as they are (not copied).
 */
export function framedParts(parts: readonly Buffer[]): Buffer[] {
  if (parts.length === 1) return [framed(parts[0]!)];
  let length = 0;
  for (const part of parts) length += part.length;
  const head = Buffer.allocUnsafe(PREFIX_BYTES + parts[0]!.length);
  head[0] = 0;
  head.writeUInt32BE(length, 1);
  head.set(parts[0]!, PREFIX_BYTES);
  return [head, ...parts.slice(1)];
}

/** `message` framed for the wire (uncompressed): one buffer, prefix and message. */
export function framed(message: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
  frame[0] = 0;
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, PREFIX_BYTES);
  return frame;
}
