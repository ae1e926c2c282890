/**
 * The messages the call path relays, as the router holds them: configs, headers and IDs decoded,
 * payload chunks and answers kept as the bytes they arrived as (see `relay-codec.ts` for why).
 * Plain data, no transport: the call's state machine and any transport shell share them.
 */
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import type { CallHeader } from '../../proto/gen/readie/v1/execution.js';
import type { CallConfig, RequestExecutionResponse } from '../../proto/gen/readie/v1/proxy.js';

/** A client message as the router reads it: a config decoded, a chunk kept as its wire bytes. */
export type ClientMessage =
  | { readonly kind: 'config'; readonly config: CallConfig }
  | { readonly kind: 'chunk'; readonly bytes: number; readonly wire: Buffer }
  | { readonly kind: 'empty' }
  /** Bytes that are not a valid message: `problem` says what could not be read. */
  | { readonly kind: 'undecodable'; readonly problem: string };

/** A message to a worker: the header, or a client's chunk as its wire bytes. */
export type WorkerMessage =
  | { readonly kind: 'header'; readonly header: CallHeader }
  | { readonly kind: 'chunk'; readonly wire: Buffer };

/** A worker's answer: its IDs decoded, what it carries kept as wire bytes. */
export interface WorkerAnswer {
  readonly ids: CallIds | undefined;
  readonly carries: 'chunk' | 'log' | 'nothing';
  /** Payload bytes, for a chunk. */
  readonly chunkBytes: number;
  /** The whole answer as it arrived. */
  readonly wire: Buffer;
  /** The answer without its IDs field (what follows the IDs when re-encoding them). */
  readonly body: Buffer;
}

/** A message to the client: one the router made, or a worker's answer under the router's IDs. */
export type ClientAnswer =
  | { readonly kind: 'message'; readonly message: RequestExecutionResponse }
  | { readonly kind: 'relayed'; readonly ids: CallIds; readonly answer: WorkerAnswer };
