"""``@readie.remote``: a function whose calls run on the cluster."""

from __future__ import annotations

import copy
import functools
import time
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Generic,
    Iterable,
    Iterator,
    Optional,
    Sequence,
    Set,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from readie._call import PreparedCall, pack_call, run, run_async
from readie._connection import current_settings
from readie._hints import import_hints, static_imports
from readie._ids import CallInfo, new_request_id
from readie._image import Image
from readie._logs import LogPrinter
from readie._map_async import run_map_async
from readie._map_options import MapOptions
from readie._map_sync import run_map
from readie._options import RemoteOptions
from readie._session import current_session
from readie._sizes import Size
from readie._spawn import FunctionCall
from readie._wire import build_config, function_name

R = TypeVar("R")

# The session of a call is the context's unless a map slot names its own (or none).
_FROM_CONTEXT: Any = object()


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
        #: The inputs' times its last map measured, which its next map starts from.
        self._input_times: Optional[Any] = None
        #: ``fn.map(*iterables, ...)`` and ``async for r in fn.map.aio(...)``: see :class:`MapMethod`.
        self.map: MapMethod[R] = MapMethod(self, star=False)
        #: ``fn.starmap(iterable_of_tuples, ...)`` and its ``.aio``.
        self.starmap: MapMethod[R] = MapMethod(self, star=True)

    def spawn(self, *args: Any, **kwargs: Any) -> FunctionCall[R]:
        """Starts the call in the background and returns its handle at once (``.get()``,
        ``.cancel()``, ``.done()``); see :class:`readie.FunctionCall`."""
        return FunctionCall(self, args, kwargs, current_session())

    def import_hints(self) -> Sequence[str]:
        """The import hints a call sends now (see :mod:`readie._hints`)."""
        if self._static_imports is None:
            self._static_imports = static_imports(self._fn)
        return import_hints(self._fn, self.options.imports, static=self._static_imports)

    def _prepare(self, args: tuple, kwargs: dict, session: Any = _FROM_CONTEXT) -> PreparedCall:
        settings = current_settings()
        if session is _FROM_CONTEXT:
            session = current_session()
        if session is not None:
            session.used = True
        config = build_config(
            new_request_id(),
            self.options.demand,
            self.import_hints(),
            session_id=session.id if session is not None else "",
            function=function_name(self._fn),
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

    def _log_sink(self) -> Optional[LogPrinter]:
        """Where a call's log lines go: stderr, unless ``stream_logs=False``."""
        return LogPrinter() if self.options.stream_logs else None

    def _finished(self, info: CallInfo) -> None:
        """A call of it (or a map's batch) ended: where it ran."""
        self.last_call = info

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


def _length(iterable: Any) -> Optional[int]:
    try:
        return len(iterable)
    except TypeError:
        return None


def _zip_async(iterables: Sequence[Any]) -> Any:
    """The inputs of ``map.aio``: a plain zip, or an async one when any iterable is async."""
    if not any(hasattr(items, "__aiter__") for items in iterables):
        return zip(*iterables)

    async def zipped() -> Any:
        iterators = [items.__aiter__() if hasattr(items, "__aiter__") else iter(items) for items in iterables]
        while True:
            row = []
            for iterator in iterators:
                try:
                    if hasattr(iterator, "__anext__"):
                        row.append(await iterator.__anext__())
                    else:
                        row.append(next(iterator))
                except (StopIteration, StopAsyncIteration):
                    return
            yield tuple(row)

    return zipped()


class MapMethod(Generic[R]):
    """``fn.map`` / ``fn.starmap``: call it for an iterator of results, or use ``.aio`` for an
    async iterator.

    ``fn.map(*iterables, order_outputs=True, return_exceptions=False, max_concurrency=None,
    isolate_inputs=False, progress=None, retries=0, kwargs=None, chunk_size=None)``:

    - ``fn(a, b)`` for each pair of ``zip(*iterables)`` (``starmap`` takes tuples of arguments);
      inputs go to the cluster in batches (one call carrying many inputs), sized by the inputs'
      measured time (``chunk_size=N`` fixes it), and each input's result comes back as it
      finishes; inputs are drawn lazily, a generator of a million is never materialized;
      ``kwargs`` are passed to every input;
    - results in input order, or as they complete with ``order_outputs=False``;
    - the first failure raises (its message and ``input_index`` name the input), or with
      ``return_exceptions=True`` comes back in place of the result; a failing input never fails
      its neighbours in the batch;
    - as many batches in flight as the cluster lets this tenant (at most ``max_concurrency``);
      refusals for lack of room are waited out; an input whose batch ran and failed is retried
      only ``retries`` times; with ``@readie.remote(max_inputs=N)`` each container runs N inputs
      of its batch at once;
    - each concurrency slot runs its batches in one container (a session, ended when the map
      ends), so state one input leaves in the container's Python can be seen by later inputs of
      that slot; ``isolate_inputs=True`` gives every input a fresh container (slower);
    - a progress bar on stderr when it is a terminal (``progress=False``: never);
    - Ctrl-C cancels the calls in flight and raises ``KeyboardInterrupt`` saying how many inputs
      completed.
    """

    def __init__(self, fn: "RemoteFunction[R]", *, star: bool) -> None:
        self._fn = fn
        self._star = star

    def _inputs(self, iterables: Sequence[Any], kwargs: Optional[dict]) -> Any:
        extra = dict(kwargs or {})
        if self._star:
            if len(iterables) != 1:
                raise TypeError("starmap takes one iterable of argument tuples")
            return ((tuple(args), extra) for args in iterables[0])
        if not iterables:
            raise TypeError("map needs at least one iterable of inputs")
        return ((tuple(row), extra) for row in zip(*iterables))

    def _total(self, iterables: Sequence[Any]) -> Optional[int]:
        lengths = [_length(items) for items in iterables]
        if not lengths or any(length is None for length in lengths):
            return None
        return min(length for length in lengths if length is not None)

    def __call__(
        self,
        *iterables: Any,
        order_outputs: bool = True,
        return_exceptions: bool = False,
        max_concurrency: Optional[int] = None,
        isolate_inputs: bool = False,
        progress: Optional[bool] = None,
        retries: int = 0,
        kwargs: Optional[dict] = None,
        chunk_size: Optional[int] = None,
    ) -> Iterator[Any]:
        options = MapOptions.build(
            order_outputs=bool(order_outputs),
            return_exceptions=bool(return_exceptions),
            max_concurrency=max_concurrency,
            isolate_inputs=bool(isolate_inputs),
            progress=progress,
            retries=retries,
            chunk_size=chunk_size,
        )
        return run_map(self._fn, self._inputs(iterables, kwargs), self._total(iterables), options)

    def aio(
        self,
        *iterables: Any,
        order_outputs: bool = True,
        return_exceptions: bool = False,
        max_concurrency: Optional[int] = None,
        isolate_inputs: bool = False,
        progress: Optional[bool] = None,
        retries: int = 0,
        kwargs: Optional[dict] = None,
        chunk_size: Optional[int] = None,
    ) -> AsyncIterator[Any]:
        """The map on the running event loop: ``async for result in fn.map.aio(...)``; the
        iterables may be async iterables too."""
        options = MapOptions.build(
            order_outputs=bool(order_outputs),
            return_exceptions=bool(return_exceptions),
            max_concurrency=max_concurrency,
            isolate_inputs=bool(isolate_inputs),
            progress=progress,
            retries=retries,
            chunk_size=chunk_size,
        )
        extra = dict(kwargs or {})
        if self._star:
            if len(iterables) != 1:
                raise TypeError("starmap takes one iterable of argument tuples")
            rows = _zip_async(iterables)
        else:
            if not iterables:
                raise TypeError("map needs at least one iterable of inputs")
            rows = _zip_async(iterables)
        inputs = _pairs(rows, extra, star=self._star)
        return run_map_async(self._fn, inputs, self._total(iterables), options)


def _pairs(rows: Any, extra: dict, *, star: bool) -> Any:
    """``(args, kwargs)`` for each row (a 1-tuple of the argument tuple for starmap)."""
    if hasattr(rows, "__anext__"):

        async def pairs() -> Any:
            async for row in rows:
                yield (tuple(row[0]) if star else tuple(row), extra)

        return pairs()
    return ((tuple(row[0]) if star else tuple(row), extra) for row in rows)


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
    image: Optional[Image] = None,
    max_inputs: int = 1,
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
    image: Optional[Image] = None,
    max_inputs: int = 1,
) -> Union[RemoteFunction[R], Callable[[Callable[..., R]], RemoteFunction[R]]]:
    """Makes a function run on the cluster; use as ``@remote`` or ``@remote(memory="2GiB", ...)``.

    - ``memory``: the container's memory budget (``"2GiB"``, ``"512MiB"`` or bytes); unset means
      the router's DEFAULT_MEMORY.
    - ``gpu``: run on a GPU worker; ``gpu_memory``: GPU memory budget (a budget implies ``gpu``).
    - ``checkpoint_id``: restore exactly this checkpoint; ``disable_optimized_execution``: never
      restore one, start the container cold.
    - ``image``: a :class:`readie.Image`, the environment the function runs in: built once per
      worker and tenant, then every call there starts from it (docs/images.md).
    - ``packages``: PEP 508 requirements installed into the container before each call (an
      ``Image(packages=...)`` installs them once instead).
    - ``imports``: import hints added to those derived from the function's code.
    - ``stream_logs``: print the call's output and readie's notes to stderr as they arrive.
    - ``pinned``: run on the version your tenant pinned (the tenant comes from your token): the
      router routes the call to the workers that hold it, and never serves another version.
      ``fn.last_call.served_version`` and ``.routing_revision`` say which served it.
    - ``shed_retries``: how many more times to try a call that was shed (its version is loading:
      :class:`readie.ShedError`), after the cluster's retry-after hint and with ``retry_of`` set.
    - ``timeout``: seconds the call may take, all its tries included; unset means no deadline
      (a map's batch may take it once per input, or per ``max_inputs`` inputs run at once).
    - ``max_inputs``: how many inputs of a map one container runs at once (threads for a sync
      function, tasks for an ``async def`` one), for I/O-bound functions; the container is still
      one slot with one memory budget.
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
        image=image,
        max_inputs=max_inputs,
    )

    def decorate(function: Callable[..., R]) -> RemoteFunction[R]:
        if not callable(function):
            raise TypeError(f"@readie.remote decorates a function, not {function!r}")
        return RemoteFunction(function, options)

    return decorate if fn is None else decorate(fn)
