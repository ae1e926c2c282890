/**
 * One call through the router (issue 5, `ProxyService.RequestExecution` steps 1 to 6):
 *
 * 1. the first message must be a config with a request ID; anything malformed later is
 *    `INVALID_ARGUMENT` and ends the call cleanly;
 * 2. a session's call waits for the session's turn;
 * 3. `CallRequested`, placement and its outcome are appended in one synchronous step;
 * 4. the worker stream opens with the `EXECUTION_TIMEOUT` deadline: the header first, then the
 *    client's chunks as they arrive (backpressure both ways, nothing buffered beyond a few chunks);
 * 5. answers are relayed as they arrive; the first names the container (`CallBound`, and
 *    `SessionPinned` for a session's new container); the call ends with `CallFinished`, exactly
 *    once, whatever ends it;
 * 6. errors keep their gRPC codes end to end.
 */
import { status, type Metadata, type ServerDuplexStream, type StatusObject } from '@grpc/grpc-js';
import type { AppendResult, Demand } from '../../events/index.js';
import type { CallIds } from '../../proto/gen/readie/v1/call.js';
import type { CallConfig } from '../../proto/gen/readie/v1/proxy.js';
import type { Config } from '../../shared/config.js';
import { StatusError } from '../../shared/status-error.js';
import {
  CallAbandonedError,
  CallRejectedError,
  DuplicateRequestError,
  InvalidStreamError,
} from '../../core/errors.js';
import { codeName, toServiceError } from '../grpc-status.js';
import type { Journal } from '../journal/index.js';
import { callLogger, type Logger } from '../observability/logger.js';
import type { RouterMetrics } from '../observability/metrics.js';
import {
  explainPlacement,
  type CallToPlace,
  type PlacementCaches,
  type PlacedDecision,
} from '../../core/placement/index.js';
import type { SessionTurn, SessionTurns } from '../sessions/index.js';
import type { WorkerConnections } from '../workers/index.js';
import type { ActiveCall, ActiveCalls } from './active-calls.js';
import {
  demandOf,
  firstConfigOf,
  payloadChunkOf,
  sessionIdOf,
} from '../../core/calls/call-config.js';
import {
  answerIds,
  decideBound,
  decideCall,
  decideCallEnd,
  departureOf,
  workerEnding,
  type CallEnding,
} from '../../core/calls/call-steps.js';
import type { ClientAnswer, ClientMessage, WorkerAnswer } from '../../core/calls/relay-messages.js';
import { callHeaderOf, placedIds, skippedPackageLine } from '../../core/calls/worker-header.js';
import { WorkerLeg } from './worker-leg.js';

/** Everything a call needs from the router. */
export interface CallPathOptions {
  readonly journal: Journal;
  /** Placement's caches for the journal's state (its log folds with them). */
  readonly placement: PlacementCaches;
  readonly turns: SessionTurns;
  readonly connections: WorkerConnections;
  readonly active: ActiveCalls;
  readonly config: Config;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  /**
   * Metadata for every worker stream (the bearer token, when set), built once; each call sends a
   * clone, since grpc-js writes its own headers into the metadata it is given.
   */
  readonly workerMetadata: Metadata;
}

type ClientStream = ServerDuplexStream<ClientMessage, ClientAnswer>;
type ClientChunk = Extract<ClientMessage, { kind: 'chunk' }>;

/** Where a call is in its life. */
type Phase = 'awaiting-config' | 'waiting-turn' | 'relaying' | 'done';

/** Epoch ms of a grpc-js deadline (Infinity when none). */
function deadlineMs(deadline: Date | number): number {
  return deadline instanceof Date ? deadline.getTime() : deadline;
}

