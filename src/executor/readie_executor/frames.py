"""The executor link's frames: a 4-byte big-endian length, a 1-byte type, then the body.

The length counts the type byte and the body. A frame longer than MAX_FRAME_LENGTH is a protocol
error: the receiver drops the connection. See docs/executor-protocol.md.
"""

import json
import struct
import threading

# Payload and result pieces are at most 1 MiB; the bound leaves room for control frames.
MAX_FRAME_LENGTH = 4 * 1024 * 1024
# The most a payload or result piece carries.
MAX_PIECE = 1024 * 1024

HELLO = 0x01
INSTALL = 0x02
INSTALL_DONE = 0x03
CALL = 0x04
PAYLOAD = 0x05
PAYLOAD_END = 0x06
LOG = 0x07
RESULT = 0x08
RESULT_END = 0x09
ERROR = 0x0A
IMAGE = 0x0B
IMAGE_DONE = 0x0C

NAMES = {
    HELLO: "HELLO",
    INSTALL: "INSTALL",
    INSTALL_DONE: "INSTALL_DONE",
    CALL: "CALL",
    PAYLOAD: "PAYLOAD",
    PAYLOAD_END: "PAYLOAD_END",
    LOG: "LOG",
    RESULT: "RESULT",
    RESULT_END: "RESULT_END",
    ERROR: "ERROR",
    IMAGE: "IMAGE",
    IMAGE_DONE: "IMAGE_DONE",
}

# Log sources, as in readie.v1.LogSource.
STDOUT = 1
STDERR = 2
SYSTEM = 3

_HEADER = struct.Struct(">IB")


class ProtocolError(Exception):
    """The peer broke the frame protocol (oversized frame, unexpected type, bad JSON)."""


def encode(kind, body=b""):
    """One frame as bytes."""
    length = len(body) + 1
    if length > MAX_FRAME_LENGTH:
        raise ProtocolError(f"frame of {length} bytes exceeds the {MAX_FRAME_LENGTH}-byte maximum")
    return _HEADER.pack(length, kind) + body


def encode_json(kind, value):
    """One frame whose body is UTF-8 JSON."""
    return encode(kind, json.dumps(value, separators=(",", ":")).encode("utf-8"))


def encode_log(source, text):
    """A LOG frame: one source byte, then the line as UTF-8."""
    return encode(LOG, bytes([source]) + text.encode("utf-8", "replace"))


def decode_json(body):
    """The JSON value of a control frame's body."""
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise ProtocolError(f"a control frame is not UTF-8 JSON: {error}") from error


def read_frame(stream):
    """Reads one frame from a binary stream: (type, body), or None at a clean end of stream."""
    header = stream.read(_HEADER.size)
    if not header:
        return None
    if len(header) < _HEADER.size:
        raise ProtocolError("the stream ended inside a frame header")
    length, kind = _HEADER.unpack(header)
    if length < 1 or length > MAX_FRAME_LENGTH:
        raise ProtocolError(f"frame length {length} is outside 1..{MAX_FRAME_LENGTH}")
    body = stream.read(length - 1) if length > 1 else b""
    if len(body) < length - 1:
        raise ProtocolError("the stream ended inside a frame body")
    return kind, body


class FrameWriter:
    """Writes whole frames to a socket; safe to share between threads (log pumps, the caller)."""

    def __init__(self, sock):
        self._sock = sock
        self._lock = threading.Lock()

    def send(self, frame):
        with self._lock:
            self._sock.sendall(frame)
