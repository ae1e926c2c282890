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

    The router pins its container on the first call. :meth:`close` (``await aclose()``) ends the
    session on the cluster: the container is destroyed at once and later calls in the session
    raise :class:`readie.SessionExpiredError`. Leaving a ``with`` block closes a session this
    object created; one resumed by passing an existing ``session_id`` (from another process) is
    closed only by ``close()``. A session never closed is reaped once its container has idled for
    the cluster's EXECUTOR_TTL.
    """

    def __init__(self, session_id: Optional[str] = None) -> None:
        self.id: str = session_id or new_session_id()
        #: IDs of the most recent call made in this session (worker, container, checkpoint).
        self.last_call: Optional[CallInfo] = None
        #: True once a call was made in this session from here (so there may be a container).
        self.used = False
        #: True once :meth:`close` ended it.
        self.closed = False
        self._created = session_id is None
        self._tokens: List[Token] = []

    def close(self) -> bool:
        """Ends the session on the cluster now (its container is destroyed); True when this ended
        it, False when it had ended already or never ran a call. Idempotent."""
        from readie._connection import current_settings
        from readie._tenant import end_session

        if self.closed:
            return False
        self.closed = True
        return end_session(current_settings(), self.id).ended

    async def aclose(self) -> bool:
        """:meth:`close` on the running event loop."""
        from readie._connection import current_settings
        from readie._tenant import end_session_async

        if self.closed:
            return False
        self.closed = True
        return (await end_session_async(current_settings(), self.id)).ended

    def __enter__(self) -> "Session":
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _current.reset(self._tokens.pop())
        if self._created and self.used and not self._tokens:
            self._close_quietly()

    def _close_quietly(self) -> None:
        # Best effort: a block's own error must not be masked, and an older router may not offer
        # the end (the container then idles out as before).
        from readie.errors import ReadieError

        try:
            self.close()
        except ReadieError:
            pass

    async def __aenter__(self) -> "Session":
        self._tokens.append(_current.set(self))
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        _current.reset(self._tokens.pop())
        if self._created and self.used and not self._tokens:
            from readie.errors import ReadieError

            try:
                await self.aclose()
            except ReadieError:
                pass

    def __repr__(self) -> str:
        return f"Session({self.id!r})"


def current_session() -> Optional[Session]:
    """The session calls in this context belong to, if any."""
    return _current.get()
