/**
 * One call through the router as a pure state machine. The call's phase is a discriminated union
 * that carries what the call knows in it (awaiting its config, waiting for its session's turn,
 * placing, relaying, done); `stepCall` takes the phase, one input (a client message, a turn, the
 * log's answer, a worker answer, a departure, a shutdown) and the world as it is now (the state,
 * placement's caches, the clock's reading), and returns the next phase and the effects to perform
 * in order. It performs nothing: a transport shell (`src/router/calls/call-relay.ts`)
 * wires streams to inputs and performs the effects. It holds no transport types. The phases, inputs
 * and world are in `call-phases.ts`, the effects in `call-effects.ts`.
 *
 * The steps (`ProxyService.RequestExecution`, docs/router.md):
 * 1. the first message must be a config with a request ID; anything malformed later is
 *    `INVALID_ARGUMENT` and ends the call cleanly; a request ID in flight is `ALREADY_EXISTS`;
 * 2. a session's call waits for the session's turn;
 * 3. `CallRequested`, placement and its outcome are one decision, recorded before anything else;
 * 4. the router connects to the worker (within `PROBE_TIMEOUT`); a connection that cannot be made
 *    before anything was sent is a failed dial: recorded, counted as a failed probe, and the call
 *    placed again without that worker (`dial-failure.ts`); then the worker stream opens with the
 *    `EXECUTION_TIMEOUT` deadline: the header first, then the client's chunks as they arrive;
 * 5. answers are relayed as they arrive; the first naming the container records `CallBound` (and
 *    `SessionPinned` for a session's new container); the call ends with `CallFinished`, exactly
 *    once, whatever ends it;
 * 6. errors keep their gRPC codes end to end; every refusal before the user's function started
 *    says so (`readie-not-started`), and the worker's trailers about the function are relayed.
 */
import type { CallConfig } from '../../proto/gen/readie/v1/proxy.js';
import {
  NEVER_FITS,
  NO_TRAILERS,
  NOT_STARTED,
  QUEUE_TIMED_OUT,
} from '../../shared/call-trailers.js';
import type { GrpcCodeName } from '../../shared/grpc-codes.js';
import { declarationKey } from '../../shared/image-declaration.js';
import type { ImageSpec } from '../../proto/gen/readie/v1/call.js';
import { isEmptyImage } from './image-fields.js';
import {
  CallAbandonedError,
  CallRejectedError,
  DuplicateRequestError,
  InvalidStreamError,
  SessionBusyError,
  statusOf,
} from '../errors.js';
import { answerTrailers, type TrailerEntry } from './answer-trailers.js';
import type { CallEffect } from './call-effects.js';
import type { CallFacts, CallInput, CallPhase, CallWorld } from './call-phases.js';
import type { QueueLeaveReason } from '../../events/schema.js';
import { queuedCount, queueTimeoutMessage } from '../admission/index.js';
import type { PlacementDecision } from '../placement/index.js';
import { demandOf, firstConfigOf, payloadChunkOf, sessionIdOf } from './call-config.js';
import { decide } from '../decisions.js';
import {
  answerIds,
  deadlineLeft,
  departureOf,
  workerEnding,
  type CallEnding,
} from './call-steps.js';
import type { ForeignId } from '../placement/index.js';
import type { ClientMessage, WorkerAnswer } from './relay-messages.js';
import { callHeaderOf, placedIds, skippedPackageLine } from './worker-header.js';

/** A step's result. */
export interface CallStep {
  readonly phase: CallPhase;
  readonly effects: readonly CallEffect[];
}

/** A call that has not said anything yet; `clientDeadline` in epoch ms (Infinity: none). */
export function newCall(clientDeadline: number, tenantId: string | null = null): CallPhase {
  return { phase: 'awaiting-config', clientDeadline, tenantId };
}

const NOTHING: readonly CallEffect[] = [];

