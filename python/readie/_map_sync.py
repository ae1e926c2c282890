"""``fn.map`` and ``fn.starmap``: a generator of results. The map's batches run on readie's own
event loop (:mod:`readie._loop`, one thread for every map and call of the process, not one per
call); results come back to the caller's thread as they can be handed out.

Inputs are drawn lazily, at most two batches per slot ahead of the results handed out. The first
failed input raises (its index in the message and in ``input_index``), or comes back in place
with ``return_exceptions=True``. Ctrl-C cancels the batches in flight (on the workers too) and
ends the map's sessions.
"""

from __future__ import annotations

import queue
import sys
from typing import Any, Iterator, Optional, TypeVar, Union

from readie._connection import current_settings
from readie._loop import in_background, on_loop, readie_loop
from readie._map_engine import MapEngine
from readie._map_input import Input, label, stopped_message
from readie._map_options import MapOptions, concurrency
from readie._map_slots import CANCEL_GRACE
from readie._progress import ProgressBar, wants_progress
from readie._target import RemoteTarget


R = TypeVar("R")


def run_map(
    fn: "RemoteTarget[R]", inputs: Iterator[Input], total: Optional[int], options: MapOptions
) -> Iterator[Union[R, BaseException]]:
    """The results of ``fn`` over ``inputs`` (a generator: nothing runs until it is iterated)."""
    settings = current_settings()
    count, others_waiting = concurrency(settings, fn, options, total)
    bar = ProgressBar(label(fn), total, enabled=wants_progress(options.progress))
    engine = MapEngine(fn, inputs, total, options, settings, count, bar, others_waiting)
    # A queue.Queue, not a SimpleQueue: its wait is Python code, so an interrupt is raised inside
    # it and caught below (CPython 3.11 can raise one at a loop's back edge outside the try).
    handoff: "queue.Queue[Any]" = queue.Queue()

    async def pump() -> None:
        try:
            async for outputs in engine.outputs():
                handoff.put(("outputs", outputs))
            handoff.put(("done", None))
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            handoff.put(("error", error))

    loop = readie_loop()
    on_loop(pump())
    completed = False
    try:
        while True:
            try:
                # With a timeout: an interrupt that wakes no wait (a signal another thread took,
                # ``_thread.interrupt_main``) is seen within it.
                kind, payload = handoff.get(timeout=0.1)
            except queue.Empty:
                continue
            if kind == "done":
                completed = True
                return
            if kind == "error":
                raise payload
            for _index, error, value in payload:
                if error is None:
                    yield value
                elif options.return_exceptions:
                    yield error
                else:
                    raise error
            # Taken, all of them (the caller asks for the next): inputs may be drawn that much
            # further. Not on arrival: a caller that took one of a list of five and stopped took one.
            loop.call_soon_threadsafe(engine.ack, len(payload))
    except KeyboardInterrupt:
        cancelled = _stop(engine)
        bar.close()
        message = stopped_message(fn, engine.completed, total, cancelled)
        sys.stderr.write(f"[readie] {message}\n")
        completed = True  # stopped already
        raise KeyboardInterrupt(message) from None
    finally:
        if not completed:
            _stop(engine)
        else:
            # The map's results are all out: its sessions end in the background (their
            # containers go within a round trip; the process waits for it at exit).
            in_background(engine.end_sessions())
        bar.close()


def _stop(engine: MapEngine) -> int:
    """Stops the map on the loop, waiting (a while) for its batches to be cancelled."""
    try:
        return on_loop(engine.stop()).result(timeout=CANCEL_GRACE)
    except Exception:  # noqa: BLE001 - the map is being abandoned anyway
        return 0
