/**
 * One call through the router (shell): wires the client's end of a `RequestExecution` call, the
 * session's turn, the log and the worker's end to the core's call state machine
 * (`src/core/calls/call-machine.ts`), and performs the effects it returns: writes, backpressure,
 * appends, logs and metrics. Every rule of the call path is the machine's; what is left here is
 * I/O, and the transport is behind `ClientEnd` and `WorkerLinks` (`call-ends.ts`): grpc-js, or
 * the platform's HTTP/2 relaying frames as they arrived.
 */
import type { AppendResult } from '../../events/index.js';
import type { CallEffect } from '../../core/calls/call-effects.js';
import { newCall, stepCall } from '../../core/calls/call-machine.js';
import type { CallInput, CallPhase, CallWorld } from '../../core/calls/call-phases.js';
import type { ClientAnswer, ClientMessage, WorkerAnswer } from '../../core/calls/relay-messages.js';
import { CallAbandonedError } from '../../core/errors.js';
import {
  explainPlacement,
  type PlacementCaches,
  type PlacementDecision,
} from '../../core/placement/index.js';
import type { CallTrailers } from '../../shared/call-trailers.js';
import type { Config } from '../../shared/config.js';
import { StatusError } from '../../shared/status-error.js';
import type { Journal } from '../journal/index.js';
import { callLogger, type Logger } from '../observability/logger.js';
import type { RouterMetrics } from '../observability/metrics.js';
import type { SessionTurn, SessionTurns } from '../sessions/index.js';
import type { WorkerFailures } from '../admin/worker-failures.js';
import type { ActiveCall, ActiveCalls } from './active-calls.js';
import type { TrailerEntry } from '../../core/calls/answer-trailers.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import type { ClientEnd, WorkerEnd, WorkerLinks } from './call-ends.js';

/** Everything a call needs from the router. */
export interface CallPathOptions {
  readonly journal: Journal;
  /** Placement's caches for the journal's state (its log folds with them). */
  readonly placement: PlacementCaches;
  readonly turns: SessionTurns;
  /** How calls reach workers (the transport's, with the router's own credentials). */
  readonly workers: WorkerLinks;
  readonly active: ActiveCalls;
  readonly config: Config;
  /** The router's clock, in epoch ms: the one that stamps the log. */
  readonly clock: () => number;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  /** Where the calls that failed on a worker are kept for `readie status`. */
  readonly failures?: WorkerFailures;
}

/** The world a call's steps read, made once per call. */
function worldOf(options: CallPathOptions): CallWorld {
  return {
    get state() {
      return options.journal.state;
    },
    caches: options.placement,
    get now() {
      return options.clock();
    },
    settings: options.config,
    handling(requestId: string) {
      return options.active.has(requestId);
    },
  };
}

/** Handles one `RequestExecution` stream from its first message to its status. */
export class CallRelay implements ActiveCall {
  private phase: CallPhase;
  /** The world each step reads: the state and the clock as they are when read. */
  private readonly world: CallWorld;
  private readonly inputs: CallInput[] = [];
  private stepping = false;
  /** The call's logger, made when a line is written (most calls write one). */
  private callLog: Logger | undefined;
  private workerId: string | null = null;
  /** The call's IDs for its log lines, once its config named them. */
  private ids: { requestId: string; sessionId: string | null } = { requestId: '', sessionId: null };
  private turn: SessionTurn | undefined;
  private readonly clientLeft = new AbortController();
  private worker: WorkerEnd | undefined;
  private lastAppend: AppendResult | undefined;
  /** While the call waits in the admission queue: its `QUEUE_TIMEOUT`. */
  private queueTimer: NodeJS.Timeout | undefined;
  /** When the call was queued (performance.now()), for the wait histogram. */
  private queuedAt = 0;
  private readonly startedAt = performance.now();
  private bytesToWorker = 0;
  private bytesToClient = 0;

