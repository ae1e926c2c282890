"""Sessions: calls made inside ``with readie.Session()`` share one container and its Python state."""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any, List, Optional

from readie._ids import CallInfo, new_session_id

_current: "ContextVar[Optional[Session]]" = ContextVar("readie_session", default=None)


class Session:
    """A series of calls that run one after another in the same container, so module-level state
    set by one call is there for the next. ``with`` (or ``async with``) makes it the session of
    every call made in that thread or task (and tasks it starts); nested sessions shadow outer ones.

    The session has no server-side lifetime of its own: the router pins its container on the first
    call and the worker keeps it while it is used; an idle container is reaped after the cluster's
    EXECUTOR_TTL, after which a call raises :class:`readie.SessionExpiredError`. Pass an existing
    ``session_id`` to resume a session from another process.
    """

    def __init__(self, session_id: Optional[str] = None) -> None:
        self.id: str = session_id or new_session_id()
        #: IDs of the most recent call made in this session (worker, container, checkpoint).
        self.last_call: Optional[CallInfo] = None
        self._tokens: List[Token] = []

    def __enter__(self) -> "Session":
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _current.reset(self._tokens.pop())

    async def __aenter__(self) -> "Session":
        return self.__enter__()

    async def __aexit__(self, *exc_info: Any) -> None:
        self.__exit__(*exc_info)

    def __repr__(self) -> str:
        return f"Session({self.id!r})"


def current_session() -> Optional[Session]:
    """The session calls in this context belong to, if any."""
    return _current.get()
