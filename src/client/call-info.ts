/** Identifiers of a call: new request and session IDs, and where a call ran as its answers say. */
import { randomBytes } from 'node:crypto';
import type { Metadata } from '@grpc/grpc-js';
import type { CallIds } from '../proto/gen/readie/v1/call.js';

/** Where a call ran, as its answers named it; IDs the cluster never sent are empty strings. */
export interface CallInfo {
  readonly requestId: string;
  readonly sessionId: string;
  readonly workerId: string;
  readonly containerId: string;
  /** The checkpoint the container was actually restored from; empty for a cold start. */
  readonly checkpointId: string;
  /**
   * A pinned call's version: the one that served it (for a failure or a shed, the one resolved);
   * empty for any other call.
   */
  readonly servedVersion: string;
  /** The routing table revision the version was resolved from; 0 for any other call. */
  readonly routingRevision: number;
  /** The request this try retried (a shed's automatic retry); empty for a first try. */
  readonly retryOf: string;
}

/** A new request ID: `req-` and 32 random hex digits. */
export function newRequestId(): string {
  return `req-${randomBytes(16).toString('hex')}`;
}

/** A new session ID: `ses-` and 32 random hex digits. */
export function newSessionId(): string {
  return `ses-${randomBytes(16).toString('hex')}`;
}

/** The info of a call before any answer. */
export function initialCallInfo(requestId: string, sessionId: string, retryOf = ''): CallInfo {
  return {
    requestId,
    sessionId,
    workerId: '',
    containerId: '',
    checkpointId: '',
    servedVersion: '',
    routingRevision: 0,
    retryOf,
  };
}

/**
 * `info` with what a call's trailing metadata names and its answers did not: the version and
 * revision of a call that failed or was shed before any answer.
 */
export function withTrailers(info: CallInfo, trailers: Metadata | undefined): CallInfo {
  if (trailers === undefined) return info;
  const [version] = trailers.get('readie-version');
  const [revision] = trailers.get('readie-routing-revision');
  return {
    ...info,
    servedVersion: info.servedVersion || (typeof version === 'string' ? version : ''),
    routingRevision:
      info.routingRevision || Number(typeof revision === 'string' ? revision : 0) || 0,
  };
}

/**
 * `info` with an answer's IDs taken over. An answer that names a container comes from the worker
 * and is authoritative for worker, container and checkpoint (an empty checkpoint there means a
 * cold start, even if an earlier answer named the planned one); other answers only fill gaps.
 */
export function updateCallInfo(info: CallInfo, ids: CallIds | undefined): CallInfo {
  if (ids === undefined) return info;
  const authoritative = ids.containerId !== '';
  const pick = (known: string, answered: string, placement: boolean): string =>
    answered !== '' || (authoritative && placement) ? answered : known;
  return {
    requestId: pick(info.requestId, ids.requestId, false),
    sessionId: pick(info.sessionId, ids.sessionId, false),
    workerId: pick(info.workerId, ids.workerId, true),
    containerId: pick(info.containerId, ids.containerId, true),
    checkpointId: pick(info.checkpointId, ids.checkpointId, true),
    servedVersion: ids.version !== '' ? ids.version : info.servedVersion,
    routingRevision: ids.routingRevision > 0 ? ids.routingRevision : info.routingRevision,
    retryOf: info.retryOf,
  };
}
