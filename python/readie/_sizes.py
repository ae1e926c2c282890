"""Memory sizes as people write them: ``"2GiB"``, ``"512MiB"``, ``"1.5GB"`` or a number of bytes."""

from __future__ import annotations

import re
from typing import Optional, Union

_UNITS = {
    "": 1,
    "b": 1,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?\s*$", re.IGNORECASE)

Size = Union[int, str]


def parse_size(size: Size, *, name: str = "size") -> int:
    """Returns ``size`` in bytes: an int is bytes; a string may carry KiB/MiB/GiB/TiB or KB/MB/GB/TB.

    Raises ``ValueError`` (or ``TypeError``) naming ``name`` for anything else, or a size under 1 byte.
    """
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f"{name} must be a number of bytes or a string like '2GiB', not {size!r}")
    if isinstance(size, int):
        size_in_bytes = size
    else:
        match = _SIZE.match(size)
        if match is None:
            raise ValueError(f"{name} {size!r} is not a size (use e.g. '512MiB', '2GiB' or bytes)")
        size_in_bytes = round(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])
    if size_in_bytes < 1:
        raise ValueError(f"{name} must be at least 1 byte, not {size!r}")
    if size_in_bytes >= 2**64:
        raise ValueError(f"{name} {size!r} does not fit in 64 bits")
    return size_in_bytes


def parse_optional_size(size: Optional[Size], *, name: str) -> Optional[int]:
    """Like :func:`parse_size`, with ``None`` meaning "not given"."""
    return None if size is None else parse_size(size, name=name)
