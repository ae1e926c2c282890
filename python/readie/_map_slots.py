"""A spawned call's slot: its session (or none), the call it runs now (so another thread can
cancel it), and the sessions it used; and how long a stopping map or spawn waits for its calls."""

from __future__ import annotations

import threading
from typing import Any, List, Optional

from readie._session import Session

#: How long a stopping map waits for its cancelled calls to end (seconds).
CANCEL_GRACE = 10.0


class Slot:
    """One call's slot: its session (``None``: calls outside sessions), the call it runs now (so
    another thread can cancel it), and the sessions it left behind."""

    def __init__(self, session: Optional[Session], *, renewable: bool = True) -> None:
        self.session = session
        self.renewable = renewable
        self.sessions: List[Session] = [session] if session is not None else []
        self._lock = threading.Lock()
        self._call: Any = None
        self._stopped = False

    def renew(self) -> None:
        """Moves to a new session (the old one's container is gone, or may be)."""
        if self.session is not None and self.renewable:
            self.session = Session()
            self.sessions.append(self.session)

    def set_call(self, call: Any) -> None:
        with self._lock:
            self._call = call
            stopped = self._stopped
        if call is not None and stopped:
            call.cancel()

    def cancel(self) -> None:
        """Cancels the call running now (and any it starts from here on)."""
        with self._lock:
            self._stopped = True
            call = self._call
        if call is not None:
            call.cancel()


class Stopped(Exception):
    """The spawned call was stopped: its call was cancelled on purpose."""