/** The call after `input`, and what to do. */
export function stepCall(phase: CallPhase, input: CallInput, world: CallWorld): CallStep {
  if (input.type === 'shutdown') return shutDown(phase, input.reason, world);
  switch (phase.phase) {
    case 'awaiting-config':
      return awaitingConfig(phase, input, world);
    case 'waiting-turn':
      return waitingTurn(phase, input, world);
    case 'placing':
      return placing(phase, input, world);
    case 'queued':
      return queued(phase, input, world);
    case 'dialing':
      return dialing(phase, input, world);
    case 'relaying':
      return relaying(phase, input, world);
    case 'done':
      // A turn granted after the call ended must be given back at once.
      return {
        phase,
        effects: input.type === 'turn-granted' ? [{ type: 'release-turn' }] : NOTHING,
      };
  }
}

function awaitingConfig(
  phase: Extract<CallPhase, { phase: 'awaiting-config' }>,
  input: CallInput,
  world: CallWorld,
): CallStep {
  switch (input.type) {
    case 'client-message':
      return begin(phase, input.message, world);
    case 'client-ended':
      return refuse(phase, new InvalidStreamError('the stream ended before any config message'));
    case 'client-gone':
      return refuse(
        phase,
        new CallAbandonedError(goneEnding(input, world, phase.clientDeadline).details),
        { clientGone: true },
      );
    default:
      return { phase, effects: NOTHING };
  }
}

/** Steps 1 and 2: the config, the duplicate check, then the turn (or placement at once). */
function begin(
  phase: Extract<CallPhase, { phase: 'awaiting-config' }>,
  message: ClientMessage,
  world: CallWorld,
): CallStep {
  const pause: CallEffect = { type: 'pause-client' };
  let config: CallConfig;
  try {
    config = firstConfigOf(message);
  } catch (error) {
    return prefixed(pause, refuse(phase, error));
  }
  const requestId = config.requestId;
  const sessionId = sessionIdOf(config.sessionId);
  const identified: CallEffect = { type: 'identified', requestId, sessionId };
  if (isDuplicateRequest(world, requestId)) {
    return prefixed(pause, identified, refuse(phase, new DuplicateRequestError(requestId)));
  }
  const facts: CallFacts = {
    config,
    call: {
      requestId,
      sessionId,
      tenantId: phase.tenantId,
      demand: demandOf(config),
      retryOf: config.retryOf === '' ? null : config.retryOf,
      imageKey: isEmptyImage(config.image)
        ? null
        : declarationKey(phase.tenantId ?? '', config.image as ImageSpec),
    },
    clientDeadline: phase.clientDeadline,
  };
  const register: CallEffect = { type: 'register', requestId };
  if (sessionId === null) return prefixed(pause, identified, register, place(facts, world));
  return {
    phase: { phase: 'waiting-turn', facts },
    effects: [
      pause,
      identified,
      register,
      {
        type: 'wait-turn',
        sessionId,
        tenantId: phase.tenantId,
        timeoutMs: world.settings.SESSION_WAIT_TIMEOUT,
      },
    ],
  };
}

/**
 * The duplicate-request rule: a request ID this router is handling, or that holds a reservation
 * in the log (a call in flight, here or before a restart's recovery), is refused.
 */
export function isDuplicateRequest(world: CallWorld, requestId: string): boolean {
  return world.handling(requestId) || world.state.reservations.has(requestId);
}

function waitingTurn(
  phase: Extract<CallPhase, { phase: 'waiting-turn' }>,
  input: CallInput,
  world: CallWorld,
): CallStep {
  switch (input.type) {
    case 'turn-granted':
      return place(
        input.waitedMs ? { ...phase.facts, turnWaitMs: Math.round(input.waitedMs) } : phase.facts,
        world,
      );
    case 'turn-refused': {
      const refused = refuse(phase, input.error);
      if (!(input.error instanceof SessionBusyError)) return refused;
      // "session is busy" is logged: the call's end, though it never reached placement.
      const { requestId, sessionId, tenantId } = phase.facts.call;
      const decision = decide('turnRefusal', world.state, {
        requestId,
        sessionId: sessionId ?? '',
        tenantId: tenantId ?? null,
        waitedMs: input.error.waitedMs,
        ahead: input.error.ahead,
      });
      return prefixed(
        { type: 'record', decision, failure: 'could not record the session-busy refusal' },
        refused,
      );
    }
    case 'client-gone':
      return refuse(
        phase,
        new CallAbandonedError(goneEnding(input, world, phase.facts.clientDeadline).details),
        { clientGone: true },
      );
    default:
      return { phase, effects: NOTHING };
  }
}

