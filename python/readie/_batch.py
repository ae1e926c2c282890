"""Batches on the wire: one call carrying many inputs of one function (docs/clients.md, "Batches").

The payload holds the function once and each input on its own, so an input that does not pickle
here, or does not load in the container, fails alone: a u32 big-endian length and
``cloudpickle.dumps(fn)``, then for each input a u32 length and ``cloudpickle.dumps((args,
kwargs))``. The answer's result chunks hold outcome records, each input's as it finishes: input
index (u32), flags (u8: bit 0 it returned, bit 1 last piece), microseconds in the function (u32),
data length (u32), then a piece of the input's result envelope (a plain call's envelope)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import cloudpickle

from readie._call import pickled_by_value
from readie.errors import ProtocolError

#: The most inputs one batch carries (the router refuses more).
MAX_BATCH_INPUTS = 1024

_LENGTH = struct.Struct(">I")
_RECORD = struct.Struct(">IBII")
_OK = 0x01
_LAST = 0x02


def pack_function(fn: Any) -> bytes:
    """The function's part of a batch payload (its length first)."""
    with pickled_by_value(getattr(fn, "__module__", None)):
        pickled = cloudpickle.dumps(fn)
    return _LENGTH.pack(len(pickled)) + pickled


def pack_inputs(fn: Any, inputs: Sequence[Tuple[tuple, dict]]) -> List[Any]:
    """Each input's part of a batch payload (its length first), or the exception that pickling
    it raised (that input fails alone)."""
    parts: List[Any] = []
    with pickled_by_value(getattr(fn, "__module__", None)):
        for args, kwargs in inputs:
            try:
                pickled = cloudpickle.dumps((args, kwargs))
            except Exception as error:  # noqa: BLE001 - the input's own error
                parts.append(error)
                continue
            parts.append(_LENGTH.pack(len(pickled)) + pickled)
    return parts


@dataclass(frozen=True)
class Outcome:
    """An input's whole outcome: its index in the batch, whether it returned, its envelope's
    bytes, and the time it spent in the function."""

    index: int
    ok: bool
    data: bytes
    seconds: float


class OutcomeReader:
    """Folds a batch's result chunks into whole outcomes (an outcome may come in several
    records); every record names an input of the batch, each input once."""

    def __init__(self, inputs: int) -> None:
        self.inputs = inputs
        self._pieces: Dict[int, List[bytes]] = {}
        self._done: set = set()

    def feed(self, chunk: bytes) -> Iterator[Outcome]:
        """The outcomes a chunk completes (a chunk holds whole records)."""
        view = memoryview(chunk)
        offset = 0
        while offset < len(view):
            if len(view) - offset < _RECORD.size:
                raise ProtocolError("a batch's answer ends inside an outcome record")
            index, flags, micros, length = _RECORD.unpack_from(view, offset)
            offset += _RECORD.size
            if index >= self.inputs or index in self._done or length > len(view) - offset:
                raise ProtocolError(f"a batch's answer holds a malformed outcome record (input {index})")
            piece = bytes(view[offset : offset + length])
            offset += length
            if not flags & _LAST:
                self._pieces.setdefault(index, []).append(piece)
                continue
            earlier = self._pieces.pop(index, None)
            self._done.add(index)
            data = b"".join(earlier + [piece]) if earlier else piece
            yield Outcome(index, bool(flags & _OK), data, micros / 1e6)

    def answered(self, index: int) -> bool:
        return index in self._done


def batch_size_problem(chunk_size: Optional[int]) -> Optional[str]:
    """Why ``chunk_size`` is not a batch size, or None."""
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or not 1 <= chunk_size <= MAX_BATCH_INPUTS:
        return f"chunk_size must be a whole number from 1 to {MAX_BATCH_INPUTS}, or None, not {chunk_size!r}"
    return None
