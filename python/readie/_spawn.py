"""``fn.spawn``: a call running in the background on a shared pool of threads, and ``gather``."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError as FutureCancelledError
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Generic, List, Optional, TypeVar

from readie._map_input import run_input
from readie._map_slots import Slot, Stopped
from readie._session import Session
from readie.errors import CallCancelledError
from readie._target import RemoteTarget


R = TypeVar("R")

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

    def __init__(self, fn: "RemoteTarget[R]", args: tuple, kwargs: dict, session: Optional[Session]) -> None:
        self._slot = Slot(session, renewable=False)
        self._stop = threading.Event()
        self._future: "Future[R]" = _spawner().submit(
            run_input, fn, None, (args, kwargs), self._slot, 0, self._stop
        )

    def get(self, timeout: Optional[float] = None) -> R:
        """The result, waiting at most ``timeout`` seconds (``None``: as long as it takes); raises
        ``TimeoutError`` when it is not done by then (the call goes on), the call's error if it
        failed, and ``CallCancelledError`` if it was cancelled."""
        try:
            return self._future.result(timeout)
        except FutureTimeoutError:
            raise TimeoutError(f"the spawned call is not done after {timeout} s (it goes on)") from None
        except (FutureCancelledError, Stopped):
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