/** Step 3: the call's decision, to be recorded before anything else happens. */
function place(facts: CallFacts, world: CallWorld): CallStep {
  // What the caller's deadline leaves as the call is requested: recorded, and read by placement.
  const call = { ...facts.call, deadlineMs: deadlineLeft(facts.clientDeadline, world.now) };
  const decision = decide('call', world.state, {
    call,
    caches: world.caches,
    inputs: facts.config.inputs || null,
    function: facts.config.function === '' ? null : facts.config.function,
    turnWaitMs: facts.turnWaitMs ?? null,
  });
  return {
    phase: { phase: 'placing', facts, decision },
    effects: [
      { type: 'explain', call },
      { type: 'record-decision', decision },
    ],
  };
}

function placing(
  phase: Extract<CallPhase, { phase: 'placing' }>,
  input: CallInput,
  world: CallWorld,
): CallStep {
  switch (input.type) {
    case 'recorded':
      return 'queued' in phase.decision && phase.decision.queued !== null
        ? enqueued(phase.facts, phase.decision.queued, world)
        : placed(phase.facts, phase.decision.placement, world);
    case 'record-failed':
      return refuse(phase, input.error);
    default:
      return { phase, effects: NOTHING };
  }
}

/**
 * The client told where its call stands in the admission queue: queued, with the calls of its own
 * tenant ahead of it (its `CallQueued` is folded already), or admitted.
 */
function queueNotice(facts: CallFacts, queued: boolean, world: CallWorld): CallEffect {
  const ahead = queued ? Math.max(0, queuedCount(world.state, facts.call.tenantId ?? null) - 1) : 0;
  const ids = {
    requestId: facts.call.requestId,
    sessionId: facts.call.sessionId ?? '',
    workerId: '',
    containerId: '',
    checkpointId: '',
    version: '',
    routingRevision: 0,
  };
  return {
    type: 'to-client',
    answer: {
      kind: 'message',
      message: { ids, message: { $case: 'queue', value: { queued, ahead } } },
    },
  };
}

/** The call waits in the admission queue, paused, until admitted or gone. */
function enqueued(facts: CallFacts, why: string, world: CallWorld): CallStep {
  return {
    phase: { phase: 'queued', facts, why, held: [], clientEnded: false },
    effects: [
      {
        type: 'queued',
        requestId: facts.call.requestId,
        timeoutMs: world.settings.QUEUE_TIMEOUT,
        why,
      },
      queueNotice(facts, true, world),
    ],
  };
}

function queued(
  phase: Extract<CallPhase, { phase: 'queued' }>,
  input: CallInput,
  world: CallWorld,
): CallStep {
  switch (input.type) {
    case 'admitted':
      return prefixed(
        { type: 'unqueued', outcome: 'admitted' },
        queueNotice(phase.facts, false, world),
        placed(phase.facts, input.placement, world, phase.held, phase.clientEnded),
      );
    case 'queue-timeout': {
      const message = queueTimeoutMessage(world.settings.QUEUE_TIMEOUT, phase.why);
      return leaveQueue(phase, 'timeout', { code: 'RESOURCE_EXHAUSTED', details: message }, world);
    }
    case 'client-gone': {
      const ending = goneEnding(input, world, phase.facts.clientDeadline);
      const reason = ending.code === 'DEADLINE_EXCEEDED' ? 'deadline' : 'cancelled';
      return leaveQueue(phase, reason, ending, world, true);
    }
    case 'client-message':
      return { phase: { ...phase, held: [...phase.held, input.message] }, effects: NOTHING };
    case 'client-ended':
      return { phase: { ...phase, clientEnded: true }, effects: NOTHING };
    default:
      return { phase, effects: NOTHING };
  }
}

