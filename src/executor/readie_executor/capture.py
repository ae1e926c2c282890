"""Captures the process's standard output and error at the file-descriptor level.

File descriptors 1 and 2 become pipes read by two pump threads, so everything the function writes
(print, sys.stderr, C extensions, child processes) is seen. Each complete line goes to the current
sink as it is written, which streams a long call's progress. `drain` makes sure every byte written
before it has reached the sink: it flushes Python's buffers and sends a marker through each pipe,
then waits until each pump has passed it.
"""

import os
import sys
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
        self._synced = threading.Condition()
        self._passed = 0
        thread = threading.Thread(target=self._run, name=f"readie-capture-{source}", daemon=True)
        thread.start()

    def passed(self):
        """How many drain markers this pump has passed."""
        with self._synced:
            return self._passed

    def wait_passed(self, count, timeout):
        with self._synced:
            return self._synced.wait_for(lambda: self._passed >= count, timeout)

    def _emit(self, raw):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        for start in range(0, max(len(raw), 1), MAX_LINE):
            self._capture.sink(self._source, raw[start : start + MAX_LINE].decode("utf-8", "replace"))

    def _run(self):
        marker = self._capture.marker
        pending = b""
        while True:
            try:
                data = os.read(self._read_fd, 65536)
            except InterruptedError:
                continue
            if not data:
                return
            pending += data
            while True:
                at = pending.find(marker)
                head = pending if at < 0 else pending[:at]
                lines = head.split(b"\n")
                rest = lines.pop()
                for line in lines:
                    self._emit(line)
                while len(rest) > MAX_LINE:
                    self._emit(rest[:MAX_LINE])
                    rest = rest[MAX_LINE:]
                if at < 0:
                    pending = rest
                    break
                # Everything before the marker was written before the drain: a partial last line
                # is complete as far as this call is concerned.
                if rest:
                    self._emit(rest)
                pending = pending[at + len(marker) :]
                with self._synced:
                    self._passed += 1
                    self._synced.notify_all()


class OutputCapture:
    """Redirects fds 1 and 2 into pumps that deliver lines to `sink(source, text)`."""

    def __init__(self):
        self.marker = b"\x00\x1breadie-drain-" + os.urandom(8).hex().encode() + b"\x1b\x00"
        self.sink = _discard
        self._pumps = []
        for fd, source in ((1, STDOUT), (2, STDERR)):
            read_fd, write_fd = os.pipe()
            os.dup2(write_fd, fd)
            os.close(write_fd)
            self._pumps.append((fd, _Pump(self, read_fd, source)))
        # Fresh line-buffered streams over the pipes: print() reaches the pump at each newline.
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)

    def begin(self, sink):
        """Sends lines to `sink` from now on."""
        self.sink = sink

    def end(self):
        """Stops sending lines anywhere (between calls, stray output is dropped)."""
        self.sink = _discard

    def drain(self, timeout=2.0):
        """Waits until every byte written to fds 1 and 2 so far has reached the sink."""
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        targets = []
        for fd, pump in self._pumps:
            # A target per drain, not a running count: a marker lost because the function moved
            # fd 1 elsewhere costs this drain its timeout, never every later one.
            target = pump.passed() + 1
            try:
                os.write(fd, self.marker)
            except OSError:
                continue
            targets.append((pump, target))
        return all(pump.wait_passed(target, timeout) for pump, target in targets)