  constructor(
    private readonly options: CallPathOptions,
    private readonly call: ClientEnd,
    /** The tenant the caller's credential names; null without one. */
    private readonly tenantId: string | null = null,
  ) {
    this.phase = newCall(call.deadline, tenantId);
    this.world = worldOf(options);
  }

  /** The logger whose lines name the call as far as it is known. */
  private get log(): Logger {
    if (this.callLog) return this.callLog;
    const { logger } = this.options;
    this.callLog =
      this.ids.requestId === ''
        ? logger.child({ tenantId: this.tenantId })
        : callLogger(logger, { ...this.ids, workerId: this.workerId, tenantId: this.tenantId });
    return this.callLog;
  }

  /** True from placement until the call finishes. */
  get placed(): boolean {
    return this.phase.phase === 'relaying';
  }

  /** Starts listening to the client. */
  start(): void {
    // Bound methods, not arrows: the sources run through tsx, whose kept names cost an arrow
    // made per call a property definition each (about half a microsecond).
    this.call.listen({
      message: this.clientMessage.bind(this),
      ended: this.clientEnded.bind(this),
      gone: this.clientGone.bind(this),
    });
  }

  private clientMessage(message: ClientMessage): void {
    this.dispatch({ type: 'client-message', message });
  }

  private clientEnded(): void {
    this.dispatch({ type: 'client-ended' });
  }

  private clientGone(ending?: { readonly code: GrpcCodeName; readonly details: string }): void {
    this.dispatch(ending ? { type: 'client-gone', ending } : { type: 'client-gone' });
  }

  /** The queued call was admitted: its placement (see `ActiveCall.admitted`). */
  admitted(placement: PlacementDecision): boolean {
    if (this.phase.phase !== 'queued') return false;
    this.dispatch({ type: 'admitted', placement });
    return true;
  }

  /** Ends the call at once with `UNAVAILABLE` (router shutdown). */
  shutDown(reason: string): void {
    this.dispatch({ type: 'shutdown', reason });
  }

  /** Steps the machine with `input`, then with any input its effects produced, in order. */
  private dispatch(input: CallInput): void {
    this.inputs.push(input);
    if (this.stepping) return;
    this.stepping = true;
    try {
      for (let next = this.inputs.shift(); next; next = this.inputs.shift()) {
        const step = stepCall(this.phase, next, this.world);
        this.phase = step.phase;
        for (const effect of step.effects) this.perform(effect);
      }
    } finally {
      this.stepping = false;
    }
  }

