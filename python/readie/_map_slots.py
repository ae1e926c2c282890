"""A map's concurrency slots: each is a session of its own (its inputs run one after another in
one container, warm), given back when it idles, and ended when the map ends
(``TenantService.EndSession``: its container is destroyed at once)."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, List, Optional

from readie._connection import ConnectionSettings
from readie._map_options import MapOptions
from readie._session import Session
from readie._tenant import end_session, end_session_async
from readie.errors import ReadieError

#: How long a stopping map waits for its cancelled calls to end (seconds).
CANCEL_GRACE = 10.0
#: A slot with no input to run for this long gives its container back (seconds); at once when the
#: inputs are exhausted. An idle session container holds a slot that another input, of this map or
#: another, may be waiting for: two maps that each hold idle containers while waiting for room
#: would otherwise wait for each other.
IDLE_RELEASE = 1.0




class Slot:
    """One concurrency slot: its session (``None``: calls outside sessions), the call it runs
    now (so another thread can cancel it), and the sessions it left behind (to end them)."""

    def __init__(self, session: Optional[Session], *, renewable: bool = True) -> None:
        self.session = session
        self.renewable = renewable
        self.sessions: List[Session] = [session] if session is not None else []
        self._lock = threading.Lock()
        self._call: Any = None
        self._stopped = False
        #: When it last finished an input (monotonic seconds).
        self.idle_since = time.monotonic()

    def renew(self) -> None:
        """Moves to a new session (the old one's container is gone, or may be)."""
        if self.session is not None and self.renewable:
            self.session = Session()
            self.sessions.append(self.session)

    @property
    def holds_container(self) -> bool:
        """Whether its session may hold a container now (a call ran in it, and it was not ended)."""
        return self.session is not None and self.session.used and not self.session.closed

    def release(self, now: float, exhausted: bool) -> Optional[Session]:
        """Gives its session up (to be ended) when it idled long enough (or no input is left), and
        moves to a new one for its next input."""
        if not self.holds_container or not self.renewable:
            return None
        if not exhausted and now - self.idle_since < IDLE_RELEASE:
            return None
        released = self.session
        self.renew()
        return released

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
    """The map (or spawn) was stopped: its call was cancelled on purpose."""



def new_slots(count: int, options: MapOptions) -> List[Slot]:
    return [Slot(None if options.isolate_inputs else Session()) for _ in range(count)]



def end_sessions(settings: ConnectionSettings, slots: Iterable[Slot]) -> None:
    sessions = [s for slot in slots for s in slot.sessions if s.used and not s.closed]
    if not sessions:
        return
    with ThreadPoolExecutor(max_workers=min(32, len(sessions)), thread_name_prefix="readie-end") as ends:
        for session in sessions:
            ends.submit(end_quietly, settings, session)


def end_quietly(settings: ConnectionSettings, session: Session) -> None:
    try:
        session.closed = True
        end_session(settings, session.id)
    except ReadieError:
        pass  # the worker destroys an idle container after EXECUTOR_TTL anyway


async def end_sessions_async(settings: ConnectionSettings, slots: Iterable[Slot]) -> None:
    sessions = [s for slot in slots for s in slot.sessions if s.used and not s.closed]
    await asyncio.gather(*(end_quietly_async(settings, session) for session in sessions))


async def end_quietly_async(settings: ConnectionSettings, session: Session) -> None:
    try:
        session.closed = True
        await end_session_async(settings, session.id)
    except ReadieError:
        pass

