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
OUTCOME = 0x0B
INPUT_LOG = 0x0C
IMAGE = 0x0D
IMAGE_DONE = 0x0E

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
    OUTCOME: "OUTCOME",
    INPUT_LOG: "INPUT_LOG",
    IMAGE: "IMAGE",
    IMAGE_DONE: "IMAGE_DONE",
}

# Log sources, as in readie.v1.LogSource.
STDOUT = 1
STDERR = 2
SYSTEM = 3

_HEADER = struct.Struct(">IB")

# A batch's outcome record: input index, flags, microseconds in the function, data length.
RECORD_HEADER = struct.Struct(">IBII")
# Record flags: the input returned (else it raised), and this record is its outcome's last piece.
RECORD_OK = 0x01
RECORD_LAST = 0x02
# The most data one record carries: a record (and an OUTCOME frame of one) fits one 1 MiB piece.
MAX_RECORD_DATA = MAX_PIECE - RECORD_HEADER.size
# The most an input's outcome (its result envelope) may hold; a larger one becomes an error.
MAX_OUTCOME_BYTES = 64 * 1024 * 1024
# The most microseconds a record reports (a u32).
_MAX_MICROS = 0xFFFFFFFF


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


def encode_input_log(index, source, text):
    """An INPUT_LOG frame: the batch input's index, one source byte, then the line as UTF-8."""
    return encode(INPUT_LOG, struct.pack(">IB", index, source) + text.encode("utf-8", "replace"))


def outcome_records(index, ok, micros, envelope):
    """An input's outcome as records (bytes): its envelope in pieces of at most MAX_RECORD_DATA,
    the last flagged; an empty envelope is one empty record."""
    flags = RECORD_OK if ok else 0
    micros = max(0, min(int(micros), _MAX_MICROS))
    view = memoryview(envelope)
    pieces = []
    starts = range(0, max(len(view), 1), MAX_RECORD_DATA)
    last = starts[-1]
    for start in starts:
        piece = view[start : start + MAX_RECORD_DATA]
        piece_flags = flags | (RECORD_LAST if start == last else 0)
        pieces.append(RECORD_HEADER.pack(index, piece_flags, micros, len(piece)) + piece.tobytes())
    return pieces


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
