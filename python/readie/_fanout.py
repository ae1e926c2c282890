"""Fan-out: ``fn.map``, ``fn.starmap`` (and their ``.aio``) and ``fn.spawn``.

A map runs as many calls at once as the cluster lets this tenant (``TenantService.Slots`` for
the function's budget, at most ``max_concurrency``). Each concurrency slot is a session of its
own, so its inputs run one after another in one container (warm), and every session is ended
when the map ends (``TenantService.EndSession``: its container is destroyed at once);
``isolate_inputs=True`` makes every input a call outside any session (a fresh container each).
Inputs are drawn lazily: at most one per slot ahead of the results handed out when outputs come
as they complete, two per slot when they come in order. Refusals for lack of room are waited out
(``readie._retry``); the first failed input raises (its index in the message and in
``input_index``), or comes back in place with ``return_exceptions=True``.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from concurrent.futures import CancelledError as FutureCancelledError
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Deque,
    Dict,
    Generic,
    Iterable,
    Iterator,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
)

import grpc

from readie._call import run, run_async
from readie._connection import ConnectionSettings, current_settings
from readie._progress import REDRAW_EVERY, ProgressBar, wants_progress
from readie._retry import backoff, may_retry_ran, needs_new_session, waits_for_room
from readie._session import Session
from readie._tenant import end_session, end_session_async, usable_slots, usable_slots_async
from readie.errors import CallCancelledError, ReadieError, SessionExpiredError

if TYPE_CHECKING:
    from readie._remote import RemoteFunction

R = TypeVar("R")

#: The most calls a map keeps in flight when ``max_concurrency`` does not say (threads are cheap,
#: not free).
MAX_DEFAULT_CONCURRENCY = 256
#: Calls in flight when the router cannot say how many slots the tenant has (an older router).
CONCURRENCY_WHEN_UNKNOWN = 4
#: How long a stopping map waits for its cancelled calls to end (seconds).
CANCEL_GRACE = 10.0
#: A slot with no input to run for this long gives its container back (seconds); at once when the
#: inputs are exhausted. An idle session container holds a slot that another input, of this map or
#: another, may be waiting for: two maps that each hold idle containers while waiting for room
#: would otherwise wait for each other.
IDLE_RELEASE = 1.0

Input = Tuple[tuple, dict]


@dataclass(frozen=True)
class MapOptions:
    """A map's options, validated."""

    order_outputs: bool = True
    return_exceptions: bool = False
    max_concurrency: Optional[int] = None
    isolate_inputs: bool = False
    progress: Optional[bool] = None
    retries: int = 0

    @staticmethod
    def build(**options: Any) -> "MapOptions":
        """Checks the options a user passed (``TypeError``/``ValueError`` for bad ones)."""
        built = MapOptions(**options)
        limit = built.max_concurrency
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_concurrency must be a positive integer or None, not {limit!r}")
        if isinstance(built.retries, bool) or not isinstance(built.retries, int) or built.retries < 0:
            raise ValueError(f"retries must be a non-negative integer, not {built.retries!r}")
        return built


class _Slot:
    """One concurrency slot: its session (``None``: calls outside sessions), the call it runs
    now (so another thread can cancel it), and the sessions it left behind (to end them)."""

    def __init__(self, session: Optional[Session], *, renewable: bool = True) -> None:
        self.session = session
        self.renewable = renewable
        self.sessions: List[Session] = [session] if session is not None else []
        self._lock = threading.Lock()
        self._call: Any = None
        self._stopped = False
        #: When it last finished an input (monotonic seconds).
        self.idle_since = time.monotonic()

    def renew(self) -> None:
        """Moves to a new session (the old one's container is gone, or may be)."""
        if self.session is not None and self.renewable:
            self.session = Session()
            self.sessions.append(self.session)

    @property
    def holds_container(self) -> bool:
        """Whether its session may hold a container now (a call ran in it, and it was not ended)."""
        return self.session is not None and self.session.used and not self.session.closed

    def release(self, now: float, exhausted: bool) -> Optional[Session]:
        """Gives its session up (to be ended) when it idled long enough (or no input is left), and
        moves to a new one for its next input."""
        if not self.holds_container or not self.renewable:
            return None
        if not exhausted and now - self.idle_since < IDLE_RELEASE:
            return None
        released = self.session
        self.renew()
        return released

    def set_call(self, call: Any) -> None:
        with self._lock:
            self._call = call
            stopped = self._stopped
        if call is not None and stopped:
            call.cancel()

    def cancel(self) -> None:
        """Cancels the call running now (and any it starts from here on)."""
        with self._lock:
            self._stopped = True
            call = self._call
        if call is not None:
            call.cancel()