/** A queued call leaves the queue unplaced: `CallLeftQueue`, and the client told why. */
function leaveQueue(
  phase: Extract<CallPhase, { phase: 'queued' }>,
  reason: QueueLeaveReason,
  ending: CallEnding,
  world: CallWorld,
  clientGone = false,
): CallStep {
  const code = ending.code ?? 'CANCELLED';
  const { requestId } = phase.facts.call;
  const decision = decide('leaveQueue', world.state, {
    requestId,
    reason,
    code,
    message: ending.details,
  });
  const error =
    reason === 'timeout'
      ? new CallRejectedError(code, ending.details)
      : new CallAbandonedError(ending.details);
  const trailers =
    reason === 'timeout' ? answerTrailers({ requestId }, undefined, QUEUE_TIMED_OUT) : undefined;
  return prefixed(
    { type: 'unqueued', outcome: reason },
    { type: 'record', decision, failure: 'could not record that the call left the queue' },
    refuse(phase, error, { clientGone, code, ...(trailers ? { trailers } : {}) }),
  );
}

/** Step 4 once the decision is in the log: refuse, or connect to the placed worker first. */
function placed(
  facts: CallFacts,
  decision: PlacementDecision,
  world: CallWorld,
  held: readonly ClientMessage[] = [],
  clientEnded = false,
): CallStep {
  const phase = { phase: 'placing', facts } as const;
  if (decision.outcome === 'rejected') {
    const { code, message, retryAfterMs } = decision;
    const trailers = answerTrailers(
      {
        requestId: facts.call.requestId,
        sessionId: facts.call.sessionId ?? '',
        version: decision.version ?? '',
        routingRevision: decision.routingRevision ?? 0,
      },
      retryAfterMs === null ? undefined : { code, message, retryAfterMs },
      decision.fit === 'never' ? NEVER_FITS : NOT_STARTED,
    );
    return refuse(phase, new CallRejectedError(code, message), {
      trailers,
      ...(decision.foreign === undefined ? {} : { foreign: decision.foreign }),
    });
  }
  const { requestId, sessionId } = facts.call;
  const worker = world.state.workers.get(decision.workerId);
  return {
    phase: {
      phase: 'dialing',
      facts,
      placed: decision,
      ids: placedIds(requestId, sessionId, decision),
      held,
      clientEnded,
    },
    effects: [
      { type: 'placed', placed: decision },
      {
        type: 'dial-worker',
        workerId: decision.workerId,
        address: worker?.address ?? '',
        timeoutMs: world.settings.PROBE_TIMEOUT,
      },
    ],
  };
}

function dialing(
  phase: Extract<CallPhase, { phase: 'dialing' }>,
  input: CallInput,
  world: CallWorld,
): CallStep {
  switch (input.type) {
    case 'worker-dialed':
      return openWorker(phase, world);
    case 'dial-failed': {
      const decision = decide('dialFailure', world.state, {
        call: phase.facts.call,
        workerId: phase.placed.workerId,
        error: input.error,
        caches: world.caches,
      });
      return {
        phase: { phase: 'placing', facts: phase.facts, decision },
        effects: [
          {
            type: 'dial-failed',
            workerId: phase.placed.workerId,
            error: input.error,
            attempts: decision.attempts,
          },
          { type: 'record-decision', decision },
        ],
      };
    }
    case 'client-message':
      return { phase: { ...phase, held: [...phase.held, input.message] }, effects: NOTHING };
    case 'client-ended':
      return { phase: { ...phase, clientEnded: true }, effects: NOTHING };
    case 'client-gone':
      return complete(
        asRelaying(phase),
        goneEnding(input, world, phase.facts.clientDeadline),
        world,
        {
          clientGone: true,
        },
      );
    default:
      return { phase, effects: NOTHING };
  }
}

/** A dialing call as the relaying one it becomes (nothing bound, no pin created yet). */
function asRelaying(
  phase: Extract<CallPhase, { phase: 'dialing' }>,
): Extract<CallPhase, { phase: 'relaying' }> {
  return {
    phase: 'relaying',
    facts: phase.facts,
    placed: phase.placed,
    ids: phase.ids,
    bound: false,
    createdPin: false,
  };
}

/**
 * The worker is reachable: open its stream with the header, tell the client of skipped packages,
 * pass on what the client sent meanwhile, and let it go on.
 */
