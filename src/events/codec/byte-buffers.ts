/**
 * Growable byte writing and bounded byte reading for the binary event codec (`event-codec.ts`):
 * unsigned LEB128 varints over the safe integers, little-endian doubles, UTF-8 strings. A reader
 * refuses to run past its end (`TruncatedBytesError`), so a truncated value is an error, never a
 * misread.
 */

/** Bytes ran out before a value was whole. */
export class TruncatedBytesError extends Error {
  override readonly name = 'TruncatedBytesError';
}

/** Appends bytes to a buffer that grows as needed. */
export class ByteWriter {
  private buffer: Buffer;
  private end = 0;

  constructor(initialSize = 256) {
    this.buffer = Buffer.allocUnsafe(initialSize);
  }

  /** How many bytes are written. */
  get length(): number {
    return this.end;
  }

  /** Forgets what was written (the buffer is kept for the next value). */
  reset(): void {
    this.end = 0;
  }

  /** Takes back everything written after the first `length` bytes. */
  truncate(length: number): void {
    this.end = Math.min(this.end, length);
  }

  /** A copy of the bytes written. */
  bytes(): Buffer {
    return Buffer.from(this.buffer.subarray(0, this.end));
  }

  /** The bytes written, sharing this writer's memory until the next write or reset. */
  view(): Buffer {
    return this.buffer.subarray(0, this.end);
  }

  byte(value: number): void {
    this.room(1);
    this.buffer[this.end++] = value;
  }

  /** A non-negative safe integer as an unsigned LEB128 varint. */
  varint(value: number): void {
    this.room(8);
    let rest = value;
    while (rest >= 0x80) {
      this.buffer[this.end++] = (rest % 0x80) | 0x80;
      rest = Math.floor(rest / 0x80);
    }
    this.buffer[this.end++] = rest;
  }

  double(value: number): void {
    this.room(8);
    this.buffer.writeDoubleLE(value, this.end);
    this.end += 8;
  }

  /** A string's UTF-8 bytes, preceded by their count. */
  string(value: string): void {
    const bytes = Buffer.byteLength(value);
    this.varint(bytes);
    this.room(bytes);
    this.buffer.write(value, this.end, bytes, 'utf8');
    this.end += bytes;
  }

  /** Raw bytes. */
  raw(bytes: Uint8Array): void {
    this.room(bytes.length);
    this.buffer.set(bytes, this.end);
    this.end += bytes.length;
  }

  private room(bytes: number): void {
    if (this.end + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.end + bytes));
    this.buffer.copy(grown, 0, 0, this.end);
    this.buffer = grown;
  }
}

/** Reads values from a byte range; every read checks the range's end. */
export class ByteReader {
  private at: number;

  constructor(
    private readonly buffer: Buffer,
    start = 0,
    private readonly end = buffer.length,
  ) {
    this.at = start;
  }

  /** Where the next read starts. */
  get position(): number {
    return this.at;
  }

  /** Whether every byte has been read. */
  get done(): boolean {
    return this.at >= this.end;
  }

  byte(): number {
    if (this.at >= this.end)
      throw new TruncatedBytesError('a value ends past the end of its bytes');
    return this.buffer[this.at++] as number;
  }

  varint(): number {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = this.byte();
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 0x80;
      if (scale > 2 ** 56)
        throw new TruncatedBytesError('a varint runs longer than a safe integer');
    }
  }

  double(): number {
    this.need(8);
    const value = this.buffer.readDoubleLE(this.at);
    this.at += 8;
    return value;
  }

  string(): string {
    const bytes = this.varint();
    this.need(bytes);
    const start = this.at;
    this.at += bytes;
    // Short ASCII strings (IDs, instants) are built faster by hand than by the UTF-8 decoder.
    if (bytes <= 24) {
      let ascii = true;
      for (let i = start; i < this.at; i += 1) {
        if ((this.buffer[i] as number) >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) return this.buffer.toString('latin1', start, this.at);
    }
    return this.buffer.toString('utf8', start, this.at);
  }

  /** The next `bytes` bytes, sharing the reader's memory. */
  raw(bytes: number): Buffer {
    this.need(bytes);
    const start = this.at;
    this.at += bytes;
    return this.buffer.subarray(start, this.at);
  }

  private need(bytes: number): void {
    if (this.at + bytes > this.end) {
      throw new TruncatedBytesError('a value ends past the end of its bytes');
    }
  }
}