class _Stopped(Exception):
    """The map (or spawn) was stopped: its call was cancelled on purpose."""


def _indexed(error: BaseException, index: Optional[int]) -> BaseException:
    """``error`` naming the map input it failed for."""
    if index is None:
        return error
    if isinstance(error, ReadieError):
        if error.input_index is None:
            error.input_index = index
            if error.args:
                error.args = (f"input {index}: {error.args[0]}",) + tuple(error.args[1:])
    elif hasattr(error, "add_note"):
        error.add_note(f"readie: raised for input {index} of the map")
    return error


def _run_input(
    fn: "RemoteFunction[Any]",
    index: Optional[int],
    call: Input,
    slot: _Slot,
    retries: int,
    stop: threading.Event,
) -> Any:
    """Runs one input to its end on this thread: refusals for lack of room waited out and retried,
    a call that ran retried only ``retries`` times."""
    args, kwargs = call
    refusals = unavailable = ran_failures = 0
    while True:
        if stop.is_set():
            raise _Stopped()
        prepared = fn._prepare(args, kwargs, session=slot.session)
        try:
            return run(prepared, on_call=slot.set_call)
        except ReadieError as error:
            if stop.is_set():
                raise _Stopped() from None
            if isinstance(error, SessionExpiredError) and error.not_started and slot.renewable:
                slot.renew()
                continue
            if waits_for_room(error, unavailable):
                if error.code == grpc.StatusCode.UNAVAILABLE:
                    unavailable += 1
                stop.wait(backoff(refusals, error.retry_after))
                refusals += 1
                continue
            if needs_new_session(error):
                slot.renew()
            if ran_failures < retries and may_retry_ran(error):
                ran_failures += 1
                continue
            raise _indexed(error, index) from None
        except _Stopped:
            raise
        except Exception as error:  # a payload that does not pickle, an unreadable result
            raise _indexed(error, index)
        finally:
            slot.set_call(None)


async def _run_input_async(
    fn: "RemoteFunction[Any]",
    index: Optional[int],
    call: Input,
    slot: _Slot,
    retries: int,
) -> Any:
    """:func:`_run_input` on the running loop; cancelling the task cancels the call."""
    args, kwargs = call
    refusals = unavailable = ran_failures = 0
    while True:
        prepared = fn._prepare(args, kwargs, session=slot.session)
        try:
            return await run_async(prepared)
        except ReadieError as error:
            if isinstance(error, SessionExpiredError) and error.not_started and slot.renewable:
                slot.renew()
                continue
            if waits_for_room(error, unavailable):
                if error.code == grpc.StatusCode.UNAVAILABLE:
                    unavailable += 1
                await asyncio.sleep(backoff(refusals, error.retry_after))
                refusals += 1
                continue
            if needs_new_session(error):
                slot.renew()
            if ran_failures < retries and may_retry_ran(error):
                ran_failures += 1
                continue
            raise _indexed(error, index) from None
        except Exception as error:  # a payload that does not pickle, an unreadable result
            raise _indexed(error, index)


def _bounded(slots: Optional[int], options: MapOptions, total: Optional[int]) -> int:
    if slots is None:
        wanted = options.max_concurrency or CONCURRENCY_WHEN_UNKNOWN
    else:
        wanted = max(1, slots)
        wanted = min(wanted, options.max_concurrency or MAX_DEFAULT_CONCURRENCY)
    if total is not None:
        wanted = min(wanted, max(1, total))
    return max(1, wanted)


