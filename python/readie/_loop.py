"""readie's own event loop, on a daemon thread: what the synchronous API runs asyncio work on (a
map's batches; the asyncio channel underneath a blocking call), so that neither starts a thread
per call. One per process (a forked child starts its own); at exit it finishes its background
work (a finished map's sessions being ended), its channels are closed and it stops."""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from typing import Any, Coroutine, Optional, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None
_thread: Optional[threading.Thread] = None
_pid = 0


def readie_loop() -> asyncio.AbstractEventLoop:
    """The running background loop (started on first use)."""
    global _loop, _thread, _pid
    with _lock:
        if _loop is not None and _pid == os.getpid() and _thread is not None and _thread.is_alive():
            return _loop
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name="readie-loop", daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread, _pid = loop, thread, os.getpid()
        return loop


def on_loop_thread() -> bool:
    """Whether this is readie's loop thread (where nothing may wait for the loop)."""
    return _thread is not None and threading.current_thread() is _thread


def on_loop(coroutine: Coroutine[Any, Any, T]) -> "asyncio.Future[T]":
    """Schedules ``coroutine`` on the background loop; a concurrent future of its result."""
    return asyncio.run_coroutine_threadsafe(coroutine, readie_loop())  # type: ignore[return-value]


#: Work left to finish in the background (a finished map's sessions being ended): the loop
#: waits for it at exit.
_background: "set[asyncio.Future[Any]]" = set()


def in_background(coroutine: Coroutine[Any, Any, Any]) -> None:
    """Runs ``coroutine`` on the background loop without waiting for it; at exit the process
    waits for it (a while) before the loop stops."""
    future = on_loop(coroutine)
    _background.add(future)
    future.add_done_callback(_background.discard)


def settle_background(timeout: float) -> None:
    """Waits (at most ``timeout`` seconds each) for the background work started so far: a map
    that starts after another counts the slots whose containers that one was giving back."""
    for future in list(_background):
        try:
            future.result(timeout=timeout)
        except Exception:  # noqa: BLE001 - best effort, as the work itself
            pass


@atexit.register
def _stop() -> None:
    loop, thread = _loop, _thread
    if loop is None or thread is None or not thread.is_alive() or _pid != os.getpid():
        return
    from readie._connection import aclose_channels

    settle_background(2)
    try:
        asyncio.run_coroutine_threadsafe(aclose_channels(), loop).result(timeout=2)
    except Exception:  # noqa: BLE001 - best effort at exit
        pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=2)
