"""A map's options and how many calls it keeps in flight (``TenantService.Slots`` for the
function's budget, at most ``max_concurrency``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

from readie._batch import batch_size_problem
from readie._connection import ConnectionSettings
from readie._tenant import Room, map_room, map_room_async
from readie.errors import ReadieError
from readie._target import RemoteTarget


#: The most calls a map keeps in flight when ``max_concurrency`` does not say (threads are cheap,
#: not free).
MAX_DEFAULT_CONCURRENCY = 256
#: Calls in flight when the router cannot say how many slots the tenant has (an older router).
CONCURRENCY_WHEN_UNKNOWN = 4


@dataclass(frozen=True)
class MapOptions:
    """A map's options, validated."""

    order_outputs: bool = True
    return_exceptions: bool = False
    max_concurrency: Optional[int] = None
    isolate_inputs: bool = False
    progress: Optional[bool] = None
    retries: int = 0
    #: Inputs per batch (one call carrying them); None: sized by the inputs' measured time.
    chunk_size: Optional[int] = None

    @staticmethod
    def build(**options: Any) -> "MapOptions":
        """Checks the options a user passed (``TypeError``/``ValueError`` for bad ones)."""
        built = MapOptions(**options)
        limit = built.max_concurrency
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"max_concurrency must be a positive integer or None, not {limit!r}")
        if isinstance(built.retries, bool) or not isinstance(built.retries, int) or built.retries < 0:
            raise ValueError(f"retries must be a non-negative integer, not {built.retries!r}")
        problem = batch_size_problem(built.chunk_size)
        if problem is not None:
            raise ValueError(problem)
        return built



def room_for(room: Optional[Room], options: MapOptions) -> Optional[int]:
    """The calls a map may have in flight by the router's answer (None: it could not say). Its
    slots are sessions, each keeping one container across its batches, so a map opens no more of
    them than the free slots: more would only wait for containers that each batch gives back. A
    map of ``isolate_inputs`` (a fresh container per input, none kept) may also fill the router's
    admission queue (``max_queued``), where its calls wait their fair turn."""
    if room is None:
        return None
    return room.slots + (room.queued if options.isolate_inputs else 0)


def bounded(slots: Optional[int], options: MapOptions, total: Optional[int]) -> int:
    if slots is None:
        wanted = options.max_concurrency or CONCURRENCY_WHEN_UNKNOWN
    else:
        wanted = max(1, slots)
        wanted = min(wanted, options.max_concurrency or MAX_DEFAULT_CONCURRENCY)
    if total is not None:
        wanted = min(wanted, max(1, total))
    return max(1, wanted)


def concurrency(
    settings: ConnectionSettings, fn: "RemoteTarget[Any]", options: MapOptions, total: Optional[int]
) -> Tuple[int, bool]:
    """Calls in flight for a map at its start (:func:`room_for` the router's answer), at most
    ``max_concurrency`` (else at most ``MAX_DEFAULT_CONCURRENCY``) and the number of inputs; and
    whether other tenants' calls wait in the router's queue now."""
    try:
        room: Optional[Room] = map_room(settings, fn.options.demand)
    except ReadieError:
        room = None
    return _start(room, options, total)


def _start(room: Optional[Room], options: MapOptions, total: Optional[int]) -> Tuple[int, bool]:
    count = bounded(room_for(room, options), options, total)
    return count, room is not None and room.others_waiting


async def concurrency_async(
    settings: ConnectionSettings, fn: "RemoteTarget[Any]", options: MapOptions, total: Optional[int]
) -> Tuple[int, bool]:
    """:func:`concurrency` on the running loop."""
    try:
        room: Optional[Room] = await map_room_async(settings, fn.options.demand)
    except ReadieError:
        room = None
    return _start(room, options, total)