def concurrency(
    settings: ConnectionSettings, fn: "RemoteFunction[Any]", options: MapOptions, total: Optional[int]
) -> int:
    """Calls in flight for a map: the tenant's usable slots for the function's budget, at most
    ``max_concurrency`` (else at most ``MAX_DEFAULT_CONCURRENCY``) and the number of inputs."""
    try:
        slots: Optional[int] = usable_slots(settings, fn.options.demand)
    except ReadieError:
        slots = None
    return _bounded(slots, options, total)


async def concurrency_async(
    settings: ConnectionSettings, fn: "RemoteFunction[Any]", options: MapOptions, total: Optional[int]
) -> int:
    """:func:`concurrency` on the running loop."""
    try:
        slots: Optional[int] = await usable_slots_async(settings, fn.options.demand)
    except ReadieError:
        slots = None
    return _bounded(slots, options, total)


def _new_slots(count: int, options: MapOptions) -> List[_Slot]:
    return [_Slot(None if options.isolate_inputs else Session()) for _ in range(count)]


def _label(fn: "RemoteFunction[Any]") -> str:
    return f"readie map {getattr(fn, '__qualname__', 'function')}"


def _stopped_message(fn: "RemoteFunction[Any]", completed: int, total: Optional[int], cancelled: int) -> str:
    of = f" of {total}" if total is not None else ""
    return (
        f"the map of {getattr(fn, '__qualname__', 'function')} was stopped: {completed}{of} inputs "
        f"completed, {cancelled} calls in flight cancelled"
    )


def _end_sessions(settings: ConnectionSettings, slots: Iterable[_Slot]) -> None:
    sessions = [s for slot in slots for s in slot.sessions if s.used and not s.closed]
    if not sessions:
        return
    with ThreadPoolExecutor(max_workers=min(32, len(sessions)), thread_name_prefix="readie-end") as ends:
        for session in sessions:
            ends.submit(_end_quietly, settings, session)


def _end_quietly(settings: ConnectionSettings, session: Session) -> None:
    try:
        session.closed = True
        end_session(settings, session.id)
    except ReadieError:
        pass  # the worker destroys an idle container after EXECUTOR_TTL anyway


async def _end_sessions_async(settings: ConnectionSettings, slots: Iterable[_Slot]) -> None:
    sessions = [s for slot in slots for s in slot.sessions if s.used and not s.closed]
    await asyncio.gather(*(_end_quietly_async(settings, session) for session in sessions))


async def _end_quietly_async(settings: ConnectionSettings, session: Session) -> None:
    try:
        session.closed = True
        await end_session_async(settings, session.id)
    except ReadieError:
        pass


