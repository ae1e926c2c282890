"""Reading a shed's retry-after hint from a call's trailing metadata: the ``retry-after-ms``
trailer, else the standard ``google.rpc.RetryInfo`` in ``grpc-status-details-bin``.

The status details are decoded by hand (a ``google.rpc.Status`` holding ``Any`` details, one of
them a ``RetryInfo`` with a ``Duration``): four tiny messages, and the client then needs no
googleapis package of its own (whose descriptors could clash with the user's)."""

from __future__ import annotations

from typing import Iterator, Mapping, Optional, Sequence, Tuple, Union

RETRY_INFO_TYPE_URL = "type.googleapis.com/google.rpc.RetryInfo"

Metadata = Union[Mapping[str, object], Sequence[Tuple[str, object]], None]


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> Iterator[Tuple[int, object]]:
    """The (field number, value) pairs of a protobuf message: ints for varints, bytes otherwise."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ValueError("truncated field")
            yield number, data[pos : pos + length]
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")


def retry_info_delay(details: bytes) -> Optional[float]:
    """The ``RetryInfo`` delay (seconds) in an encoded ``google.rpc.Status``, if it holds one."""
    try:
        for number, value in _fields(details):
            if number != 3 or not isinstance(value, bytes):
                continue
            parts = dict(_fields(value))
            if parts.get(1) != RETRY_INFO_TYPE_URL.encode():
                continue
            retry = dict(_fields(parts.get(2, b"")))  # type: ignore[arg-type]
            delay = dict(_fields(retry.get(1, b"")))  # type: ignore[arg-type]
            seconds = int(delay.get(1, 0))  # type: ignore[arg-type]
            nanos = int(delay.get(2, 0))  # type: ignore[arg-type]
            return seconds + nanos / 1e9
    except (ValueError, TypeError):
        return None
    return None


def _pairs(metadata: Metadata) -> Iterator[Tuple[str, object]]:
    # grpc's sync trailers are a tuple of (key, value) pairs; grpc.aio's Metadata iterates as
    # pairs too (it is no plain mapping); a dict is taken as key to value.
    if metadata is None:
        return iter(())
    if isinstance(metadata, dict):
        return iter(metadata.items())
    return (tuple(pair) for pair in metadata)  # type: ignore[misc]


def trailer(metadata: Metadata, key: str) -> Optional[object]:
    """The first value of ``key`` in trailing metadata, if any."""
    for name, value in _pairs(metadata):
        if name == key:
            return value
    return None


def retry_after(metadata: Metadata) -> Optional[float]:
    """A shed's hint in seconds: ``retry-after-ms``, else the ``RetryInfo``; None when neither."""
    text = trailer(metadata, "retry-after-ms")
    if text is not None:
        try:
            return max(0.0, int(str(text)) / 1000)
        except ValueError:
            pass
    details = trailer(metadata, "grpc-status-details-bin")
    if isinstance(details, (bytes, bytearray)):
        return retry_info_delay(bytes(details))
    return None