/** Handles one `RequestExecution` stream from its first message to its status. */
export class CallRelay implements ActiveCall {
  private phase: Phase = 'awaiting-config';
  private log: Logger;
  private config: CallConfig | undefined;
  private demand: Demand | undefined;
  private requestId = '';
  private sessionId: string | null = null;
  private turn: SessionTurn | undefined;
  private decision: PlacedDecision | undefined;
  private worker: WorkerLeg | undefined;
  private ids: CallIds | undefined;
  private bound = false;
  private createdPin = false;
  private clientGone = false;
  private readonly clientLeft = new AbortController();
  private readonly startedAt = performance.now();
  private bytesToWorker = 0;
  private bytesToClient = 0;

  constructor(
    private readonly options: CallPathOptions,
    private readonly call: ClientStream,
  ) {
    this.log = options.logger;
  }

  /** True from placement until the call finishes. */
  get placed(): boolean {
    return this.phase === 'relaying';
  }

  /** Starts listening to the client. */
  start(): void {
    this.call.on('data', (message: ClientMessage) => this.onClientMessage(message));
    this.call.on('end', () => this.onClientEnd());
    this.call.on('cancelled', () => this.onClientGone());
  }

  /** Ends the call at once with `UNAVAILABLE` (router shutdown). */
  shutDown(reason: string): void {
    if (this.phase === 'relaying') {
      this.complete({ code: 'UNAVAILABLE', details: reason });
    } else {
      this.refuse(new CallAbandonedError(reason), status.UNAVAILABLE);
    }
  }

  // ---- client side -------------------------------------------------------------------------

  private onClientMessage(message: ClientMessage): void {
    switch (this.phase) {
      case 'awaiting-config':
        this.call.pause();
        this.begin(message);
        return;
      case 'relaying': {
        let chunk: ClientChunk;
        try {
          chunk = payloadChunkOf(message);
        } catch (error) {
          const problem = (error as Error).message;
          this.log.warn({ problem }, 'malformed client stream: call ended');
          this.complete({ code: 'INVALID_ARGUMENT', details: problem });
          return;
        }
        this.forwardChunk(chunk);
        return;
      }
      case 'waiting-turn':
      case 'done':
        return;
    }
  }

  private onClientEnd(): void {
    // The client stream is paused from its config until the worker leg opens, so its end arrives
    // before the config or while relaying, never while the call waits for its turn.
    if (this.phase === 'awaiting-config') {
      this.refuse(new InvalidStreamError('the stream ended before any config message'));
    } else if (this.phase === 'relaying') {
      this.worker?.halfClose();
    }
  }

  /** The client cancelled or its deadline passed (also told after a status: then ignored). */
  private onClientGone(): void {
    if (this.phase === 'done') return;
    this.clientGone = true;
    this.clientLeft.abort();
    const departure = departureOf(Date.now(), deadlineMs(this.call.getDeadline()));
    if (this.phase === 'relaying') {
      this.complete(departure);
    } else {
      this.refuse(new CallAbandonedError(departure.details));
    }
  }

  // ---- steps 1 to 3: config, turn, placement -------------------------------------------------

  private begin(message: ClientMessage): void {
    let config: CallConfig;
    try {
      config = firstConfigOf(message);
    } catch (error) {
      this.refuse(error);
      return;
    }
    const { active, journal, logger } = this.options;
    this.config = config;
    this.requestId = config.requestId;
    this.sessionId = sessionIdOf(config);
    this.demand = demandOf(config);
    this.log = callLogger(logger, {
      requestId: this.requestId,
      sessionId: this.sessionId,
      workerId: null,
    });
    if (active.has(this.requestId) || journal.state.reservations.has(this.requestId)) {
      this.refuse(new DuplicateRequestError(this.requestId));
      return;
    }
    active.add(this.requestId, this);
    this.phase = 'waiting-turn';
    if (this.sessionId === null) {
      this.placeAndOpen();
      return;
    }
    this.options.turns
      .acquire(this.sessionId, {
        timeoutMs: this.options.config.SESSION_WAIT_TIMEOUT,
        signal: this.clientLeft.signal,
      })
      .then(
        (turn) => {
          if (this.phase !== 'waiting-turn') {
            turn.release();
            return;
          }
          this.turn = turn;
          this.placeAndOpen();
        },
        (error: unknown) => this.refuse(error),
      );
  }

