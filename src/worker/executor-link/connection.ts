/**
 * The worker's end of the executor link: dialing the container's unix socket (retrying while the
 * sandbox starts), reading frames with backpressure, writing frames awaiting drain.
 */
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExecutorLostError, ExecutorTimeoutError } from '../core/errors.js';
import {
  FrameDecoder,
  FrameProtocolError,
  FrameType,
  frameTypeName,
  PROTOCOL_VERSION,
  type Frame,
} from '../core/executor-link/frames.js';
import {
  ExecutorHelloSchema,
  readFrameBody,
  type ExecutorHello,
} from '../core/executor-link/messages.js';

export type { ExecutorHello } from '../core/executor-link/messages.js';

/** How to dial. */
export interface DialOptions {
  /** Give up after this long (DIAL_TOTAL_TIMEOUT). */
  readonly timeoutMs: number;
  /** Aborted when the container is gone or the call is cancelled: stop retrying at once. */
  readonly signal?: AbortSignal;
}

const RETRYABLE = new Set(['ENOENT', 'ECONNREFUSED', 'EAGAIN', 'ECONNRESET']);
const HIGH_WATER_FRAMES = 32;
const LOW_WATER_FRAMES = 8;

function connectOnce(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ path });
    const onError = (error: Error) => {
      socket.destroy();
      reject(error);
    };
    socket.once('error', onError);
    socket.once('connect', () => {
      socket.off('error', onError);
      resolve(socket);
    });
  });
}

/** An open connection to one executor, past its HELLO. */
export class ExecutorConnection {
  private readonly decoder = new FrameDecoder();
  private readonly frames: Frame[] = [];
  private waiter: {
    resolve: (frame: Frame | null) => void;
    reject: (error: Error) => void;
  } | null = null;
  private ended = false;
  private failure: Error | null = null;
  private paused = false;
  /** Set once the HELLO has been read. */
  hello!: ExecutorHello;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('end', () => this.finish(null));
    socket.on('error', (error) => this.finish(error));
    socket.on('close', () => this.finish(null));
  }

  /**
   * Dials the executor at `path`, retrying while the socket does not exist or refuses, and reads
   * its HELLO; throws ExecutorTimeoutError after `timeoutMs`.
   */
  static async dial(path: string, options: DialOptions): Promise<ExecutorConnection> {
    const deadline = performance.now() + options.timeoutMs;
    let delay = 2;
    for (;;) {
      options.signal?.throwIfAborted();
      let socket: Socket;
      try {
        socket = await connectOnce(path);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code ?? '';
        if (!RETRYABLE.has(code)) {
          throw new ExecutorLostError(`connecting to the executor at ${path} failed: ${code}`);
        }
        if (performance.now() + delay > deadline) {
          throw new ExecutorTimeoutError(
            `the executor did not accept a connection within ${options.timeoutMs} ms (DIAL_TOTAL_TIMEOUT); last error ${code}`,
          );
        }
        await sleep(delay, undefined, { signal: options.signal });
        delay = Math.min(delay * 2, 50);
        continue;
      }
      const connection = new ExecutorConnection(socket);
      const remaining = Math.max(1, Math.ceil(deadline - performance.now()));
      await connection.readHello(remaining, options.signal);
      return connection;
    }
  }

  private async readHello(timeoutMs: number, signal: AbortSignal | undefined): Promise<void> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const abort = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const onAbort = () => this.finish(abort.reason as Error);
    abort.addEventListener('abort', onAbort, { once: true });
    try {
      const frame = await this.next();
      if (frame === null)
        throw new ExecutorLostError('the executor closed the connection before saying HELLO');
      if (frame.type !== FrameType.HELLO) {
        throw new FrameProtocolError(`expected HELLO, got ${frameTypeName(frame.type)}`);
      }
      const hello = readFrameBody(frame, ExecutorHelloSchema);
      if (hello.protocol !== PROTOCOL_VERSION) {
        throw new ExecutorLostError(
          `the executor speaks protocol ${String(hello.protocol)}, this worker speaks ${PROTOCOL_VERSION}`,
        );
      }
      this.hello = hello;
    } catch (error) {
      this.destroy();
      if (timeout.aborted && !signal?.aborted) {
        throw new ExecutorTimeoutError(
          `the executor accepted the connection but sent no HELLO within ${Math.round(timeoutMs)} ms`,
        );
      }
      throw error;
    } finally {
      abort.removeEventListener('abort', onAbort);
    }
  }

  private onData(chunk: Buffer): void {
    let decoded: Frame[];
    try {
      decoded = this.decoder.push(chunk);
    } catch (error) {
      this.finish(error as Error);
      this.socket.destroy();
      return;
    }
    for (const frame of decoded) {
      if (this.waiter) {
        const { resolve } = this.waiter;
        this.waiter = null;
        resolve(frame);
      } else {
        this.frames.push(frame);
      }
    }
    if (this.frames.length > HIGH_WATER_FRAMES && !this.paused) {
      this.paused = true;
      this.socket.pause();
    }
  }

  private finish(error: Error | null): void {
    if (this.ended) return;
    this.ended = true;
    if (error) this.failure = error;
    else if (this.decoder.buffered > 0) {
      this.failure = new ExecutorLostError('the executor connection ended inside a frame');
    }
    const waiter = this.waiter;
    this.waiter = null;
    if (!waiter) return;
    if (this.failure) waiter.reject(this.failure);
    else waiter.resolve(null);
  }

  /** The next frame, or null when the executor closed the connection cleanly. */
  next(): Promise<Frame | null> {
    const frame = this.frames.shift();
    if (this.paused && this.frames.length < LOW_WATER_FRAMES) {
      this.paused = false;
      this.socket.resume();
    }
    if (frame) return Promise.resolve(frame);
    if (this.ended) return this.failure ? Promise.reject(this.failure) : Promise.resolve(null);
    return new Promise((resolve, reject) => (this.waiter = { resolve, reject }));
  }

  /** Writes frames; resolves once the socket can take more. */
  async write(...frames: Buffer[]): Promise<void> {
    if (this.ended || this.socket.destroyed) {
      throw this.failure ?? new ExecutorLostError('the executor connection is closed');
    }
    let ok = true;
    for (const frame of frames) ok = this.socket.write(frame);
    if (!ok) {
      await new Promise<void>((resolve, reject) => {
        const onDrain = () => {
          this.socket.off('close', onClose);
          resolve();
        };
        const onClose = () => {
          this.socket.off('drain', onDrain);
          reject(this.failure ?? new ExecutorLostError('the executor connection closed'));
        };
        this.socket.once('drain', onDrain);
        this.socket.once('close', onClose);
      });
    }
  }

  /** Frames received and not yet taken with `next()`. */
  get buffered(): number {
    return this.frames.length;
  }

  /** Whether the connection is still open both ways, with nothing unread (reusable). */
  get usable(): boolean {
    return !this.ended && !this.socket.destroyed && this.frames.length === 0;
  }

  /** Half-closes the connection; the executor closes its end and accepts the next one. */
  close(): void {
    this.socket.end();
  }

  /** Drops the connection at once. */
  destroy(): void {
    this.socket.destroy();
  }
}
