"""Captures the process's standard output and error at the file-descriptor level.

File descriptors 1 and 2 become pipes, so everything the function writes (print, sys.stderr, C
extensions, child processes) is seen. A pump thread per pipe hands each complete line to the
current sink as soon as it is written, which streams a long call's progress. `drain` makes sure
every byte written before it has reached the sink: under the pump's lock it reads whatever the
pipe still holds and sends the last partial line too, so a call whose function printed nothing
pays no thread hand-off at all.
"""

import array
import fcntl
import os
import select
import sys
import termios
import threading

from .frames import STDERR, STDOUT

# Longer lines are cut into pieces of this size, so a line without end never grows unbounded.
MAX_LINE = 16 * 1024


def _discard(_source, _text):
    pass


class _Pump:
    """Reads one pipe and hands complete lines to the capture's sink."""

    def __init__(self, capture, read_fd, source):
        self._capture = capture
        self._read_fd = read_fd
        self._source = source
        self._pending = b""
        # Held while reading and emitting: whoever holds it (the pump, or a drain) has emitted
        # everything it read before letting go.
        self._lock = threading.Lock()
        os.set_blocking(read_fd, False)
        thread = threading.Thread(target=self._run, name=f"readie-capture-{source}", daemon=True)
        thread.start()

    def _emit(self, raw):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        for start in range(0, max(len(raw), 1), MAX_LINE):
            self._capture.sink(self._source, raw[start : start + MAX_LINE].decode("utf-8", "replace"))

    def _consume(self, budget=None):
        """Reads what the pipe holds (at most `budget` bytes), emitting complete lines; False once
        the pipe is closed."""
        while budget is None or budget > 0:
            try:
                data = os.read(self._read_fd, 65536 if budget is None else min(budget, 65536))
            except BlockingIOError:
                return True
            except InterruptedError:
                continue
            if not data:
                return False
            if budget is not None:
                budget -= len(data)
            lines = (self._pending + data).split(b"\n")
            self._pending = lines.pop()
            for line in lines:
                self._emit(line)
            while len(self._pending) > MAX_LINE:
                self._emit(self._pending[:MAX_LINE])
                self._pending = self._pending[MAX_LINE:]
        return True

    def _run(self):
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        while True:
            try:
                poller.poll()
            except InterruptedError:
                continue
            with self._lock:
                if not self._consume():
                    return

    def drain(self):
        """Emits everything written to the pipe so far, a last line without its newline too."""
        with self._lock:
            # Only what is in the pipe now: a thread that keeps writing cannot hold the call up.
            waiting = array.array("i", [0])
            fcntl.ioctl(self._read_fd, termios.FIONREAD, waiting)
            self._consume(waiting[0])
            if self._pending:
                self._emit(self._pending)
                self._pending = b""


class OutputCapture:
    """Redirects fds 1 and 2 into pumps that deliver lines to `sink(source, text)`."""

    def __init__(self):
        self.sink = _discard
        self._pumps = []
        for fd, source in ((1, STDOUT), (2, STDERR)):
            read_fd, write_fd = os.pipe()
            os.dup2(write_fd, fd)
            os.close(write_fd)
            self._pumps.append(_Pump(self, read_fd, source))
        # Fresh line-buffered streams over the pipes: print() reaches the pump at each newline.
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)

    def begin(self, sink):
        """Sends lines to `sink` from now on."""
        self.sink = sink

    def end(self):
        """Stops sending lines anywhere (between calls, stray output is dropped)."""
        self.sink = _discard

    def drain(self):
        """Sends every byte written to fds 1 and 2 so far to the sink."""
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        for pump in self._pumps:
            pump.drain()