  private perform(effect: CallEffect): void {
    const { journal, active, metrics } = this.options;
    switch (effect.type) {
      case 'pause-client':
        this.call.pause();
        return;
      case 'resume-client':
        this.call.resume();
        return;
      case 'identified':
        this.ids = { requestId: effect.requestId, sessionId: effect.sessionId };
        this.callLog = undefined;
        return;
      case 'register':
        active.add(effect.requestId, this);
        return;
      case 'unregister':
        active.delete(effect.requestId, this);
        return;
      case 'wait-turn':
        this.waitTurn(effect.sessionId, effect.tenantId, effect.timeoutMs);
        return;
      case 'leave-line':
        this.clientLeft.abort();
        return;
      case 'release-turn':
        this.turn?.release();
        return;
      case 'explain':
        if (this.options.logger.isLevelEnabled('debug')) {
          const placement = explainPlacement(journal.state, effect.call);
          this.log.debug({ placement }, 'placement explained');
        }
        return;
      case 'record-decision':
        try {
          this.lastAppend = journal.record(effect.decision);
        } catch (error) {
          this.dispatch({ type: 'record-failed', error });
          return;
        }
        this.dispatch({ type: 'recorded' });
        return;
      case 'queued':
        metrics.queued.inc();
        this.queuedAt = performance.now();
        this.queueTimer = setTimeout(
          () => this.dispatch({ type: 'queue-timeout' }),
          effect.timeoutMs,
        );
        if (this.options.logger.isLevelEnabled('debug')) {
          this.log.debug({ why: effect.why }, 'call queued');
        }
        return;
      case 'unqueued':
        metrics.queueWait.observe(
          { tenant: this.tenantId ?? '', outcome: effect.outcome },
          (performance.now() - this.queuedAt) / 1000,
        );
        clearTimeout(this.queueTimer);
        this.queueTimer = undefined;
        return;
      case 'record':
        try {
          this.lastAppend = journal.record(effect.decision);
        } catch (error) {
          this.lastAppend = undefined;
          this.log.error({ err: error }, effect.failure);
        }
        return;
      case 'dial-worker':
        this.dialWorker(effect);
        return;
      case 'open-worker':
        this.openWorker(effect);
        return;
      case 'send-chunk':
        this.sendChunk(effect);
        return;
      case 'half-close-worker':
        this.worker?.halfClose();
        return;
      case 'cancel-worker':
        this.worker?.cancel();
        return;
      case 'to-client':
        this.toClient(effect.answer);
        return;
      case 'end-client':
        this.endClient(effect.afterCommit, effect.trailers);
        return;
      case 'fail-client':
        this.call.fail(effect.code, effect.details, effect.trailers);
        return;
      case 'placed':
        metrics.placements.inc();
        this.workerId = effect.placed.workerId;
        this.callLog = undefined;
        // One info line per call (at its end) keeps logging cheap; the steps are at debug.
        if (this.options.logger.isLevelEnabled('debug')) {
          this.log.debug(
            {
              containerId: effect.placed.containerId,
              checkpointId: effect.placed.checkpointId,
              memory: effect.placed.memory,
              packages: effect.placed.packages,
              skippedPackages: effect.placed.skippedPackages,
              version: effect.placed.version ?? undefined,
              routingRevision: effect.placed.routingRevision ?? undefined,
              coldLoad: effect.placed.coldLoad || undefined,
            },
            'call placed',
          );
        }
        return;
      case 'dial-failed':
        metrics.dialFailures.inc();
        this.options.failures?.record(effect.workerId, {
          at: new Date(this.options.clock()).toISOString(),
          requestId: this.ids.requestId,
          code: 'UNAVAILABLE',
          message: `the router could not reach it (the call was placed again): ${effect.error}`,
        });
        this.log.warn(
          { workerId: effect.workerId, problem: effect.error, attempts: effect.attempts },
          'could not reach the worker the call was placed on: placing it again',
        );
        return;
      case 'bound':
        if (effect.expected !== null) {
          this.log.warn(
            { containerId: effect.ids.containerId, expected: effect.expected },
            "the worker ran the session's call in another container than the pinned one",
          );
        }
        if (this.options.logger.isLevelEnabled('debug')) {
          this.log.debug(
            {
              containerId: effect.ids.containerId,
              checkpointId: effect.ids.checkpointId,
              pinned: effect.createdPin,
            },
            'call bound',
          );
        }
        return;
      case 'malformed':
        this.log.warn({ problem: effect.problem }, 'malformed client stream: call ended');
        return;
      case 'finished':
        metrics.finished.inc({
          code: effect.code ?? 'OK',
          raised: effect.raised ? 'true' : 'false',
        });
        if (effect.code !== null) {
          this.options.failures?.record(effect.placed.workerId, {
            at: new Date(this.options.clock()).toISOString(),
            requestId: effect.ids.requestId,
            code: effect.code,
            message: effect.details,
          });
        }
        this.log.info(
          {
            code: effect.code ?? 'OK',
            details: effect.code === null ? undefined : effect.details,
            raised: effect.raised?.type,
            containerId: effect.ids.containerId || null,
            checkpointId: effect.ids.checkpointId || null,
            pinned: effect.createdPin,
            version: effect.placed.version ?? undefined,
            coldLoad: effect.placed.coldLoad || undefined,
            memory: effect.placed.memory,
            skippedPackages: effect.placed.skippedPackages.length
              ? effect.placed.skippedPackages
              : undefined,
            ms: Math.round(performance.now() - this.startedAt),
            bytesToWorker: this.bytesToWorker,
            bytesToClient: this.bytesToClient,
          },
          'call finished',
        );
        return;
      case 'refused':
        if (!(effect.error instanceof CallAbandonedError)) {
          metrics.rejections.inc({ code: effect.code });
        }
        if (effect.foreign !== undefined) {
          // The caller was answered as for an ID it cannot use; the operator hears whose it is.
          const { kind, id, ownerTenantId } = effect.foreign;
          this.log.warn(
            { code: effect.code, foreign: kind, foreignId: id, ownerTenantId },
            kind === 'session'
              ? "call refused: it names another tenant's session (answered as an unknown session)"
              : "call refused: it reuses another tenant's request ID (answered as an ID in use)",
          );
          return;
        }
        this.log[effect.error instanceof StatusError ? 'info' : 'error'](
          { code: effect.code, problem: effect.details, waited: effect.waited },
          'call refused',
        );
        return;
    }
  }

