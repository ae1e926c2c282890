"""``@readie.remote``: a function whose calls run on the cluster."""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Optional, Sequence, Set, Tuple, TypeVar, Union, overload

from readie._call import PreparedCall, pack_call, run, run_async
from readie._connection import current_settings
from readie._hints import import_hints, static_imports
from readie._ids import CallInfo, new_request_id
from readie._logs import LogPrinter
from readie._session import current_session
from readie._sizes import Size, parse_optional_size
from readie._wire import CallDemand, build_config

R = TypeVar("R")


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
    ) -> "RemoteOptions":
        """Validates the decorator's arguments (so mistakes show at definition, not at call)."""
        if checkpoint_id is not None and not isinstance(checkpoint_id, str):
            raise TypeError(f"checkpoint_id must be a string, not {checkpoint_id!r}")
        if isinstance(shed_retries, bool) or not isinstance(shed_retries, int) or shed_retries < 0:
            raise ValueError(f"shed_retries must be a whole number >= 0, not {shed_retries!r}")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"timeout must be a number of seconds > 0, not {timeout!r}")
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
        )
        return RemoteOptions(
            demand,
            _strings(imports, "imports"),
            bool(stream_logs),
            shed_retries,
            None if timeout is None else float(timeout),
        )


class RemoteFunction(Generic[R]):
    """A function whose calls run on the cluster: ``f(...)`` blocks, ``await f.aio(...)`` does not.

    ``last_call`` holds the IDs of its most recently finished call (worker, container and the
    checkpoint actually used); :func:`readie.last_call` is the same per thread or task."""

    def __init__(self, fn: Callable[..., R], options: RemoteOptions) -> None:
        functools.update_wrapper(self, fn)
        self._fn = fn
        self.options = options
        self.last_call: Optional[CallInfo] = None
        self._static_imports: Optional[Set[str]] = None

    def import_hints(self) -> Sequence[str]:
        """The import hints a call sends now (see :mod:`readie._hints`)."""
        if self._static_imports is None:
            self._static_imports = static_imports(self._fn)
        return import_hints(self._fn, self.options.imports, static=self._static_imports)

    def _prepare(self, args: tuple, kwargs: dict) -> PreparedCall:
        settings = current_settings()
        session = current_session()
        config = build_config(
            new_request_id(),
            self.options.demand,
            self.import_hints(),
            session_id=session.id if session is not None else "",
        )

        def on_done(info: CallInfo) -> None:
            self.last_call = info
            if session is not None:
                session.last_call = info

        timeout = self.options.timeout
        return PreparedCall(
            settings=settings,
            config=config,
            payload=pack_call(self._fn, args, kwargs),
            on_log=LogPrinter() if self.options.stream_logs else None,
            on_done=on_done,
            shed_retries=self.options.shed_retries,
            deadline=None if timeout is None else time.monotonic() + timeout,
        )

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return run(self._prepare(args, kwargs))

    async def aio(self, *args: Any, **kwargs: Any) -> R:
        """The call on the running asyncio loop (a ``grpc.aio`` channel)."""
        return await run_async(self._prepare(args, kwargs))

    def __reduce__(self) -> Any:
        # Inside the sandbox a remote function is the plain function: when a pickled function
        # refers to one (recursion, or one remote function calling another), it runs in place.
        # copy.copy returns a function itself, and the sandbox has the stdlib but maybe not readie.
        return (copy.copy, (self._fn,))

    def __repr__(self) -> str:
        return f"<remote function {getattr(self, '__qualname__', self._fn)!r}>"


@overload
def remote(fn: Callable[..., R]) -> RemoteFunction[R]: ...


@overload
def remote(
    fn: None = None,
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
) -> Callable[[Callable[..., R]], RemoteFunction[R]]: ...


def remote(
    fn: Optional[Callable[..., R]] = None,
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
) -> Union[RemoteFunction[R], Callable[[Callable[..., R]], RemoteFunction[R]]]:
    """Makes a function run on the cluster; use as ``@remote`` or ``@remote(memory="2GiB", ...)``.

    - ``memory``: the container's memory budget (``"2GiB"``, ``"512MiB"`` or bytes); unset means
      the router's DEFAULT_MEMORY.
    - ``gpu``: run on a GPU worker; ``gpu_memory``: GPU memory budget (a budget implies ``gpu``).
    - ``checkpoint_id``: restore exactly this checkpoint; ``disable_optimized_execution``: never
      restore one, start the container cold.
    - ``packages``: PEP 508 requirements installed into the container before the call.
    - ``imports``: import hints added to those derived from the function's code.
    - ``stream_logs``: print the call's output and readie's notes to stderr as they arrive.
    - ``pinned``: run on the version your tenant pinned (the tenant comes from your token): the
      router routes the call to the workers that hold it, and never serves another version.
      ``fn.last_call.served_version`` and ``.routing_revision`` say which served it.
    - ``shed_retries``: how many more times to try a call that was shed (its version is loading:
      :class:`readie.ShedError`), after the cluster's retry-after hint and with ``retry_of`` set.
    - ``timeout``: seconds the call may take, all its tries included; unset means no deadline.
    """
    options = RemoteOptions.build(
        memory=memory,
        gpu=gpu,
        gpu_memory=gpu_memory,
        checkpoint_id=checkpoint_id,
        disable_optimized_execution=disable_optimized_execution,
        packages=packages,
        imports=imports,
        stream_logs=stream_logs,
        pinned=pinned,
        shed_retries=shed_retries,
        timeout=timeout,
    )

    def decorate(function: Callable[..., R]) -> RemoteFunction[R]:
        if not callable(function):
            raise TypeError(f"@readie.remote decorates a function, not {function!r}")
        return RemoteFunction(function, options)

    return decorate if fn is None else decorate(fn)
