"""``fn.map`` and ``fn.starmap``: a generator of results, with calls run on a pool of threads.

Inputs are drawn lazily: at most one per slot ahead of the results handed out when outputs come
as they complete, two per slot when they come in order. The first failed input raises (its index
in the message and in ``input_index``), or comes back in place with ``return_exceptions=True``.
Ctrl-C cancels the calls in flight and ends the map's sessions.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Deque, Dict, Iterator, Optional, Tuple, TypeVar, Union

from readie._connection import current_settings
from readie._map_input import Input, label, run_input, stopped_message
from readie._map_outputs import Outputs
from readie._map_options import MapOptions, concurrency
from readie._map_slots import CANCEL_GRACE, Slot, end_quietly, end_sessions, new_slots
from readie._progress import REDRAW_EVERY, ProgressBar, wants_progress
from readie._target import RemoteTarget


R = TypeVar("R")


def run_map(
    fn: "RemoteTarget[R]", inputs: Iterator[Input], total: Optional[int], options: MapOptions
) -> Iterator[Union[R, BaseException]]:
    """The results of ``fn`` over ``inputs`` (a generator: nothing runs until it is iterated)."""
    settings = current_settings()
    count = concurrency(settings, fn, options, total)
    slots = new_slots(count, options)
    free: Deque[Slot] = deque(slots)
    window = count * (2 if options.order_outputs else 1)
    pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="readie-map")
    ends = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readie-end")
    stop = threading.Event()
    pending: Dict[Future, Tuple[int, Slot]] = {}
    outputs = Outputs(options.order_outputs)
    bar = ProgressBar(label(fn), total, enabled=wants_progress(options.progress))
    drawn = 0
    exhausted = False
    try:
        while True:
            while free and not exhausted and drawn - outputs.handed < window:
                try:
                    item = next(inputs)
                except StopIteration:
                    exhausted = True
                    break
                slot = free.popleft()
                future = pool.submit(run_input, fn, drawn, item, slot, options.retries, stop)
                pending[future] = (drawn, slot)
                drawn += 1
            # A slot with nothing to do gives its container back at once: idle, it would hold a
            # slot that another input (of this map or another) may be waiting for.
            now = time.monotonic()
            for slot in free:
                released = slot.release(now, exhausted)
                if released is not None:
                    ends.submit(end_quietly, settings, released)
            if not pending and exhausted and not outputs.waiting:
                return
            done, _ = wait(list(pending), timeout=REDRAW_EVERY, return_when=FIRST_COMPLETED)
            bar.draw()
            yield from outputs.hand_out(done, pending, free, bar, options.return_exceptions)
    except KeyboardInterrupt:
        cancelled = _stop_all(pending, stop)
        bar.close()
        message = stopped_message(fn, bar.done, total, cancelled)
        sys.stderr.write(f"[readie] {message}\n")
        ends.shutdown(wait=True)
        end_sessions(settings, slots)
        pool.shutdown(wait=False)
        raise KeyboardInterrupt(message) from None
    finally:
        if not stop.is_set():
            _stop_all(pending, stop)
            bar.close()
            ends.shutdown(wait=True)
            end_sessions(settings, slots)
            pool.shutdown(wait=False)


def _stop_all(pending: Dict[Future, Tuple[int, Slot]], stop: threading.Event) -> int:
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