function openWorker(phase: Extract<CallPhase, { phase: 'dialing' }>, world: CallWorld): CallStep {
  const { facts, placed: decision, ids } = phase;
  const worker = world.state.workers.get(decision.workerId);
  const effects: CallEffect[] = [
    {
      type: 'open-worker',
      workerId: decision.workerId,
      address: worker?.address ?? '',
      deadline: Math.min(world.now + world.settings.EXECUTION_TIMEOUT, facts.clientDeadline),
      header: callHeaderOf(
        ids,
        facts.config,
        facts.call.demand,
        decision,
        facts.call.tenantId ?? null,
      ),
    },
  ];
  for (const entry of decision.skippedPackages) {
    const line = skippedPackageLine(entry, worker?.flavor ?? 'these');
    effects.push({
      type: 'to-client',
      answer: { kind: 'message', message: { ids, message: { $case: 'log', value: line } } },
    });
  }
  let next: CallStep = { phase: asRelaying(phase), effects };
  for (const message of phase.held) {
    const step = relaying(
      next.phase as Extract<CallPhase, { phase: 'relaying' }>,
      { type: 'client-message', message },
      world,
    );
    next = { phase: step.phase, effects: [...next.effects, ...step.effects] };
    if (next.phase.phase !== 'relaying') return next;
  }
  if (phase.clientEnded) {
    next = { phase: next.phase, effects: [...next.effects, { type: 'half-close-worker' }] };
  }
  return { phase: next.phase, effects: [...next.effects, { type: 'resume-client' }] };
}

function relaying(
  phase: Extract<CallPhase, { phase: 'relaying' }>,
  input: CallInput,
  world: CallWorld,
): CallStep {
  switch (input.type) {
    case 'client-message': {
      let chunk: Extract<ClientMessage, { kind: 'chunk' }>;
      try {
        chunk = payloadChunkOf(input.message);
      } catch (error) {
        const problem = (error as Error).message;
        // The payload never completed, so the function never started.
        return prefixed(
          { type: 'malformed', problem },
          complete(
            phase,
            { code: 'INVALID_ARGUMENT', details: problem, trailers: NOT_STARTED },
            world,
          ),
        );
      }
      return { phase, effects: [{ type: 'send-chunk', wire: chunk.wire, bytes: chunk.bytes }] };
    }
    case 'client-ended':
      return { phase, effects: [{ type: 'half-close-worker' }] };
    case 'client-gone':
      return complete(phase, goneEnding(input, world, phase.facts.clientDeadline), world, {
        clientGone: true,
      });
    case 'worker-drained':
      return { phase, effects: [{ type: 'resume-client' }] };
    case 'worker-answer':
      return answered(phase, input.answer, world);
    case 'worker-ended':
      return complete(
        phase,
        workerEnding(phase.placed.workerId, input.code, input.details, input.trailers),
        world,
      );
    default:
      return { phase, effects: NOTHING };
  }
}

/** Step 5: an answer; the first one naming the container binds the call. */
function answered(
  phase: Extract<CallPhase, { phase: 'relaying' }>,
  answer: WorkerAnswer,
  world: CallWorld,
): CallStep {
  const ids = answerIds(phase.ids, answer.ids);
  const relay: CallEffect = { type: 'to-client', answer: { kind: 'relayed', ids, answer } };
  if (phase.bound || ids.containerId === '') return { phase, effects: [relay] };
  const { requestId, sessionId } = phase.facts.call;
  const decision = decide('answer', world.state, {
    requestId,
    sessionId,
    placed: phase.placed,
    ids,
  });
  const createdPin = decision.events.some((event) => event.type === 'SessionPinned');
  const reused = phase.placed.containerId;
  return {
    phase: { ...phase, ids, bound: true, createdPin },
    effects: [
      { type: 'record', decision, failure: 'could not record the container of the call' },
      {
        type: 'bound',
        ids,
        createdPin,
        expected: reused !== null && reused !== ids.containerId ? reused : null,
      },
      relay,
    ],
  };
}

/**
 * Ends a placed call: `CallFinished` (and its consequences) exactly once, the worker stream
 * cancelled if still open, the turn released, and the client told (unless it left). A session's
 * new pin must survive a router crash before the client, told OK, relies on it.
 */