  /** Step 3 and the start of step 4, in one synchronous step. */
  private placeAndOpen(): void {
    const { journal, metrics, logger } = this.options;
    const call: CallToPlace = {
      requestId: this.requestId,
      sessionId: this.sessionId,
      demand: this.demand as Demand,
    };
    const state = journal.state;
    if (this.log.isLevelEnabled('debug')) {
      this.log.debug({ placement: explainPlacement(state, call) }, 'placement explained');
    }
    const made = decideCall(state, { call, caches: this.options.placement });
    const decision = made.placement;
    try {
      journal.record(made);
    } catch (error) {
      this.refuse(error);
      return;
    }
    if (decision.outcome === 'rejected') {
      this.refuse(new CallRejectedError(decision.code, decision.message));
      return;
    }
    metrics.placements.inc();
    this.decision = decision;
    this.phase = 'relaying';
    this.log = callLogger(logger, {
      requestId: this.requestId,
      sessionId: this.sessionId,
      workerId: decision.workerId,
    });
    // One info line per call (at its end) keeps logging cheap; the steps are at debug.
    this.log.debug(
      {
        containerId: decision.containerId,
        checkpointId: decision.checkpointId,
        memory: decision.memory,
        packages: decision.packages,
        skippedPackages: decision.skippedPackages,
      },
      'call placed',
    );
    this.openWorker(decision);
  }

  // ---- step 4: the worker stream ---------------------------------------------------------------

  private openWorker(decision: PlacedDecision): void {
    const { journal, connections, config, workerMetadata } = this.options;
    const worker = journal.state.workers.get(decision.workerId);
    const deadline = Math.min(
      Date.now() + config.EXECUTION_TIMEOUT,
      deadlineMs(this.call.getDeadline()),
    );
    const leg = WorkerLeg.open(
      connections.execution(worker?.address ?? ''),
      workerMetadata.clone(),
      deadline,
      {
        answer: (answer) => this.onWorkerAnswer(answer),
        ended: (final) => this.onWorkerEnded(final),
      },
    );
    this.worker = leg;
    const ids = placedIds(this.requestId, this.sessionId, decision);
    this.ids = ids;
    const header = callHeaderOf(ids, this.config as CallConfig, this.demand as Demand, decision);
    leg.send({ kind: 'header', header }, () => undefined);
    for (const entry of decision.skippedPackages) {
      const line = skippedPackageLine(entry, worker?.flavor ?? 'these');
      this.toClient({ kind: 'message', message: { ids, message: { $case: 'log', value: line } } });
    }
    this.call.resume();
  }

  private forwardChunk(chunk: ClientChunk): void {
    const worker = this.worker;
    if (!worker) return;
    this.bytesToWorker += chunk.bytes;
    this.options.metrics.relayBytesToWorker.inc(chunk.bytes);
    const drained = () => {
      if (this.phase === 'relaying') this.call.resume();
    };
    if (!worker.send({ kind: 'chunk', wire: chunk.wire }, drained)) this.call.pause();
  }

  // ---- step 5: answers ---------------------------------------------------------------------------

  private onWorkerAnswer(answer: WorkerAnswer): void {
    if (this.phase !== 'relaying') return;
    const ids = answerIds(this.ids as CallIds, answer.ids);
    if (!this.bound && ids.containerId !== '') this.bind(ids);
    if (answer.carries === 'chunk') {
      this.bytesToClient += answer.chunkBytes;
      this.options.metrics.relayBytesToClient.inc(answer.chunkBytes);
    }
    if (!this.toClient({ kind: 'relayed', ids, answer })) {
      const worker = this.worker;
      worker?.pause();
      this.call.once('drain', () => worker?.resume());
    }
  }

