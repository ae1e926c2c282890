/**
 * The client's stream contract: the first message is a config with a request ID; every later one
 * is a payload chunk of at most 1 MiB. These checks turn a message into what the router needs, or
 * refuse it with `INVALID_ARGUMENT` naming what is wrong (bytes that are not a message at all
 * included: the router decodes them, so it answers).
 */
import type { Demand } from '../../events/types.js';
import { MAX_CHUNK_BYTES } from '../../shared/chunks.js';
import { PayloadFormat } from '../../proto/gen/readie/v1/call.js';
import type { CallConfig } from '../../proto/gen/readie/v1/proxy.js';
import { InvalidStreamError } from '../errors.js';
import { checkCallFields } from './call-fields.js';
import { isEmptyImage } from './image-fields.js';
export { MAX_ID_LENGTH } from './call-fields.js';
export { sessionIdOf } from '../placement/call.js';
import type { ClientMessage } from './relay-messages.js';

/**
 * The first message of a call, checked: a config with a request ID and a payload format, that does
 * not contradict itself (a retry of itself, a pinned call naming an image).
 */
export function firstConfigOf(message: ClientMessage): CallConfig {
  if (message.kind === 'undecodable') throw new InvalidStreamError(message.problem);
  if (message.kind !== 'config') {
    throw new InvalidStreamError(
      message.kind === 'chunk'
        ? 'payload before config: the first message must carry the call config, not a chunk'
        : 'the first message must carry the call config (it carried nothing)',
    );
  }
  const config = message.config;
  if (config.requestId === '') {
    throw new InvalidStreamError('the call config needs a request_id');
  }
  checkCallFields(config);
  if (config.retryOf !== '' && config.retryOf === config.requestId) {
    throw new InvalidStreamError('retry_of names the call itself: a retry has its own request_id');
  }
  if (config.pinned && !isEmptyImage(config.image)) {
    // Its worker would refuse it, after placement had perhaps started loading the version.
    throw new InvalidStreamError(
      "image: a pinned call runs in its tenant's version and cannot also name an image",
    );
  }
  if (
    config.format !== PayloadFormat.PAYLOAD_FORMAT_CLOUDPICKLE &&
    config.format !== PayloadFormat.PAYLOAD_FORMAT_JSON_CALL
  ) {
    throw new InvalidStreamError(
      'the call config needs a payload format: PAYLOAD_FORMAT_CLOUDPICKLE or PAYLOAD_FORMAT_JSON_CALL',
    );
  }
  return config;
}

/** A later message of a call, checked: a payload chunk of at most 1 MiB. */
export function payloadChunkOf(message: ClientMessage): Extract<ClientMessage, { kind: 'chunk' }> {
  if (message.kind === 'undecodable') throw new InvalidStreamError(message.problem);
  if (message.kind === 'config') {
    throw new InvalidStreamError('a second config: only the first message may carry the config');
  }
  if (message.kind !== 'chunk') {
    throw new InvalidStreamError('a message with neither config nor chunk');
  }
  if (message.bytes > MAX_CHUNK_BYTES) {
    throw new InvalidStreamError(
      `a payload chunk of ${message.bytes} bytes: chunks carry at most ${MAX_CHUNK_BYTES} bytes (1 MiB)`,
    );
  }
  return message;
}

/**
 * The demand exactly as the client sent it: budgets it left out are `null` (never a default), an
 * empty checkpoint ID is `null`; flags and lists as sent.
 */
export function demandOf(config: CallConfig): Demand {
  return {
    memory: config.memory ?? null,
    gpuMemory: config.gpuMemory ?? null,
    gpu: config.gpu,
    disableOptimizedExecution: config.disableOptimizedExecution,
    checkpointId: config.checkpointId === '' ? null : config.checkpointId,
    imports: [...config.imports],
    packages: [...config.packages],
    pinned: config.pinned,
  };
}
