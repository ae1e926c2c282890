"""Printing the log lines a call streams back, as they arrive."""

from __future__ import annotations

import sys
from typing import Optional, TextIO

from readie._proto import call_pb2

#: What readie's own lines (router and worker notes) start with, to tell them from user output.
SYSTEM_PREFIX = "[readie] "


def format_log_line(line: call_pb2.LogLine) -> str:
    """The text to print for a log line: user output as is, readie's own notes prefixed."""
    if line.source == call_pb2.LOG_SOURCE_SYSTEM:
        return SYSTEM_PREFIX + line.text
    return line.text


class LogPrinter:
    """Prints every log line of a call to ``stream`` (the process's stderr by default, looked up
    at print time so redirections apply), flushing each so output shows while the call runs."""

    def __init__(self, stream: Optional[TextIO] = None) -> None:
        self._stream = stream

    def __call__(self, line: call_pb2.LogLine) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(format_log_line(line) + "\n")
        stream.flush()
