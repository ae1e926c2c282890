"""A remote function's options (``@readie.remote(...)``), validated and in wire units: below
:mod:`readie._remote`, so the machinery that runs its calls (map, spawn) can name them too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Tuple

from readie._image import Image
from readie._sizes import Size, parse_optional_size
from readie._wire import CallDemand

#: The most inputs of a map one container runs at once (``max_inputs``); the router refuses more.
MAX_INPUTS_AT_ONCE = 256


def _strings(value: Iterable[str], name: str) -> Tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a list of strings, e.g. [{value!r}], not a string")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise TypeError(f"{name} must hold non-empty strings, not {item!r}")
    return items


@dataclass(frozen=True)
class RemoteOptions:
    """A remote function's options, validated and in wire units."""

    demand: CallDemand
    imports: Tuple[str, ...] = ()
    stream_logs: bool = True
    #: More tries after a shed (a pinned call whose version is loading), at most.
    shed_retries: int = 3
    #: Seconds every try of a call must be over within; None: no deadline.
    timeout: Optional[float] = None
    #: How many inputs of a map one container runs at once (threads, or tasks for an async function).
    max_inputs: int = 1

    @staticmethod
    def build(
        *,
        memory: Optional[Size] = None,
        gpu: bool = False,
        gpu_memory: Optional[Size] = None,
        checkpoint_id: Optional[str] = None,
        disable_optimized_execution: bool = False,
        packages: Iterable[str] = (),
        imports: Iterable[str] = (),
        stream_logs: bool = True,
        pinned: bool = False,
        shed_retries: int = 3,
        timeout: Optional[float] = None,
        image: Optional[Image] = None,
        max_inputs: int = 1,
    ) -> "RemoteOptions":
        """Validates the decorator's arguments (so mistakes show at definition, not at call)."""
        if checkpoint_id is not None and not isinstance(checkpoint_id, str):
            raise TypeError(f"checkpoint_id must be a string, not {checkpoint_id!r}")
        if isinstance(shed_retries, bool) or not isinstance(shed_retries, int) or shed_retries < 0:
            raise ValueError(f"shed_retries must be a whole number >= 0, not {shed_retries!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
        if isinstance(max_inputs, bool) or not isinstance(max_inputs, int) or not 1 <= max_inputs <= MAX_INPUTS_AT_ONCE:
            raise ValueError(f"max_inputs must be a whole number from 1 to {MAX_INPUTS_AT_ONCE}, not {max_inputs!r}")
        if image is not None and not isinstance(image, Image):
            raise TypeError(f"image must be a readie.Image, not {image!r}")
        if image is not None and pinned:
            raise ValueError("pinned runs on the tenant's version: it cannot also name an image")
        if pinned and disable_optimized_execution:
            raise ValueError("pinned runs on the tenant's version, a checkpoint: it contradicts disable_optimized_execution")
        demand = CallDemand(
            memory=parse_optional_size(memory, name="memory"),
            gpu=bool(gpu),
            gpu_memory=parse_optional_size(gpu_memory, name="gpu_memory"),
            checkpoint_id=checkpoint_id or "",
            disable_optimized_execution=bool(disable_optimized_execution),
            packages=_strings(packages, "packages"),
            pinned=bool(pinned),
            image=image,
        )
        return RemoteOptions(
            demand,
            _strings(imports, "imports"),
            bool(stream_logs),
            shed_retries,
            None if timeout is None else float(timeout),
            max_inputs,
        )
