"""The engine under ``fn.map`` and ``fn.starmap``, on an asyncio loop (the caller's for
``map.aio``, readie's own for the blocking map): inputs go to the cluster in batches, one call
carrying many inputs, and each input's outcome comes back as it finishes (docs/clients.md).

Each concurrency slot is a session of its own (one warm container) running one batch after
another. A batch's size adapts to the inputs' measured time (:class:`BatchSizer`): small inputs
batch, a slow input goes alone; ``chunk_size`` fixes it. Per input, everything keeps its meaning:
its own outcome and error (``input N: ``), ``retries``, the progress bar, and the order of the
results. A batch refused before it started for lack of room is waited out (its inputs run
later); a batch that ran and failed (its container killed, its worker gone) fails the inputs it
had not finished, each retried while ``retries`` allows."""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Deque, Dict, List, Optional, Set, Tuple

import grpc

from readie._batch import MAX_BATCH_INPUTS, OutcomeReader, pack_function, pack_inputs
from readie._call import failure_of, rpc_of
from readie._connection import ConnectionSettings, aio_channel_for
from readie._envelope import decode_cloudpickle
from readie._ids import CallInfo, new_request_id
from readie._map_input import indexed
from readie._map_options import MapOptions, bounded, room_for
from readie._progress import ProgressBar
from readie._retry import backoff, may_retry_ran, needs_new_session, waits_for_room
from readie._routers import RouterMoves
from readie._session import Session
from readie._tenant import end_session_async, map_room_async
from readie._wire import build_config, function_name, request_messages
from readie.errors import NeverFitsError, ProtocolError, ReadieError, SessionExpiredError, ShedError

#: A batch aims at this much work (seconds) per input run at once: a slot's share of a map whose
#: inputs take the same time goes in one batch when it is no more (a call more costs the slot
#: 10-30 ms between its batches on a busy cluster).
TARGET_BATCH_SECONDS = 2.0
#: What an input costs beside its function (pickling, framing), in seconds, for the estimate.
INPUT_OVERHEAD_SECONDS = 20e-6
#: ... and, sharing out the last inputs, at least this much (seconds per input at once).
MIN_BATCH_SECONDS = 0.05
#: A slot's batches hold at most this share of an even split of the inputs not finished: batches
#: shrink as the map nears its end (the first ones take half the work, the next a quarter, ...),
#: so slots that opened late or ran slowly are not left with the last long batch while the others
#: idle ...
SHARE_PER_SLOT = 0.5
#: ... but the whole split when the inputs take the same time (their middle half within
#: UNIFORM_SPREAD of the median): then nothing is left to even out, and every batch more is a call
#: more on the cluster.
SHARE_PER_SLOT_UNIFORM = 1.0
UNIFORM_SPREAD = 0.25
#: A slot's next batch is at most this many times its last.
GROWTH = 32
#: A slot sends its next batch while one runs (it waits for its session's turn at the router)
#: only when a batch takes less than this (seconds): a session call waits SESSION_WAIT_TIMEOUT at
#: most for its turn.
PIPELINE_SECONDS = 10.0
#: Slots a map opens before it knows its inputs' time; then as many as the work left needs.
INITIAL_SLOTS = 4
#: A slot (a container) is opened only for at least this much work (seconds of its inputs).
SLOT_WORK_SECONDS = 0.1
#: An input's time is the median of this many recent ones.
RECENT_SAMPLES = 64
#: Inputs measured before a batch grows on their time (one fast first input is no promise).
SAMPLES_TO_GROW = 4
#: Slots beyond INITIAL_SLOTS open only once this many inputs were measured (the first input of
#: each of them) ...
SAMPLES_TO_OPEN_SLOTS = INITIAL_SLOTS
#: ... and ran warm (not first in a new container), unless every input took at least this long
#: (seconds): then waiting for warm ones would cost more than opening on the first ones.
WARM_WAIT_SECONDS = 0.02
#: While a map runs it asks the router again, this often (seconds), how much room it has and
#: whether other tenants' calls wait (:func:`readie._tenant.map_room`) ...
ROOM_REFRESH = 1.0
#: ... and this often while its work wants more slots than the room it was told (containers that
#: were given back a moment ago count as free once their workers report them gone).
ROOM_REFRESH_WANTING = 0.2
#: A slot with no input to run for this long gives its container back (seconds); at once when the
#: inputs are exhausted. Idle, its session container would hold a slot another input (of this map
#: or another) may be waiting for: two maps could otherwise wait for each other.
IDLE_RELEASE = 1.0