  private waitTurn(sessionId: string, tenantId: string | null, timeoutMs: number): void {
    const request = { timeoutMs, tenantId, signal: this.clientLeft.signal };
    this.options.turns.acquire(sessionId, request).then(
      (turn) => {
        this.turn = turn;
        this.dispatch({ type: 'turn-granted', waitedMs: turn.waitedMs });
      },
      (error: unknown) => this.dispatch({ type: 'turn-refused', error }),
    );
  }

  private dialWorker(effect: Extract<CallEffect, { type: 'dial-worker' }>): void {
    const { workers, clock } = this.options;
    workers.dial(effect.address, clock() + effect.timeoutMs).then(
      () => this.dispatch({ type: 'worker-dialed' }),
      (error: unknown) =>
        this.dispatch({
          type: 'dial-failed',
          error: error instanceof Error ? error.message : String(error),
        }),
    );
  }

  private openWorker(effect: Extract<CallEffect, { type: 'open-worker' }>): void {
    this.worker = this.options.workers.open(effect.address, effect.deadline, effect.header, {
      answer: this.workerAnswer.bind(this),
      ended: this.workerEnded.bind(this),
    });
  }

  private workerAnswer(answer: WorkerAnswer): void {
    this.dispatch({ type: 'worker-answer', answer });
  }

  private workerEnded(code: number, details: string, trailers: CallTrailers): void {
    this.dispatch({ type: 'worker-ended', code, details, trailers });
  }

  private sendChunk(effect: Extract<CallEffect, { type: 'send-chunk' }>): void {
    const worker = this.worker;
    if (!worker) return;
    this.bytesToWorker += effect.bytes;
    this.options.metrics.relayBytesToWorker.inc(effect.bytes);
    if (!worker.send({ kind: 'chunk', wire: effect.wire }, this.workerDrained)) this.call.pause();
  }

  private readonly workerDrained = this.onWorkerDrained.bind(this);

  private onWorkerDrained(): void {
    this.dispatch({ type: 'worker-drained' });
  }

  /** Writes to the client; while its stream is full, the worker's answers wait. */
  private toClient(answer: ClientAnswer): void {
    if (answer.kind === 'relayed' && answer.answer.carries === 'chunk') {
      this.bytesToClient += answer.answer.chunkBytes;
      this.options.metrics.relayBytesToClient.inc(answer.answer.chunkBytes);
    }
    if (this.call.write(answer, this.clientDrained)) return;
    this.worker?.pause();
  }

  private readonly clientDrained = this.onClientDrained.bind(this);

  private onClientDrained(): void {
    this.worker?.resume();
  }

  private endClient(afterCommit: boolean, trailers: readonly TrailerEntry[]): void {
    const append = this.lastAppend;
    if (!afterCommit || !append) {
      this.call.end(trailers);
      return;
    }
    append.committed.then(
      () => this.call.end(trailers),
      () => this.call.fail('UNAVAILABLE', 'the event log failed', []),
    );
  }
}
