"""``fn.map.aio`` and ``fn.starmap.aio``: the map's engine (:mod:`readie._map_engine`) on the
running loop, over a plain or an async iterator of inputs; cancelling the iteration cancels the
batches in flight."""

from __future__ import annotations

import sys
from typing import AsyncIterator, Iterator, Optional, TypeVar, Union

from readie._connection import current_settings
from readie._map_engine import MapEngine
from readie._map_input import Input, label, stopped_message
from readie._map_options import MapOptions, concurrency_async
from readie._progress import ProgressBar, wants_progress
from readie._target import RemoteTarget


R = TypeVar("R")


async def run_map_async(
    fn: "RemoteTarget[R]",
    inputs: Union[Iterator[Input], AsyncIterator[Input]],
    total: Optional[int],
    options: MapOptions,
) -> AsyncIterator[Union[R, BaseException]]:
    """The map on the running loop: ``async for result in fn.map.aio(...)``."""
    settings = current_settings()
    count, others_waiting = await concurrency_async(settings, fn, options, total)
    bar = ProgressBar(label(fn), total, enabled=wants_progress(options.progress))
    engine = MapEngine(fn, inputs, total, options, settings, count, bar, others_waiting)
    completed = False
    try:
        async for outputs in engine.outputs():
            for _index, error, value in outputs:
                if error is None:
                    yield value
                elif options.return_exceptions:
                    yield error
                else:
                    raise error
            engine.ack(len(outputs))
        completed = True
    finally:
        if completed:
            await engine.end_sessions()
        else:
            cancelled = await engine.stop()
            if cancelled:
                sys.stderr.write(f"[readie] {stopped_message(fn, engine.completed, total, cancelled)}\n")
        bar.close()