Output = Tuple[int, Optional[BaseException], Any]
#: Inputs' times in a function (seconds): the recent ones, and the recent ones that ran warm.
InputTimes = Tuple[Tuple[float, ...], Tuple[float, ...]]


@dataclass
class Item:
    """One input: its index in the map, its arguments, and the failures it ran into so far."""

    index: int
    args: tuple
    kwargs: dict
    ran_failures: int = 0


class BatchSizer:
    """How many inputs a slot's next batch carries: about TARGET_BATCH_SECONDS of work per input
    run at once, by the inputs' measured time (the median of the recent ones); a slot's first
    batch ``max_inputs`` (one, by default) until an input was measured; at most GROWTH times the
    slot's last batch (and SAMPLES_TO_GROW times ``max_inputs`` before that many inputs were
    measured); when the total is known, no more than SHARE_PER_SLOT (or SHARE_PER_SLOT_UNIFORM) of
    an even split of the inputs not finished among the map's slots, less what the slot holds
    already (unless that is less than MIN_BATCH_SECONDS of work: then none while the slot holds
    some)."""

    def __init__(self, chunk_size: Optional[int], parallel: int, earlier: Optional[InputTimes] = None) -> None:
        """``earlier``: the inputs' times an earlier map of the function measured (:meth:`times`),
        which this one starts from until it measured an input of its own (then only its own
        count: the inputs may not be the earlier map's)."""
        self.fixed = chunk_size
        self.parallel = max(1, parallel)
        self.largest = 1
        #: The recent inputs' times.
        self._recent: Deque[float] = deque(maxlen=RECENT_SAMPLES)
        #: ... and those that ran warm (not the first in a new container), recently.
        self._warm: Deque[float] = deque(maxlen=RECENT_SAMPLES)
        #: The least time measured.
        self._least: Optional[float] = None
        #: Inputs measured by this map (not counting those ``earlier`` held).
        self.measured = 0
        #: Whether the times held are an earlier map's (until this one measures one).
        self._earlier = False
        if earlier is not None and earlier[0]:
            recent, warm = earlier
            self._recent.extend(recent)
            self._warm.extend(warm)
            self._least = min(self._recent)
            self._earlier = True

    def times(self) -> InputTimes:
        """The recent inputs' times and those that ran warm, for a later map to start from."""
        return tuple(self._recent), tuple(self._warm)

    def observe(self, seconds: float, warm: bool = True) -> None:
        """One more input's time in the function; ``warm``: it did not run first in a new
        container (whose first input pays what the function warms up: imports, caches)."""
        seconds = max(0.0, seconds)
        if self._earlier:
            self._earlier = False
            self._recent.clear()
            self._warm.clear()
            self._least = None
        self.measured += 1
        self._recent.append(seconds)
        if warm:
            self._warm.append(seconds)
        self._least = seconds if self._least is None else min(self._least, seconds)

    @property
    def estimate(self) -> Optional[float]:
        """An input's time in the function: the median of the last RECENT_SAMPLES (an input that
        warmed something up, the first one say, does not make the others look slow)."""
        if not self._recent:
            return None
        ordered = sorted(self._recent)
        return ordered[len(ordered) // 2]

    @property
    def uniform(self) -> bool:
        """Whether the recent inputs took the same time (SAMPLES_TO_GROW of them at least)."""
        if len(self._recent) < SAMPLES_TO_GROW:
            return False
        ordered = sorted(self._recent)
        count = len(ordered)
        spread = ordered[(3 * count) // 4] - ordered[count // 4]
        return spread <= UNIFORM_SPREAD * ordered[count // 2]

    @property
    def slot_estimate(self) -> Optional[float]:
        """An input's time for deciding how many slots (containers) a map opens: the median of the
        recent warm inputs once SAMPLES_TO_OPEN_SLOTS ran warm; before that, once that many were
        measured, the estimate only when no input took less than WARM_WAIT_SECONDS; else None
        (the slot count is not known yet). A map's
        first inputs each run first in a new container, where a function's first call may take a
        hundred times its later ones (numpy's first ``linalg`` call: 0.6-2 ms, then 0.01-0.1):
        their median would open containers the work never needs, and waiting for an input to run
        warm costs less than a container when inputs are that small."""
        if len(self._warm) >= SAMPLES_TO_OPEN_SLOTS:
            ordered = sorted(self._warm)
            return ordered[len(ordered) // 2]
        if len(self._recent) < SAMPLES_TO_OPEN_SLOTS or self._least is None or self._least < WARM_WAIT_SECONDS:
            return None
        return self.estimate

    def next(self, last: int, remaining: Optional[int], slots: int, pending: float = 0, own: float = 0) -> int:
        """The next batch's size for a slot whose last batch had ``last`` inputs, when
        ``remaining`` inputs are not given to any slot yet (None: not known), among ``slots``
        slots, ``pending`` inputs are given to slots and not finished, ``own`` of them this
        slot's (both less what the inputs running now have done, in inputs)."""
        estimate = self.estimate
        if self.fixed is not None:
            size = self.fixed
        elif estimate is None:
            # Before any input was measured: as many as run at once.
            size = self.parallel
        else:
            per_input = estimate + INPUT_OVERHEAD_SECONDS
            size = int(TARGET_BATCH_SECONDS * self.parallel / per_input)
            size = min(size, max(last, self.parallel) * GROWTH)
            if self.measured < SAMPLES_TO_GROW:
                # Neither one fast first input nor an earlier map's times promise that these
                # inputs are fast: a few of them are measured before a batch grows on it.
                size = min(size, self.parallel * SAMPLES_TO_GROW)
            if remaining is not None:
                # A part of an even share of what is not finished, less what this slot has not
                # finished yet, so that slots end together (a slot that opened first, or sends its
                # next batch while one runs, takes no more than the others); but never a batch too
                # small to be worth its call.
                floor = max(self.parallel, int(MIN_BATCH_SECONDS * self.parallel / per_input))
                part = SHARE_PER_SLOT_UNIFORM if self.uniform else SHARE_PER_SLOT
                share = math.floor(part * (remaining + pending) / max(1, slots) - own + 0.5)
                if own > 0 and share < floor:
                    # The slot holds its share already (or all but less than a batch worth its
                    # call): its next batch waits until it ran some.
                    return 0
                size = min(size, max(floor, share))
        if remaining is not None and remaining > 0:
            size = min(size, remaining)
        size = max(1, min(size, MAX_BATCH_INPUTS))
        self.largest = max(self.largest, size)
        return size


@dataclass
class Slot:
    """One concurrency slot: its session (None: every input in a fresh container), the sessions
    it used, its last batch's size, and its refusals in a row."""

    session: Optional[Session]
    sessions: List[Session] = field(default_factory=list)
    last_size: int = 0
    refusals: int = 0
    unavailable: int = 0
    #: Calls of this slot on the cluster now (two while its next batch waits for its turn).
    in_flight: int = 0
    #: Batches of this slot under way (their calls and the waits between their tries).
    running: int = 0
    #: Inputs given to this slot's batches that have no outcome yet.
    pending: int = 0
    #: When the inputs it runs now started, as far as the client knows (time.monotonic()): its
    #: last outcome, or when it was given a batch with none pending.
    since: float = 0.0

    def renew(self, failed: Optional[Session] = None) -> None:
        """Moves to a new session; given the session a failed call used, only if the slot is
        still on it (its other batch, failing the same way, renewed it already)."""
        if self.session is not None and (failed is None or failed is self.session):
            self.session = Session()
            self.sessions.append(self.session)


class MapEngine:
    """One map's batches, slots and outputs on the running loop. ``outputs()`` gives lists of
    ``(index, error, value)`` in the order the map hands them out; the consumer calls ``ack(n)``
    once it took ``n`` of them (inputs are drawn at most a window ahead of what was taken)."""

    def __init__(self, fn: Any, inputs: Any, total: Optional[int], options: MapOptions, settings: ConnectionSettings, count: int, bar: ProgressBar, others_waiting: bool = False) -> None:
        self.fn = fn
        self.options = options
        self.settings = settings
        self.total = total
        self.count = count
        self.bar = bar
        self.max_inputs = max(1, getattr(fn.options, "max_inputs", 1))
        # A later map of the function starts from the inputs' times the last one measured: it opens
        # the slots its work wants at once, where a first map measures its first inputs first.
        self.sizer = BatchSizer(
            1 if options.isolate_inputs else options.chunk_size,
            self.max_inputs,
            fn._input_times,
        )
        self.slots: List[Slot] = []
        self._inputs = inputs
        self._async_inputs = hasattr(inputs, "__anext__")
        self._draw_lock = asyncio.Lock()
        self._queue: Deque[Item] = deque()
        self._drawn = 0
        self._exhausted = False
        self.handed = 0
        self.completed = 0
        self._ready: Dict[int, Tuple[Optional[BaseException], Any]] = {}
        #: The slot of each input given to a batch that has no outcome yet.
        self._owners: Dict[int, Slot] = {}
        self._emitted = 0
        self._outbox: List[Output] = []
        self._changed = asyncio.Event()
        self._tasks: List["asyncio.Task[None]"] = []
        self._ending: Set["asyncio.Future[Any]"] = set()
        self._function_part: Optional[bytes] = None
        self._routers = RouterMoves(settings.addresses(), None)
        self.stopped = False
        #: A call of this function that can never fit (its budget is above every worker's):
        #: every input left gets this outcome without a call of its own.
        self._never_fits: Optional[NeverFitsError] = None
        #: This map's calls waiting in the router's admission queue now.
        self.queued_batches = 0
        #: Whether other tenants' calls waited in the router's queue when it was last asked.
        self.others_waiting = others_waiting
        self._room_watch: Optional["asyncio.Task[None]"] = None
        #: Set when the work may want more slots than the room: the room watch looks again.
        self._room_wanted = asyncio.Event()
        #: Set once the map knows its inputs (:meth:`_knows_inputs`): a slot may then send its next
        #: batch while one runs (:meth:`_depth`) without waiting for the end of the one before.
        self._grown = asyncio.Event()

    # -- the consumer's side -------------------------------------------------------------------

    async def outputs(self) -> AsyncIterator[List[Output]]:
        """Lists of outputs as they can be handed out, until every input has one."""
        self._open_slots()
        self._room_watch = asyncio.ensure_future(self._watch_room())
        try:
            async for out in self._outputs():
                yield out
        finally:
            self._room_watch.cancel()
            if self.sizer.measured > 0:
                self.fn._input_times = self.sizer.times()

    async def _outputs(self) -> AsyncIterator[List[Output]]:
        while True:
            if self._outbox:
                out, self._outbox = self._outbox, []
                yield out
                continue
            if all(task.done() for task in self._tasks) and not self._outbox:
                for task in self._tasks:
                    if not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                return
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=0.1)
            except asyncio.TimeoutError:
                pass
            self.bar.draw()

    def ack(self, taken: int) -> None:
        """The consumer took ``taken`` outputs: inputs may be drawn that much further."""
        self.handed += taken
        self._changed.set()

    async def stop(self) -> int:
        """Cancels every batch in flight (on the cluster too) and ends the map's sessions; the
        number of calls it cancelled."""
        self.stopped = True
        if self._room_watch is not None:
            self._room_watch.cancel()
        cancelled = sum(slot.in_flight for slot in self.slots)
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.end_sessions()
        return cancelled

    async def end_sessions(self) -> None:
        """Ends every session the map used and has not ended yet (their containers go at once)."""
        sessions = [s for slot in self.slots for s in slot.sessions if s.used and not s.closed]
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)
        await asyncio.gather(*(self._end(session) for session in sessions), return_exceptions=True)

    async def _end(self, session: Session) -> None:
        if session.closed:
            return
        session.closed = True
        try:
            await end_session_async(self.settings, session.id)
        except ReadieError:
            pass  # the worker destroys an idle container after EXECUTOR_TTL anyway

    def _release(self, slot: Slot) -> None:
        """Gives the slot's container back now (its session ended), and moves it to a new one."""
        session = slot.session
        if session is None or not session.used or session.closed or slot.running:
            return
        self._ending.add(asyncio.ensure_future(self._end(session)))
        slot.renew()

    # -- slots ---------------------------------------------------------------------------------

    async def _watch_room(self) -> None:
        """Asks the router every ROOM_REFRESH how much room the map has: room freed since its start
        lets it open more slots (within its bounds), and other tenants' calls waiting make its
        slots give their containers back between batches."""
        demand = self.fn.options.demand
        asked = time.monotonic()
        while not self.stopped:
            # Looked at again whenever the work wants more slots than the room (its first inputs
            # measured slow, say), not only after a full ROOM_REFRESH decided before it did.
            wanting = self.count < self._wanted_slots(unbounded=True)
            wait = (ROOM_REFRESH_WANTING if wanting else ROOM_REFRESH) - (time.monotonic() - asked)
            if wait > 0:
                self._room_wanted.clear()
                try:
                    await asyncio.wait_for(self._room_wanted.wait(), timeout=wait)
                except asyncio.TimeoutError:
                    pass
                continue
            asked = time.monotonic()
            try:
                room = await map_room_async(self.settings, demand)
            except ReadieError:
                continue
            self.others_waiting = room.others_waiting
            held = len(self.slots) if not self.options.isolate_inputs else self._in_flight()
            count = bounded(held + (room_for(room, self.options) or 0), self.options, self.total)
            if count > self.count:
                self.count = count
                self._open_slots()

    def _in_flight(self) -> int:
        return sum(slot.in_flight for slot in self.slots)

    def _wanted_slots(self, unbounded: bool = False) -> int:
        """How many slots the work needs: INITIAL_SLOTS until SAMPLES_TO_OPEN_SLOTS inputs were
        measured (and, for small inputs, ran warm: :attr:`BatchSizer.slot_estimate`), then one per
        SLOT_WORK_SECONDS of the work left (all of them when the total is unknown); never more than
        ``count``, the cluster's room."""
        estimate = self.sizer.slot_estimate
        if estimate is None:
            wanted = INITIAL_SLOTS
        else:
            remaining = self._remaining()
            if remaining is None:
                return self.count
            per_input = estimate + INPUT_OVERHEAD_SECONDS
            wanted = math.ceil(remaining * per_input / self.max_inputs / SLOT_WORK_SECONDS)
        if self.total is not None:
            wanted = min(wanted, self.total)
        return max(1, wanted if unbounded else min(self.count, wanted))

    def _open_slots(self) -> None:
        """Opens slots (each a session, a container) up to what the work needs."""
        if self.stopped:
            return
        wanted = self._wanted_slots()
        while len(self.slots) < wanted:
            slot = Slot(None if self.options.isolate_inputs else Session())
            if slot.session is not None:
                slot.sessions.append(slot.session)
            self.slots.append(slot)
            task = asyncio.ensure_future(self._run_slot(slot))
            # The outputs' loop looks again once a slot is done (the map may be).
            task.add_done_callback(lambda _: self._changed.set())
            self._tasks.append(task)

    # -- outputs -------------------------------------------------------------------------------

    def _deliver(self, index: int, error: Optional[BaseException], value: Any) -> None:
        self.completed += 1
        owner = self._owners.pop(index, None)
        if owner is not None:
            owner.pending -= 1
            owner.since = time.monotonic()
        self.bar.advance(failed=error is not None)
        if not self.options.order_outputs:
            self._outbox.append((index, error, value))
        else:
            self._ready[index] = (error, value)
            while self._emitted in self._ready:
                error_, value_ = self._ready.pop(self._emitted)
                self._outbox.append((self._emitted, error_, value_))
                self._emitted += 1
        self._changed.set()

    # -- drawing inputs ------------------------------------------------------------------------

    @property
    def _window(self) -> int:
        return 2 * self.count * self.sizer.largest

    async def _take(self, wanted: int) -> List[Item]:
        """Draws inputs until ``wanted`` wait or the window is full, and takes up to ``wanted`` of
        them for a batch (one slot at a time: what one draws, another cannot take first). A batch
        the full window would cut short waits instead (none is taken) while outputs the consumer
        can take, or batches in flight, will open the window: so a slow consumer does not split
        the map into smaller batches than it sized (nor a ``chunk_size`` into odd ones)."""
        async with self._draw_lock:
            while len(self._queue) < wanted and not self._exhausted and self._drawn - self.handed < self._window:
                try:
                    if self._async_inputs:
                        args, kwargs = await self._inputs.__anext__()
                    else:
                        args, kwargs = next(self._inputs)
                except (StopIteration, StopAsyncIteration):
                    self._exhausted = True
                    break
                self._queue.append(Item(self._drawn, args, kwargs))
                self._drawn += 1
            if len(self._queue) < wanted and not self._exhausted and self._window_opens():
                return []
            return [self._queue.popleft() for _ in range(min(wanted, len(self._queue)))]

    def _window_opens(self) -> bool:
        """Whether the window of inputs drawn ahead will open without a new batch: outputs wait
        that the consumer can take (in order, when the map orders them), or batches are in flight
        (their outputs come). Else a short batch goes: waiting could wait forever."""
        released = self._emitted if self.options.order_outputs else self.completed
        return released > self.handed or self._in_flight() > 0

    def _remaining(self) -> Optional[int]:
        if self.total is None:
            return None if not self._exhausted else len(self._queue)
        return max(0, self.total - self._drawn) + len(self._queue)

    async def _next_batch(self, slot: Slot) -> Optional[List[Item]]:
        idle_since = time.monotonic()
        while not self.stopped:
            # What is left is shared among the slots the work wants (before the inputs' time is
            # known, among as many as the room allows: a first fast input must not hand one slot
            # the share of the few opened so far).
            wanted = self._wanted_slots() if self.sizer.slot_estimate is not None else self.count
            slots = max(len(self.slots), wanted)
            now = time.monotonic()
            estimate = self.sizer.estimate
            unfinished = len(self._owners) - sum(self._done_of(other, now, estimate) for other in self.slots)
            own = slot.pending - self._done_of(slot, now, estimate)
            size = self.sizer.next(slot.last_size, self._remaining(), slots, unfinished, own)
            # None now (0): the slot holds its share already, and takes more once it ran some.
            batch = await self._take(size) if size > 0 else []
            if batch:
                if slot.pending == 0:
                    slot.since = now
                slot.last_size = len(batch)
                slot.pending += len(batch)
                for item in batch:
                    self._owners[item.index] = slot
                return batch
            if self._exhausted and (size > 0 or not self._queue):
                return None
            # Nothing to run now (the results wait for an earlier input, or the inputs come
            # slowly): after IDLE_RELEASE the slot's container goes back.
            if time.monotonic() - idle_since >= IDLE_RELEASE:
                self._release(slot)
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=0.1)
            except asyncio.TimeoutError:
                pass
        return None

    def _done_of(self, slot: Slot, now: float, estimate: Optional[float]) -> float:
        """What the inputs ``slot`` runs now have done, in inputs: their time so far over the
        inputs' time (``estimate``). Shares count it: a slot whose input ended a moment ago would
        otherwise hold a whole input less than one whose input is about to end, and take one more."""
        if slot.pending == 0 or not estimate:
            return 0.0
        return min(self.max_inputs, slot.pending) * min(1.0, (now - slot.since) / estimate)

    # -- running batches -----------------------------------------------------------------------

    def _queued(self, change: int) -> None:
        """Inputs of this map that wait in the router's admission queue changed by ``change``."""
        self.queued_batches += 1 if change > 0 else -1
        self.bar.queued += change
        self.bar.draw()

    async def _run_slot(self, slot: Slot) -> None:
        under_way: Deque["asyncio.Task[None]"] = deque()
        try:
            while True:
                if len(under_way) >= self._depth(slot):
                    if not self._grown.is_set():
                        # The next batch may go before this one ends once enough inputs were
                        # measured: the slot looks again then.
                        grown = asyncio.ensure_future(self._grown.wait())
                        try:
                            await asyncio.wait({under_way[0], grown}, return_when=asyncio.FIRST_COMPLETED)
                        finally:
                            grown.cancel()
                        if not under_way[0].done():
                            continue
                    await under_way.popleft()
                    if self.queued_batches > 0 or self.others_waiting:
                        # Calls wait in the router's queue (this map's or other tenants'): an
                        # idle container kept for this slot's session would hold a slot they
                        # wait for.
                        self._release(slot)
                    self._open_slots()
                    continue
                batch = await self._next_batch(slot)
                if batch is None:
                    break
                under_way.append(asyncio.ensure_future(self._run_batch(slot, batch)))
            while under_way:
                await under_way.popleft()
        finally:
            # Stopped: the batches still under way are cancelled with the slot.
            for task in under_way:
                task.cancel()
            if under_way:
                await asyncio.gather(*under_way, return_exceptions=True)
        # No input left for this slot: its container goes back at once.
        self._release(slot)

    def _depth(self, slot: Slot) -> int:
        """How many of the slot's batches may be on the cluster at once: two (the next one waits
        for its session's turn at the router, which starts it the moment the one before ends,
        where the client would take a round trip to send it) when the slot keeps a session, the
        map has opened the slots its work wants, no other calls wait for room and a batch is known
        to take under PIPELINE_SECONDS; else one."""
        estimate = self.sizer.estimate
        if slot.session is None or self.queued_batches > 0 or self.others_waiting or estimate is None:
            return 1
        if not self._knows_inputs() or len(self.slots) < self._wanted_slots():
            # Slots are still opening: a batch taken now is sized by too few slots (a share of
            # what is left among them), and a second one would hold inputs the new slots could run.
            return 1
        batch_seconds = (estimate + INPUT_OVERHEAD_SECONDS) * max(1, slot.last_size) / self.max_inputs
        return 2 if batch_seconds < PIPELINE_SECONDS else 1

    def _knows_inputs(self) -> bool:
        """Whether the map knows its inputs well enough for a slot to have two batches on the
        cluster (:meth:`_depth`): the slots its work wants are known, and it measured
        SAMPLES_TO_GROW inputs itself (a map that starts from an earlier one's times sends no
        second batch before: those times may not be its inputs', and a slot would hold twice what
        they sized before it knew)."""
        return self.sizer.measured >= SAMPLES_TO_GROW and self.sizer.slot_estimate is not None

    async def _run_batch(self, slot: Slot, items: List[Item]) -> None:
        slot.running += 1
        try:
            await self._run_batch_tries(slot, items)
        finally:
            slot.running -= 1

    async def _run_batch_tries(self, slot: Slot, items: List[Item]) -> None:
        retry_of = ""
        while items and not self.stopped:
            failure = await self._attempt(slot, items, retry_of)
            if failure is None:
                return
            error, unfinished, request_id, session = failure
            items, wait = self._after(slot, error, unfinished, session)
            if isinstance(error, ShedError):
                # Every try of a pinned batch names the first: it keeps the version that resolved.
                retry_of = retry_of or request_id
            if items and wait > 0:
                await asyncio.sleep(wait)

    def _after(self, slot: Slot, error: ReadieError, unfinished: List[Item], session: Optional[Session]) -> Tuple[List[Item], float]:
        """What a batch's failure (its call made in ``session``) means for the inputs it had not
        finished: those to try again, and how long to wait first."""
        moved = self._routers.next(error, self.settings.address, time.monotonic())
        if moved is not None:
            self.settings = self.settings.at(moved[0])
            return unfinished, moved[1]
        if isinstance(error, SessionExpiredError) and error.not_started and slot.session is not None:
            slot.renew(session)
            return unfinished, 0.0
        if waits_for_room(error, slot.unavailable):
            if error.code == grpc.StatusCode.UNAVAILABLE:
                slot.unavailable += 1
            wait = backoff(slot.refusals, error.retry_after)
            slot.refusals += 1
            return unfinished, wait
        if needs_new_session(error):
            slot.renew(session)
        if isinstance(error, NeverFitsError):
            self._never_fits = error
        again = []
        for item in unfinished:
            if item.ran_failures < self.options.retries and may_retry_ran(error):
                item.ran_failures += 1
                again.append(item)
            else:
                self._deliver(item.index, indexed(_copy_error(error), item.index), None)
        return again, 0.0

    async def _attempt(self, slot: Slot, items: List[Item], retry_of: str) -> Optional[Tuple[ReadieError, List[Item], str, Optional[Session]]]:
        """One call carrying ``items``; None when every input got its outcome, else the error,
        the inputs still without one, the call's request ID and the session it was made in."""
        if self._never_fits is not None:
            # The same budget never fits for any input: none is sent again.
            for item in items:
                self._deliver(item.index, indexed(_copy_error(self._never_fits), item.index), None)
            return None
        fn = self.fn._fn
        if self._function_part is None:
            self._function_part = pack_function(fn)
        parts = pack_inputs(fn, [(item.args, item.kwargs) for item in items])
        sent: List[Item] = []
        for item, part in zip(items, parts):
            if isinstance(part, BaseException):
                self._deliver(item.index, indexed(part, item.index), None)
            else:
                sent.append(item)
        if not sent:
            return None
        payload = b"".join([self._function_part] + [part for part in parts if not isinstance(part, BaseException)])
        session = slot.session
        # The first inputs of a new session's first call run first in a new container.
        fresh = session is not None and not session.used
        if session is not None:
            session.used = True
        config = build_config(
            new_request_id(),
            self.fn.options.demand,
            self.fn.import_hints(),
            session_id=session.id if session is not None else "",
            retry_of=retry_of,
            function=function_name(self.fn._fn),
        )
        config.inputs = len(sent)
        if self.max_inputs > 1:
            config.max_inputs = self.max_inputs
        info = CallInfo(request_id=config.request_id, session_id=config.session_id, retry_of=retry_of)
        reader = OutcomeReader(len(sent))
        on_log = self.fn._log_sink()
        timeout = self.fn.options.timeout
        settings = self.settings
        call = rpc_of(await aio_channel_for(settings))(
            request_messages(config, payload),
            metadata=settings.metadata(),
            timeout=None if timeout is None else timeout * math.ceil(len(sent) / self.max_inputs),
        )
        slot.in_flight += 1
        waiting = False
        try:
            async for answer in call:
                if answer.HasField("ids"):
                    info = info.updated(answer.ids)
                kind = answer.WhichOneof("message")
                if kind == "queue" and answer.queue.queued != waiting:
                    # The batch waits in the router's admission queue (or was just admitted).
                    waiting = answer.queue.queued
                    self._queued(len(sent) if waiting else -len(sent))
                elif kind == "chunk":
                    for outcome in reader.feed(answer.chunk.data):
                        item = sent[outcome.index]
                        self.sizer.observe(outcome.seconds, warm=not fresh or outcome.index >= self.max_inputs)
                        if not self._grown.is_set() and self._knows_inputs():
                            # Slots waiting for their batch to end may send their next one now.
                            self._grown.set()
                        try:
                            value = decode_cloudpickle(outcome.data, call=info)
                        except BaseException as error:  # noqa: BLE001 - the input's own error
                            self._deliver(item.index, indexed(error, item.index), None)
                        else:
                            self._deliver(item.index, None, value)
                    # The inputs' time is known better now: more slots may be worth opening.
                    if len(self.slots) < self.count:
                        self._open_slots()
                    else:
                        self._room_wanted.set()
                elif kind == "log" and on_log is not None:
                    on_log(answer.log)
        except grpc.aio.AioRpcError as error:
            failure = failure_of(error, settings, info.with_trailers(_trailers(error)))
            self.fn._finished(info)
            return failure, [item for i, item in enumerate(sent) if not reader.answered(i)], config.request_id, session
        except asyncio.CancelledError:
            call.cancel()
            raise
        except ProtocolError as error:
            call.cancel()
            error.call = info
            for i, item in enumerate(sent):
                if not reader.answered(i):
                    self._deliver(item.index, indexed(_copy_error(error), item.index), None)
            return None
        finally:
            slot.in_flight -= 1
            if waiting:
                self._queued(-len(sent))
        self.fn._finished(info)
        slot.refusals = 0
        slot.unavailable = 0
        missing = [item for i, item in enumerate(sent) if not reader.answered(i)]
        for item in missing:
            error = ProtocolError("the cluster ended the batch without this input's outcome", call=info)
            self._deliver(item.index, indexed(error, item.index), None)
        return None


def _trailers(error: Any) -> Any:
    try:
        return error.trailing_metadata()
    except Exception:  # noqa: BLE001
        return None


def _copy_error(error: BaseException) -> BaseException:
    """A copy of a batch's error for one of its inputs (each names its own index)."""
    clone = type(error).__new__(type(error))
    clone.__dict__.update(error.__dict__)
    clone.args = error.args
    return clone
