/**
 * How an operator's change of a logged table (pins, quotas) is carried out (shell): authorize,
 * let the core decide, record the decision, log it and answer once it is committed. A refused
 * change appends nothing and answers its own code and message.
 */
import type { ServerUnaryCall, sendUnaryData } from '@grpc/grpc-js';
import type { Decision } from '../../core/decision.js';
import { toServiceError } from '../grpc-status.js';
import type { Journal } from '../journal/index.js';
import type { Logger } from '../observability/logger.js';
import { principalLogFields, type RouterCredentials } from '../security/index.js';

/** What a change runner needs. */
export interface AdminChangeOptions {
  readonly journal: Journal;
  readonly credentials: RouterCredentials;
  readonly logger: Logger;
  /** What is changed, for the log lines: `pin`, `quota`. */
  readonly subject: string;
}

/** A decided change: its events and what it says it changed (logged with it). */
export type ChangeDecision = Decision & { readonly change: object };

/**
 * A runner of changes: `run(what, call, callback, decideChange, answerOf)` authorizes the call,
 * decides it, records the decision and answers `answerOf(decision)` once it is committed.
 */
export function adminChangeRunner({ journal, credentials, logger, subject }: AdminChangeOptions) {
  return function run<Req, D extends ChangeDecision, Res>(
    what: string,
    call: ServerUnaryCall<Req, Res>,
    callback: sendUnaryData<Res>,
    decideChange: (request: Req) => D,
    answerOf: (decision: D) => Res,
  ): void {
    let decision: D;
    let principal;
    try {
      principal = credentials.authorize(call.metadata, call.getPath());
      decision = decideChange(call.request);
    } catch (error) {
      const refusal = toServiceError(error);
      logger.info({ change: what, problem: refusal.details }, `${subject} change refused`);
      callback(refusal);
      return;
    }
    const answer = () => {
      logger.info(
        { ...principalLogFields(principal), change: what, ...decision.change },
        decision.events.length > 0 ? `${subject} changed` : `${subject} change: nothing to change`,
      );
      callback(null, answerOf(decision));
    };
    try {
      journal
        .record(decision)
        .committed.then(answer, (error: Error) => callback(toServiceError(error)));
    } catch (error) {
      callback(toServiceError(error));
    }
  };
}
