"""A map's finished calls turned into its outputs: in input order (held until those before them
are done) or as they complete; shared by the sync and the async map."""

from __future__ import annotations

import time
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple

from readie._map_slots import Slot
from readie._progress import ProgressBar

Outcome = Tuple[Optional[BaseException], Any]


class Outputs:
    """The outputs handed out so far, and those finished early waiting for their turn."""

    def __init__(self, in_order: bool) -> None:
        self.in_order = in_order
        #: How many outputs were handed out (or taken out of order).
        self.handed = 0
        self._ready: Dict[int, Outcome] = {}

    @property
    def waiting(self) -> bool:
        """Whether finished calls wait for earlier inputs to finish."""
        return bool(self._ready)

    def settle(
        self, done: Iterable[Any], pending: Dict[Any, Tuple[int, Slot]], free: Deque[Slot], bar: ProgressBar
    ) -> List[Outcome]:
        """Takes the finished calls (futures or tasks) out of ``pending``, frees their slots, and
        returns the outcomes to hand out now, in order."""
        outcomes: List[Tuple[int, Outcome]] = []
        for call in done:
            index, slot = pending.pop(call)
            slot.idle_since = time.monotonic()
            free.append(slot)
            error = call.exception()
            bar.advance(failed=error is not None)
            outcomes.append((index, (error, None if error is not None else call.result())))
        if not self.in_order:
            self.handed += len(outcomes)
            return [outcome for _, outcome in outcomes]
        self._ready.update(outcomes)
        handed: List[Outcome] = []
        while self.handed in self._ready:
            handed.append(self._ready.pop(self.handed))
            self.handed += 1
        return handed

    def hand_out(
        self,
        done: Iterable[Any],
        pending: Dict[Any, Tuple[int, Slot]],
        free: Deque[Slot],
        bar: ProgressBar,
        return_exceptions: bool,
    ) -> Iterator[Any]:
        """:meth:`settle`, then each outcome as the map gives it: a value, an input's error when
        ``return_exceptions``, else that error raised."""
        for error, value in self.settle(done, pending, free, bar):
            if error is None:
                yield value
            elif return_exceptions:
                yield error
            else:
                raise error
