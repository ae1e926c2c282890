/**
 * Reads a gRPC stream's messages one at a time with backpressure. (A for-await loop over a
 * grpc-js duplex would destroy the whole call, answers included, once the requests end.)
 */
import type { Readable } from 'node:stream';
import { Undecodable } from '../../shared/wire-decoding.js';

const HIGH_WATER = 8;

/** Pull-style reading of an object-mode stream's readable side. */
export class MessageReader<T> {
  private readonly queue: T[] = [];
  private waiter: { resolve: (value: T | null) => void; reject: (error: Error) => void } | null =
    null;
  private ended = false;
  private failure: Error | null = null;

  constructor(private readonly stream: Readable) {
    stream.on('data', (message: T) => {
      if (this.waiter) {
        const { resolve, reject } = this.waiter;
        this.waiter = null;
        if (message instanceof Undecodable) reject(message.error);
        else resolve(message);
        return;
      }
      this.queue.push(message);
      if (this.queue.length >= HIGH_WATER) stream.pause();
    });
    stream.on('end', () => this.finish(null));
    stream.on('error', (error: Error) => this.finish(error));
    // Closed without a half-close first: the call was cancelled, not finished.
    stream.on('close', () =>
      this.finish(new Error('the stream closed before its sender finished')),
    );
  }

  private finish(error: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    const waiter = this.waiter;
    this.waiter = null;
    if (!waiter) return;
    if (error) waiter.reject(error);
    else waiter.resolve(null);
  }

  /**
   * The next message, or null once the sender half-closed; rejects with an `INVALID_ARGUMENT`
   * error for bytes that were not a valid message (src/shared/wire-decoding.ts).
   */
  next(): Promise<T | null> {
    const message = this.queue.shift();
    if (message !== undefined) {
      if (this.queue.length < HIGH_WATER / 2) this.stream.resume();
      return message instanceof Undecodable
        ? Promise.reject(message.error)
        : Promise.resolve(message);
    }
    if (this.ended) return this.failure ? Promise.reject(this.failure) : Promise.resolve(null);
    this.stream.resume();
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }
}
