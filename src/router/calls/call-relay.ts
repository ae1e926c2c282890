/**
 * One call through the router on grpc-js (shell): wires the client's `RequestExecution` stream,
 * the session's turn, the log and the worker's `ExecutionService` stream to the core's call state
 * machine (`src/core/calls/call-machine.ts`), and performs the effects it returns: writes,
 * backpressure, appends, logs and metrics. Every rule of the call path is the machine's; what is
 * left here is I/O.
 */
import { status, type Metadata, type ServerDuplexStream } from '@grpc/grpc-js';
import type { AppendResult } from '../../events/index.js';
import type { CallEffect } from '../../core/calls/call-effects.js';
import { newCall, stepCall } from '../../core/calls/call-machine.js';
import type { CallInput, CallPhase, CallWorld } from '../../core/calls/call-phases.js';
import type { ClientAnswer, ClientMessage } from '../../core/calls/relay-messages.js';
import { CallAbandonedError } from '../../core/errors.js';
import { explainPlacement, type PlacementCaches } from '../../core/placement/index.js';
import type { Config } from '../../shared/config.js';
import { StatusError } from '../../shared/status-error.js';
import type { Journal } from '../journal/index.js';
import { callLogger, type Logger } from '../observability/logger.js';
import type { RouterMetrics } from '../observability/metrics.js';
import type { SessionTurn, SessionTurns } from '../sessions/index.js';
import type { WorkerConnections } from '../workers/index.js';
import type { ActiveCall, ActiveCalls } from './active-calls.js';
import { trailerMetadata } from './trailer-metadata.js';
import { readieTrailersOf, WorkerLeg } from './worker-leg.js';

/** Everything a call needs from the router. */
export interface CallPathOptions {
  readonly journal: Journal;
  /** Placement's caches for the journal's state (its log folds with them). */
  readonly placement: PlacementCaches;
  readonly turns: SessionTurns;
  readonly connections: WorkerConnections;
  readonly active: ActiveCalls;
  readonly config: Config;
  /** The router's clock, in epoch ms: the one that stamps the log. */
  readonly clock: () => number;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  /**
   * Metadata for every worker stream (the router's own token, when it has one), kept current by
   * the credentials; each call sends a clone, since grpc-js writes its own headers into the
   * metadata it is given.
   */
  readonly workerMetadata: Metadata;
}

type ClientStream = ServerDuplexStream<ClientMessage, ClientAnswer>;

/** Epoch ms of a grpc-js deadline (Infinity when none). */
function deadlineMs(deadline: Date | number): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/** Handles one `RequestExecution` stream from its first message to its status. */
export class CallRelay implements ActiveCall {
  private phase: CallPhase;
  private readonly inputs: CallInput[] = [];
  private stepping = false;
  private log: Logger;
  /** The call's IDs for its log lines, once its config named them. */
  private ids: { requestId: string; sessionId: string | null } = { requestId: '', sessionId: null };
  private turn: SessionTurn | undefined;
  private readonly clientLeft = new AbortController();
  private worker: WorkerLeg | undefined;
  private lastAppend: AppendResult | undefined;
  private readonly startedAt = performance.now();
  private bytesToWorker = 0;
  private bytesToClient = 0;

  constructor(
    private readonly options: CallPathOptions,
    private readonly call: ClientStream,
    /** The tenant the caller's credential names; null without one. */
    private readonly tenantId: string | null = null,
  ) {
    this.log = options.logger.child({ tenantId });
    this.phase = newCall(deadlineMs(call.getDeadline()), tenantId);
  }

  /** True from placement until the call finishes. */
  get placed(): boolean {
    return this.phase.phase === 'relaying';
  }

