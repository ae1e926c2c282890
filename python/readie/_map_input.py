"""One spawned call run to its end: refusals for lack of room waited out (``readie._retry``), a
call that ran retried only ``retries`` times; an error naming the map input it failed for; and
what a stopped map says."""

from __future__ import annotations

import threading
from typing import Any, Optional, Tuple

import grpc

from readie._call import run
from readie._map_slots import Slot, Stopped
from readie._retry import backoff, may_retry_ran, needs_new_session, waits_for_room
from readie.errors import ReadieError, SessionExpiredError
from readie._target import RemoteTarget


Input = Tuple[tuple, dict]


def indexed(error: BaseException, index: Optional[int]) -> BaseException:
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


class Attempts:
    """What one input's failed attempts so far allow next: the retry rule both runners share."""

    def __init__(self, retries: int) -> None:
        self.retries = retries
        self.refusals = 0
        self.unavailable = 0
        self.ran_failures = 0

    def after(self, error: ReadieError, slot: Slot) -> Optional[float]:
        """After ``error``: None to give up, else the seconds to wait before the next attempt (0:
        at once). A session that expired, or that a refusal says is gone, is renewed on ``slot``."""
        if isinstance(error, SessionExpiredError) and error.not_started and slot.renewable:
            slot.renew()
            return 0.0
        if waits_for_room(error, self.unavailable):
            if error.code == grpc.StatusCode.UNAVAILABLE:
                self.unavailable += 1
            delay = backoff(self.refusals, error.retry_after)
            self.refusals += 1
            return delay
        if needs_new_session(error):
            slot.renew()
        if self.ran_failures < self.retries and may_retry_ran(error):
            self.ran_failures += 1
            return 0.0
        return None


def run_input(
    fn: "RemoteTarget[Any]",
    index: Optional[int],
    call: Input,
    slot: Slot,
    retries: int,
    stop: threading.Event,
) -> Any:
    """Runs one input to its end on this thread: refusals for lack of room waited out and retried,
    a call that ran retried only ``retries`` times."""
    args, kwargs = call
    attempts = Attempts(retries)
    while True:
        if stop.is_set():
            raise Stopped()
        prepared = fn._prepare(args, kwargs, session=slot.session)
        try:
            return run(prepared, on_call=slot.set_call)
        except ReadieError as error:
            if stop.is_set():
                raise Stopped() from None
            delay = attempts.after(error, slot)
            if delay is None:
                raise indexed(error, index) from None
            if delay > 0:
                stop.wait(delay)
        except Stopped:
            raise
        except Exception as error:  # a payload that does not pickle, an unreadable result
            raise indexed(error, index)
        finally:
            slot.set_call(None)


def label(fn: "RemoteTarget[Any]") -> str:
    return f"readie map {getattr(fn, '__qualname__', 'function')}"


def stopped_message(fn: "RemoteTarget[Any]", completed: int, total: Optional[int], cancelled: int) -> str:
    of = f" of {total}" if total is not None else ""
    return (
        f"the map of {getattr(fn, '__qualname__', 'function')} was stopped: {completed}{of} inputs "
        f"completed, {cancelled} calls in flight cancelled"
    )

