"""What the machinery under ``@readie.remote`` (map, spawn) needs of a remote function: its
options, its name and one call prepared per input. :class:`readie._remote.RemoteFunction` is
one; the modules below it name this protocol instead, so none of them imports upward."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from readie._call import PreparedCall
from readie._options import RemoteOptions

R_co = TypeVar("R_co", covariant=True)


class RemoteTarget(Protocol[R_co]):
    """A remote function as map and spawn see it (``R_co``: what its calls return)."""

    options: RemoteOptions

    def _prepare(self, args: tuple, kwargs: dict, session: Any = ...) -> PreparedCall:
        """One call of it with these arguments, in ``session`` (default: the context's)."""
        ...

    def __call__(self, *args: Any, **kwargs: Any) -> R_co: ...