  /** Starts listening to the client. */
  start(): void {
    this.call.on('data', (message: ClientMessage) =>
      this.dispatch({ type: 'client-message', message }),
    );
    this.call.on('end', () => this.dispatch({ type: 'client-ended' }));
    // Also told after a status: the machine is done by then and ignores it.
    this.call.on('cancelled', () => this.dispatch({ type: 'client-gone' }));
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
        const step = stepCall(this.phase, next, this.world());
        this.phase = step.phase;
        for (const effect of step.effects) this.perform(effect);
      }
    } finally {
      this.stepping = false;
    }
  }

  private world(): CallWorld {
    const { journal, placement, clock, config, active } = this.options;
    return {
      state: journal.state,
      caches: placement,
      now: clock(),
      settings: config,
      handling: (requestId) => active.has(requestId),
    };
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
        this.log = callLogger(this.options.logger, {
          ...this.ids,
          workerId: null,
          tenantId: this.tenantId,
        });
        return;
      case 'register':
        active.add(effect.requestId, this);
        return;
      case 'unregister':
        active.delete(effect.requestId, this);
        return;
      case 'wait-turn':
        this.waitTurn(effect.sessionId, effect.timeoutMs);
        return;
      case 'leave-line':
        this.clientLeft.abort();
        return;
      case 'release-turn':
        this.turn?.release();
        return;
      case 'explain':
        if (this.log.isLevelEnabled('debug')) {
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
        this.sendChunk(effect.wire, effect.bytes);
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
        this.endClient(effect.afterCommit, trailerMetadata(effect.trailers));
        return;
      case 'fail-client':
        this.call.emit('error', {
          code: status[effect.code],
          details: effect.details,
          metadata: trailerMetadata(effect.trailers),
        });
        return;
      case 'placed':
        metrics.placements.inc();
        this.log = callLogger(this.options.logger, {
          ...this.ids,
          workerId: effect.placed.workerId,
          tenantId: this.tenantId,
        });
        // One info line per call (at its end) keeps logging cheap; the steps are at debug.
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
        return;
      case 'dial-failed':
        metrics.dialFailures.inc();
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
        this.log.debug(
          {
            containerId: effect.ids.containerId,
            checkpointId: effect.ids.checkpointId,
            pinned: effect.createdPin,
          },
          'call bound',
        );
        return;
      case 'malformed':
        this.log.warn({ problem: effect.problem }, 'malformed client stream: call ended');
        return;
      case 'finished':
        metrics.finished.inc({ code: effect.code ?? 'OK' });
        this.log.info(
          {
            code: effect.code ?? 'OK',
            details: effect.code === null ? undefined : effect.details,
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
        this.log[effect.error instanceof StatusError ? 'info' : 'error'](
          { code: effect.code, problem: effect.details, waited: effect.waited },
          'call refused',
        );
        return;
    }
  }

  private waitTurn(sessionId: string, timeoutMs: number): void {
    this.options.turns.acquire(sessionId, { timeoutMs, signal: this.clientLeft.signal }).then(
      (turn) => {
        this.turn = turn;
        this.dispatch({ type: 'turn-granted' });
      },
      (error: unknown) => this.dispatch({ type: 'turn-refused', error }),
    );
  }

  private dialWorker(effect: Extract<CallEffect, { type: 'dial-worker' }>): void {
    const { connections, clock } = this.options;
    connections.dial(effect.address, clock() + effect.timeoutMs).then(
      () => this.dispatch({ type: 'worker-dialed' }),
      (error: unknown) =>
        this.dispatch({
          type: 'dial-failed',
          error: error instanceof Error ? error.message : String(error),
        }),
    );
  }

  private openWorker(effect: Extract<CallEffect, { type: 'open-worker' }>): void {
    const { connections, workerMetadata } = this.options;
    const leg = WorkerLeg.open(
      connections.execution(effect.address),
      workerMetadata.clone(),
      effect.deadline,
      {
        answer: (answer) => this.dispatch({ type: 'worker-answer', answer }),
        ended: (final) =>
          this.dispatch({
            type: 'worker-ended',
            code: final.code,
            details: final.details,
            trailers: readieTrailersOf(final),
          }),
      },
    );
    this.worker = leg;
    leg.send({ kind: 'header', header: effect.header }, () => undefined);
  }

  private sendChunk(wire: Buffer, bytes: number): void {
    const worker = this.worker;
    if (!worker) return;
    this.bytesToWorker += bytes;
    this.options.metrics.relayBytesToWorker.inc(bytes);
    const drained = () => this.dispatch({ type: 'worker-drained' });
    if (!worker.send({ kind: 'chunk', wire }, drained)) this.call.pause();
  }

  /** Writes to the client; while its stream is full, the worker's answers wait. */
  private toClient(answer: ClientAnswer): void {
    if (answer.kind === 'relayed' && answer.answer.carries === 'chunk') {
      this.bytesToClient += answer.answer.chunkBytes;
      this.options.metrics.relayBytesToClient.inc(answer.answer.chunkBytes);
    }
    if (this.call.write(answer)) return;
    const worker = this.worker;
    worker?.pause();
    this.call.once('drain', () => worker?.resume());
  }

  private endClient(afterCommit: boolean, trailers: Metadata): void {
    const append = this.lastAppend;
    if (!afterCommit || !append) {
      this.call.end(trailers);
      return;
    }
    append.committed.then(
      () => this.call.end(trailers),
      () => this.call.emit('error', { code: status.UNAVAILABLE, details: 'the event log failed' }),
    );
  }
}
