"""``fn.map.aio`` and ``fn.starmap.aio``: :func:`readie._map_sync.run_map` on the running loop,
over a plain or an async iterator of inputs; cancelling the iteration cancels the calls."""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from typing import Any, AsyncIterator, Deque, Dict, Iterator, Optional, Tuple, TypeVar, Union

from readie._connection import current_settings
from readie._map_input import Input, label, run_input_async, stopped_message
from readie._map_outputs import Outputs
from readie._map_options import MapOptions, concurrency_async
from readie._map_slots import Slot, end_quietly_async, end_sessions_async, new_slots
from readie._progress import REDRAW_EVERY, ProgressBar, wants_progress
from readie._target import RemoteTarget


R = TypeVar("R")


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
    fn: "RemoteTarget[R]",
    inputs: Union[Iterator[Input], AsyncIterator[Input]],
    total: Optional[int],
    options: MapOptions,
) -> AsyncIterator[Union[R, BaseException]]:
    """:func:`run_map` on the running loop: ``async for result in fn.map.aio(...)``."""
    settings = current_settings()
    count = await concurrency_async(settings, fn, options, total)
    slots = new_slots(count, options)
    free: Deque[Slot] = deque(slots)
    window = count * (2 if options.order_outputs else 1)
    pending: Dict["asyncio.Task[Any]", Tuple[int, Slot]] = {}
    outputs = Outputs(options.order_outputs)
    bar = ProgressBar(label(fn), total, enabled=wants_progress(options.progress))
    drawn = 0
    exhausted = False
    completed_normally = False
    ending: "set[asyncio.Future[None]]" = set()
    try:
        while True:
            while free and not exhausted and drawn - outputs.handed < window:
                more, item = await _draw(inputs)
                if not more:
                    exhausted = True
                    break
                slot = free.popleft()
                task = asyncio.ensure_future(run_input_async(fn, drawn, item, slot, options.retries))
                pending[task] = (drawn, slot)
                drawn += 1
            now = time.monotonic()
            for slot in free:  # idle: its container goes back (see IDLE_RELEASE)
                released = slot.release(now, exhausted)
                if released is not None:
                    ending.add(asyncio.ensure_future(end_quietly_async(settings, released)))
            if not pending and exhausted and not outputs.waiting:
                completed_normally = True
                return
            done, _ = await asyncio.wait(list(pending), timeout=REDRAW_EVERY, return_when=asyncio.FIRST_COMPLETED)
            bar.draw()
            for value in outputs.hand_out(done, pending, free, bar, options.return_exceptions):
                yield value
    finally:
        cancelled = sum(1 for task in pending if not task.done())
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        bar.close()
        if not completed_normally and cancelled:
            sys.stderr.write(f"[readie] {stopped_message(fn, bar.done, total, cancelled)}\n")
        if ending:
            await asyncio.gather(*ending, return_exceptions=True)
        await end_sessions_async(settings, slots)