  /** The first answer naming the container: `CallBound`, and the pin of a session's new container. */
  private bind(ids: CallIds): void {
    this.bound = true;
    this.ids = ids;
    const decision = this.decision as PlacedDecision;
    const bound = decideBound(this.options.journal.state, {
      requestId: this.requestId,
      sessionId: this.sessionId,
      placed: decision,
      ids,
    });
    const { events } = bound;
    try {
      this.options.journal.record(bound);
    } catch (error) {
      this.log.error({ err: error }, 'could not record the container of the call');
      return;
    }
    this.createdPin = events.some((event) => event.type === 'SessionPinned');
    if (decision.containerId !== null && decision.containerId !== ids.containerId) {
      this.log.warn(
        { containerId: ids.containerId, expected: decision.containerId },
        "the worker ran the session's call in another container than the pinned one",
      );
    }
    this.log.debug(
      { containerId: ids.containerId, checkpointId: ids.checkpointId, pinned: this.createdPin },
      'call bound',
    );
  }

  /** The worker's final status (an OK one after every answer was relayed). */
  private onWorkerEnded(final: StatusObject): void {
    this.complete(workerEnding(this.decision?.workerId ?? '', final.code, final.details));
  }

  // ---- endings -------------------------------------------------------------------------------------

  /**
   * Ends a placed call: `CallFinished` (and its consequences) exactly once, the worker stream
   * cancelled if still open, the turn released, and the client told (unless it left).
   */
  private complete(ending: CallEnding): void {
    if (this.phase !== 'relaying') return;
    const { code, details } = ending;
    this.phase = 'done';
    const { journal, metrics, active } = this.options;
    let finished: AppendResult | undefined;
    try {
      finished = journal.record(decideCallEnd(journal.state, { requestId: this.requestId, code }));
    } catch (error) {
      this.log.error({ err: error }, 'could not record the end of the call');
    }
    this.worker?.cancel();
    this.turn?.release();
    active.delete(this.requestId, this);
    metrics.finished.inc({ code: code ?? 'OK' });
    this.log.info(
      {
        code: code ?? 'OK',
        details: code === null ? undefined : details,
        containerId: this.ids?.containerId || null,
        checkpointId: this.ids?.checkpointId || null,
        pinned: this.createdPin,
        memory: this.decision?.memory,
        skippedPackages: this.decision?.skippedPackages.length
          ? this.decision.skippedPackages
          : undefined,
        ms: Math.round(performance.now() - this.startedAt),
        bytesToWorker: this.bytesToWorker,
        bytesToClient: this.bytesToClient,
      },
      'call finished',
    );
    if (code !== null) {
      this.sendError({ code: status[code], details });
    } else if (this.createdPin && finished) {
      // The client may rely on its session once told OK: the pin must survive a router crash.
      finished.committed.then(
        () => this.endClient(),
        () => this.sendError({ code: status.UNAVAILABLE, details: 'the event log failed' }),
      );
    } else {
      this.endClient();
    }
  }

  /** Ends a call that was never placed (or given up while waiting): no `CallFinished`. */
  private refuse(error: unknown, override?: status): void {
    if (this.phase === 'relaying' || this.phase === 'done') return;
    const wasWaiting = this.phase === 'waiting-turn';
    this.phase = 'done';
    if (wasWaiting) this.clientLeft.abort(); // leave the session's line
    this.turn?.release();
    if (this.requestId !== '') this.options.active.delete(this.requestId, this);
    const serviceError = toServiceError(error);
    const code = override ?? serviceError.code;
    if (!(error instanceof CallAbandonedError)) {
      this.options.metrics.rejections.inc({ code: codeName(code) });
    }
    const level = error instanceof StatusError ? 'info' : 'error';
    this.log[level](
      { code: codeName(code), problem: serviceError.details, waited: wasWaiting },
      'call refused',
    );
    this.sendError({ code, details: serviceError.details });
  }

  private toClient(response: ClientAnswer): boolean {
    if (this.clientGone) return true;
    return this.call.write(response);
  }

  private endClient(): void {
    if (!this.clientGone) this.call.end();
  }

  private sendError(error: { code: status; details: string }): void {
    if (this.clientGone) return;
    this.call.emit('error', error);
  }
}
