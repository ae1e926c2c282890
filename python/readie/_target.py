"""What the machinery under ``@readie.remote`` (map, spawn) needs of a remote function: its
options, its name, the function itself (a map's batches), and one call prepared per input. :class:`readie._remote.RemoteFunction` is
one; the modules below it name this protocol instead, so none of them imports upward."""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, Sequence, TypeVar

from readie._call import PreparedCall
from readie._ids import CallInfo
from readie._options import RemoteOptions
from readie._wire import LogSink

R_co = TypeVar("R_co", covariant=True)


class RemoteTarget(Protocol[R_co]):
    """A remote function as map and spawn see it (``R_co``: what its calls return)."""

    options: RemoteOptions
    #: The function itself (what a batch pickles once).
    _fn: Callable[..., Any]

    def import_hints(self) -> Sequence[str]:
        """The import hints its calls send."""
        ...

    def _log_sink(self) -> Optional[LogSink]:
        """Where its calls' log lines go (None: nowhere)."""
        ...

    def _finished(self, info: CallInfo) -> None:
        """One of its calls (or a map's batches) ended."""
        ...

    def _prepare(self, args: tuple, kwargs: dict, session: Any = ...) -> PreparedCall:
        """One call of it with these arguments, in ``session`` (default: the context's)."""
        ...

    def __call__(self, *args: Any, **kwargs: Any) -> R_co: ...