function complete(
  phase: Extract<CallPhase, { phase: 'relaying' }>,
  ending: CallEnding,
  world: CallWorld,
  how: { clientGone?: boolean } = {},
): CallStep {
  const { code, details } = ending;
  const { requestId } = phase.facts.call;
  const effects: CallEffect[] = [
    {
      type: 'record',
      decision: decide('end', world.state, {
        requestId,
        code,
        message: code === null ? null : details,
        raised: ending.raised ?? null,
        inputsRaised: ending.inputsRaised ?? null,
      }),
      failure: 'could not record the end of the call',
    },
    { type: 'cancel-worker' },
    { type: 'release-turn' },
    { type: 'unregister', requestId },
    {
      type: 'finished',
      code,
      details,
      raised: ending.raised ?? null,
      ids: phase.ids,
      createdPin: phase.createdPin,
      placed: phase.placed,
    },
  ];
  if (!how.clientGone) {
    effects.push(
      code === null
        ? { type: 'end-client', afterCommit: phase.createdPin, trailers: answerTrailers(phase.ids) }
        : {
            type: 'fail-client',
            code,
            details,
            trailers: answerTrailers(phase.ids, undefined, ending.trailers ?? NO_TRAILERS),
          },
    );
  }
  return { phase: { phase: 'done' }, effects };
}

/** Ends a call that was never placed (or given up while waiting): no `CallFinished`. */
function refuse(
  phase:
    | Extract<CallPhase, { phase: 'awaiting-config' }>
    | { readonly phase: 'waiting-turn' | 'placing' | 'queued'; readonly facts: CallFacts },
  error: unknown,
  how: {
    clientGone?: boolean;
    code?: GrpcCodeName;
    trailers?: readonly TrailerEntry[];
    foreign?: ForeignId;
  } = {},
): CallStep {
  const waited = phase.phase === 'waiting-turn';
  const status = statusOf(error);
  const code = how.code ?? status.code;
  const effects: CallEffect[] = [];
  if (waited) effects.push({ type: 'leave-line' });
  if (phase.phase !== 'awaiting-config') {
    effects.push(
      { type: 'release-turn' },
      { type: 'unregister', requestId: phase.facts.call.requestId },
    );
  }
  effects.push({
    type: 'refused',
    error,
    code,
    details: status.details,
    waited,
    ...(how.foreign === undefined ? {} : { foreign: how.foreign }),
  });
  // Never placed: the user's function never started, and the client may retry it as it is.
  if (!how.clientGone) {
    const trailers =
      how.trailers ??
      answerTrailers(
        phase.phase === 'awaiting-config' ? {} : { requestId: phase.facts.call.requestId },
        undefined,
        NOT_STARTED,
      );
    effects.push({ type: 'fail-client', code, details: status.details, trailers });
  }
  return { phase: { phase: 'done' }, effects };
}

/** The router stops: a placed call ends `UNAVAILABLE`; one not placed yet is refused so. */
function shutDown(phase: CallPhase, reason: string, world: CallWorld): CallStep {
  switch (phase.phase) {
    case 'relaying':
      return complete(phase, { code: 'UNAVAILABLE', details: reason }, world);
    case 'dialing':
      return complete(asRelaying(phase), { code: 'UNAVAILABLE', details: reason }, world);
    case 'done':
      return { phase, effects: NOTHING };
    default:
      return refuse(phase, new CallAbandonedError(reason), { code: 'UNAVAILABLE' });
  }
}

/** `step` with `effects` performed before its own. */
function prefixed(...parts: [...CallEffect[], CallStep]): CallStep {
  const step = parts.at(-1) as CallStep;
  return { phase: step.phase, effects: [...(parts.slice(0, -1) as CallEffect[]), ...step.effects] };
}

/** How a call whose client is gone ends: as the router ended it, else as the client left. */
function goneEnding(
  input: Extract<CallInput, { type: 'client-gone' }>,
  world: CallWorld,
  clientDeadline: number,
): CallEnding {
  return input.ending ?? departureOf(world.now, clientDeadline);
}
