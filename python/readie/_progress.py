"""The progress bar of a map: one line on stderr, redrawn in place, when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

#: How often the bar is redrawn at most (seconds).
REDRAW_EVERY = 0.1
_WIDTH = 24


def wants_progress(progress: Optional[bool], stream: Optional[TextIO] = None) -> bool:
    """Whether to draw: ``progress=True`` always, ``False`` never, ``None`` when stderr is a
    terminal."""
    if progress is not None:
        return bool(progress)
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def render(label: str, done: int, total: Optional[int], errors: int, elapsed: float, queued: int = 0) -> str:
    """The bar's text: ``label  37/1000 [###.....]  120.3/s  2 errors  0:03``, with ``  5 queued``
    while inputs wait in the router's admission queue."""
    rate = done / elapsed if elapsed > 0 else 0.0
    minutes, seconds = divmod(int(elapsed), 60)
    if total:
        filled = min(_WIDTH, int(_WIDTH * done / total))
        bar = f" [{'#' * filled}{'.' * (_WIDTH - filled)}]"
        count = f"{done}/{total}"
    else:
        bar, count = "", f"{done}"
    noun = "error" if errors == 1 else "errors"
    waiting = f" {queued} queued" if queued > 0 else ""
    return f"{label} {count}{bar} {rate:.1f}/s {errors} {noun}{waiting} {minutes}:{seconds:02d}"


class ProgressBar:
    """Draws a map's progress; a no-op when off."""

    def __init__(
        self,
        label: str,
        total: Optional[int],
        *,
        enabled: bool,
        stream: Optional[TextIO] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self._label = label
        self._total = total
        self._stream = stream
        self._clock = clock
        self._started = clock()
        self._drawn_at = float("-inf")
        self.done = 0
        self.errors = 0
        #: Inputs waiting in the router's admission queue now.
        self.queued = 0

    def advance(self, failed: bool = False) -> None:
        """One more input completed (``failed``: with an error)."""
        self.done += 1
        if failed:
            self.errors += 1
        self.draw()

    def draw(self, force: bool = False) -> None:
        """Redraws, at most every ``REDRAW_EVERY`` seconds unless ``force``."""
        if not self.enabled:
            return
        now = self._clock()
        if not force and now - self._drawn_at < REDRAW_EVERY:
            return
        self._drawn_at = now
        stream = self._stream if self._stream is not None else sys.stderr
        text = render(self._label, self.done, self._total, self.errors, now - self._started, self.queued)
        stream.write("\r\x1b[K" + text)
        stream.flush()

    def close(self) -> None:
        """Draws the last state and ends the line."""
        if not self.enabled:
            return
        self.draw(force=True)
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write("\n")
        stream.flush()
