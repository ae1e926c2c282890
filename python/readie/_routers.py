"""A client's list of router addresses (``READIE_ADDRESS=a:50051,b:50051``): which router the next
call goes to, and where a call refused before it was sent moves (the TypeScript client's
``router-list.ts``, the same rules).

A standby's refusal (UNAVAILABLE, ``readie-not-started: 1``, ``readie-standby: 1``) names the
leader in ``readie-leader``: the call moves there when that address is in the list (no router can
send a client elsewhere), else to the next address. A router that cannot be reached at all
(nothing listens, the name does not resolve, no connection was made) is left for the next address
the same way, until every address was found unreachable. After each full pass over the list the
client waits (a failover leaves no leader for up to ``LEADER_LEASE``). A call that may have started
(any other failure) never moves: its error is the caller's. The router that served last, or was
named leader, is where the next call of the same list starts."""

from __future__ import annotations

import random
import threading
from typing import Dict, Optional, Sequence, Tuple

import grpc

from readie._error_hints import transport_problem_of
from readie._retry import backoff
from readie.errors import ReadieError

#: How many moves between routers one call makes at most before its last refusal is raised.
MAX_ROUTER_MOVES = 24
#: A call moves only while at least this much of its timeout is left after the wait (seconds): a
#: try the deadline cuts short would end DEADLINE_EXCEEDED and hide why the call was refused.
MOVE_MARGIN = 0.5

_preferred: Dict[Tuple[str, ...], str] = {}
_lock = threading.Lock()


def preferred(routers: Sequence[str]) -> str:
    """The router a new call of this list goes to (the first, until one was named or served)."""
    key = tuple(routers)
    with _lock:
        return _preferred.get(key, key[0])


def unsent_refusal(error: BaseException) -> Optional[str]:
    """``"standby"`` for a standby's refusal, ``"unreachable"`` for a router that could not be
    reached, ``None`` for every other failure (the call may have started)."""
    if not isinstance(error, ReadieError) or error.code != grpc.StatusCode.UNAVAILABLE:
        return None
    if error.not_started and (error.standby or error.leader is not None):
        return "standby"
    details = error.details or ""
    if transport_problem_of(details) in ("refused", "unresolved"):
        return "unreachable"
    return "unreachable" if "no connection established" in details.lower() else None


def move_from(routers: Sequence[str], current: str, leader: Optional[str]) -> str:
    """Where a call refused unsent at ``current`` goes next; later calls of the list start there."""
    at = list(routers).index(current) if current in routers else -1
    named = list(routers).index(leader) if leader in routers else -1
    index = named if named >= 0 and named != at else (at + 1) % len(routers)
    chosen = routers[index]
    with _lock:
        _preferred[tuple(routers)] = chosen
    return chosen


def wait_before(routers: Sequence[str], move: int, rng: Optional[random.Random] = None) -> float:
    """Seconds to wait before move ``move`` (from 0): none while the pass has addresses left."""
    count = len(routers)
    if (move + 1) % count != 0:
        return 0.0
    return backoff((move + 1) // count + 2, rng=rng)


class RouterMoves:
    """One call's walk along the list: ``next`` says where its next try goes, or ``None``."""

    def __init__(self, routers: Sequence[str], deadline: Optional[float]) -> None:
        self.routers = tuple(routers)
        self.deadline = deadline
        self.moves = 0
        self.unreachable: set = set()

    def next(self, error: BaseException, current: str, now: float) -> Optional[Tuple[str, float]]:
        """The address and the wait (seconds) of the next try after ``error`` at ``current``."""
        refusal = unsent_refusal(error)
        if refusal == "unreachable":
            self.unreachable.add(current)
        if refusal is None or self.moves >= MAX_ROUTER_MOVES:
            return None
        if len(self.unreachable) >= len(self.routers):
            return None
        wait = wait_before(self.routers, self.moves)
        if self.deadline is not None and now + wait + MOVE_MARGIN >= self.deadline:
            return None
        self.moves += 1
        leader = error.leader if isinstance(error, ReadieError) else None
        return move_from(self.routers, current, leader), wait