def run_map(
    fn: "RemoteFunction[R]", inputs: Iterator[Input], total: Optional[int], options: MapOptions
) -> Iterator[Union[R, BaseException]]:
    """The results of ``fn`` over ``inputs`` (a generator: nothing runs until it is iterated)."""
    settings = current_settings()
    count = concurrency(settings, fn, options, total)
    slots = _new_slots(count, options)
    free: Deque[_Slot] = deque(slots)
    window = count * (2 if options.order_outputs else 1)
    pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="readie-map")
    ends = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readie-end")
    stop = threading.Event()
    pending: Dict[Future, Tuple[int, _Slot]] = {}
    ready: Dict[int, Tuple[Optional[BaseException], Any]] = {}
    bar = ProgressBar(_label(fn), total, enabled=wants_progress(options.progress))
    drawn = handed = 0
    exhausted = False
    try:
        while True:
            while free and not exhausted and drawn - handed < window:
                try:
                    item = next(inputs)
                except StopIteration:
                    exhausted = True
                    break
                slot = free.popleft()
                future = pool.submit(_run_input, fn, drawn, item, slot, options.retries, stop)
                pending[future] = (drawn, slot)
                drawn += 1
            # A slot with nothing to do gives its container back at once: idle, it would hold a
            # slot that another input (of this map or another) may be waiting for.
            now = time.monotonic()
            for slot in free:
                released = slot.release(now, exhausted)
                if released is not None:
                    ends.submit(_end_quietly, settings, released)
            if not pending and exhausted and not ready:
                return
            done, _ = wait(list(pending), timeout=REDRAW_EVERY, return_when=FIRST_COMPLETED)
            bar.draw()
            outcomes: List[Tuple[int, Tuple[Optional[BaseException], Any]]] = []
            for future in done:
                index, slot = pending.pop(future)
                slot.idle_since = time.monotonic()
                free.append(slot)
                error = future.exception()
                bar.advance(failed=error is not None)
                outcomes.append((index, (error, None if error is not None else future.result())))
            if options.order_outputs:
                ready.update(outcomes)
                outcomes = []
                while handed in ready:
                    outcomes.append((handed, ready.pop(handed)))
                    handed += 1
            else:
                handed += len(outcomes)
            for _, (error, value) in outcomes:
                if error is None:
                    yield value
                elif options.return_exceptions:
                    yield error
                else:
                    raise error
    except KeyboardInterrupt:
        cancelled = _stop_all(pending, stop)
        bar.close()
        message = _stopped_message(fn, bar.done, total, cancelled)
        sys.stderr.write(f"[readie] {message}\n")
        ends.shutdown(wait=True)
        _end_sessions(settings, slots)
        pool.shutdown(wait=False)
        raise KeyboardInterrupt(message) from None
    finally:
        if not stop.is_set():
            _stop_all(pending, stop)
            bar.close()
            ends.shutdown(wait=True)
            _end_sessions(settings, slots)
            pool.shutdown(wait=False)


def _stop_all(pending: Dict[Future, Tuple[int, _Slot]], stop: threading.Event) -> int:
    """Cancels every call in flight and waits (a while) for their threads to see it."""
    stop.set()
    cancelled = 0
    for future, (_, slot) in pending.items():
        if not future.done():
            cancelled += 1
        if not future.cancel():
            slot.cancel()
    wait(list(pending), timeout=CANCEL_GRACE)
    pending.clear()
    return cancelled


async def _draw(inputs: Union[Iterator[Input], AsyncIterator[Input]]) -> Tuple[bool, Any]:
    if hasattr(inputs, "__anext__"):
        try:
            return True, await inputs.__anext__()  # type: ignore[union-attr]
        except StopAsyncIteration:
            return False, None
    try:
        return True, next(inputs)  # type: ignore[arg-type]
    except StopIteration:
        return False, None


async def run_map_async(
    fn: "RemoteFunction[R]",
    inputs: Union[Iterator[Input], AsyncIterator[Input]],
    total: Optional[int],
    options: MapOptions,
) -> AsyncIterator[Union[R, BaseException]]:
    """:func:`run_map` on the running loop: ``async for result in fn.map.aio(...)``."""
    settings = current_settings()
    count = await concurrency_async(settings, fn, options, total)
    slots = _new_slots(count, options)
    free: Deque[_Slot] = deque(slots)
    window = count * (2 if options.order_outputs else 1)
    pending: Dict["asyncio.Task[Any]", Tuple[int, _Slot]] = {}
    ready: Dict[int, Tuple[Optional[BaseException], Any]] = {}
    bar = ProgressBar(_label(fn), total, enabled=wants_progress(options.progress))
    drawn = handed = 0
    exhausted = False
    completed_normally = False
    ending: "set[asyncio.Future[None]]" = set()
    try:
        while True:
            while free and not exhausted and drawn - handed < window:
                more, item = await _draw(inputs)
                if not more:
                    exhausted = True
                    break
                slot = free.popleft()
                task = asyncio.ensure_future(_run_input_async(fn, drawn, item, slot, options.retries))
                pending[task] = (drawn, slot)
                drawn += 1
            now = time.monotonic()
            for slot in free:  # idle: its container goes back (see IDLE_RELEASE)
                released = slot.release(now, exhausted)
                if released is not None:
                    ending.add(asyncio.ensure_future(_end_quietly_async(settings, released)))
            if not pending and exhausted and not ready:
                completed_normally = True
                return
            done, _ = await asyncio.wait(list(pending), timeout=REDRAW_EVERY, return_when=asyncio.FIRST_COMPLETED)
            bar.draw()
            outcomes: List[Tuple[int, Tuple[Optional[BaseException], Any]]] = []
            for task in done:
                index, slot = pending.pop(task)
                slot.idle_since = time.monotonic()
                free.append(slot)
                error = task.exception()
                bar.advance(failed=error is not None)
                outcomes.append((index, (error, None if error is not None else task.result())))
            if options.order_outputs:
                ready.update(outcomes)
                outcomes = []
                while handed in ready:
                    outcomes.append((handed, ready.pop(handed)))
                    handed += 1
            else:
                handed += len(outcomes)
            for _, (error, value) in outcomes:
                if error is None:
                    yield value
                elif options.return_exceptions:
                    yield error
                else:
                    raise error
    finally:
        cancelled = sum(1 for task in pending if not task.done())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        bar.close()
        if not completed_normally and cancelled:
            sys.stderr.write(f"[readie] {_stopped_message(fn, bar.done, total, cancelled)}\n")
        if ending:
            await asyncio.gather(*ending, return_exceptions=True)
        await _end_sessions_async(settings, slots)


# Spawned calls run on a shared pool of threads (created on first use).
_spawn_pool: Optional[ThreadPoolExecutor] = None
_spawn_lock = threading.Lock()
#: Spawned calls that run at once; more wait their turn in the pool.
MAX_SPAWNED_IN_FLIGHT = 64


def _spawner() -> ThreadPoolExecutor:
    global _spawn_pool
    with _spawn_lock:
        if _spawn_pool is None:
            _spawn_pool = ThreadPoolExecutor(
                max_workers=MAX_SPAWNED_IN_FLIGHT, thread_name_prefix="readie-spawn"
            )
        return _spawn_pool


class FunctionCall(Generic[R]):
    """A call started with ``fn.spawn(...)``, running in the background: ``get()`` waits for its
    result (or raises its error), ``cancel()`` cancels it on the cluster, ``done()`` says whether
    it ended. Refusals for lack of room are waited out, as in a map. A call spawned inside a
    ``Session`` runs in that session."""

    def __init__(self, fn: "RemoteFunction[R]", args: tuple, kwargs: dict, session: Optional[Session]) -> None:
        self._slot = _Slot(session, renewable=False)
        self._stop = threading.Event()
        self._future: "Future[R]" = _spawner().submit(
            _run_input, fn, None, (args, kwargs), self._slot, 0, self._stop
        )

    def get(self, timeout: Optional[float] = None) -> R:
        """The result, waiting at most ``timeout`` seconds (``None``: as long as it takes); raises
        ``TimeoutError`` when it is not done by then (the call goes on), the call's error if it
        failed, and ``CallCancelledError`` if it was cancelled."""
        try:
            return self._future.result(timeout)
        except FutureTimeoutError:
            raise TimeoutError(f"the spawned call is not done after {timeout} s (it goes on)") from None
        except (FutureCancelledError, _Stopped):
            raise CallCancelledError("the spawned call was cancelled (FunctionCall.cancel)") from None

    def cancel(self) -> bool:
        """Cancels the call: on the cluster if it runs, before it starts if it waits. True unless
        it had ended already."""
        if self._future.done():
            return False
        self._stop.set()
        if not self._future.cancel():
            self._slot.cancel()
        return True

    def done(self) -> bool:
        """Whether the call ended (with a result, an error, or cancelled)."""
        return self._future.done()

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"<readie.FunctionCall {state}>"


def gather(*calls: FunctionCall[Any], return_exceptions: bool = False) -> List[Any]:
    """The results of spawned calls, in the order given; the first error raises unless
    ``return_exceptions``, which puts it in place."""
    results: List[Any] = []
    for call in calls:
        try:
            results.append(call.get())
        except Exception as error:  # noqa: BLE001 - returned in place when asked
            if not return_exceptions:
                raise
            results.append(error)
    return results
