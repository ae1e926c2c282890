"""One remote call end to end: pack, stream, read answers, map failures; sync and asyncio.

A pinned call that is shed (RESOURCE_EXHAUSTED with a retry-after hint) is tried again after the
hint, with a new request ID and ``retry_of`` naming the first try, so it keeps the version the
first try resolved to; up to ``shed_retries`` more tries, and never past the call's deadline. A call
refused before it was sent (a standby router's refusal, a router that cannot be reached) moves
along the client's router list (:mod:`readie._routers`) with the same request ID, since nothing of
it ran."""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
import time
from dataclasses import replace
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional

import cloudpickle
import grpc

from readie._connection import ConnectionSettings, aio_channel_for, channel_for
from readie._envelope import decode_cloudpickle
from readie._ids import CallInfo, new_request_id
from readie._proto import proxy_pb2
from readie._wire import METHOD, AnswerReader, LogSink, request_messages
from readie._error_hints import AMBIGUOUS, speaks_tls, transport_problem_of
from readie._loop import on_loop, on_loop_thread
from readie._routers import RouterMoves
from readie._status_details import retry_after
from readie.errors import CallCancelledError, ReadieError, RemoteTimeoutError, ShedError, error_for_status

_last_call: "ContextVar[Optional[CallInfo]]" = ContextVar("readie_last_call", default=None)


def last_call() -> Optional[CallInfo]:
    """IDs of the most recent call made in this thread or task: where it ran, which checkpoint."""
    return _last_call.get()


@dataclass
class PreparedCall:
    """A call ready to go: where to, its config, its payload, and who wants to hear of it."""

    settings: ConnectionSettings
    config: proxy_pb2.CallConfig
    payload: bytes
    on_log: Optional[LogSink]
    on_done: Callable[[CallInfo], None]
    #: More tries after a shed, at most.
    shed_retries: int = 0
    #: When the call (all its tries) must be over, on ``time.monotonic()``; None: no deadline.
    deadline: Optional[float] = None

    def info(self) -> CallInfo:
        return CallInfo(
            request_id=self.config.request_id,
            session_id=self.config.session_id,
            retry_of=self.config.retry_of,
        )

    def timeout(self) -> Optional[float]:
        """The gRPC timeout of the next try, in seconds (None: none)."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RemoteTimeoutError("the call's timeout passed before it could be tried again")
        return left

    def retry_after_shed(self, shed: ShedError, tries: int) -> Optional["PreparedCall"]:
        """The next try after a shed, or None when the tries or the deadline are spent."""
        if tries > self.shed_retries:
            return None
        if self.deadline is not None and time.monotonic() + shed.retry_after >= self.deadline:
            return None
        config = proxy_pb2.CallConfig()
        config.CopyFrom(self.config)
        config.request_id = new_request_id()
        # Every try names the first: its resolution is the one the log holds for all of them.
        config.retry_of = self.config.retry_of or self.config.request_id
        return replace(self, config=config)


# cloudpickle sends functions of importable modules by reference, which the sandbox could not
# import for a user's own script or module. While a call is packed, its function's module (when
# not an installed package) is registered to travel by value, counted so concurrent calls agree.
_by_value_lock = threading.Lock()
_by_value_users: "Counter[str]" = Counter()
_INSTALLED = ("site-packages", "dist-packages")


def _travels_by_reference(module_name: str) -> bool:
    module = sys.modules.get(module_name)
    if module is None or module_name == "__main__" or module_name in sys.stdlib_module_names:
        return True
    path = getattr(module, "__file__", None) or ""
    return any(part in path for part in _INSTALLED) or module_name.split(".")[0] == "readie"


@contextmanager
def pickled_by_value(module_name: Optional[str]) -> Iterator[None]:
    """While inside, the function's own module ``module_name`` (unless installed, ``__main__`` or
    the standard library) pickles by value: the sandbox could not import it."""
    if not module_name or _travels_by_reference(module_name):
        yield
        return
    module = sys.modules[module_name]
    with _by_value_lock:
        if _by_value_users[module_name] == 0:
            cloudpickle.register_pickle_by_value(module)
        _by_value_users[module_name] += 1
    try:
        yield
    finally:
        with _by_value_lock:
            _by_value_users[module_name] -= 1
            if _by_value_users[module_name] == 0:
                del _by_value_users[module_name]
                cloudpickle.unregister_pickle_by_value(module)


def pack_call(fn: Callable[..., Any], args: tuple, kwargs: dict) -> bytes:
    """The ``cloudpickle`` payload of a call: ``cloudpickle.dumps((fn, args, kwargs))``."""
    with pickled_by_value(getattr(fn, "__module__", None)):
        return cloudpickle.dumps((fn, args, kwargs))


def _rpc(channel: Any) -> Any:
    return channel.stream_stream(
        METHOD,
        request_serializer=proxy_pb2.RequestExecutionRequest.SerializeToString,
        response_deserializer=proxy_pb2.RequestExecutionResponse.FromString,
    )


def _finish(prepared: PreparedCall, info: CallInfo) -> None:
    _last_call.set(info)
    prepared.on_done(info)


def _trailers(error: Any) -> Any:
    try:
        return error.trailing_metadata()
    except Exception:  # noqa: BLE001 - an error that is no call carries none
        return None


def _failure(error: Any, prepared: PreparedCall, info: CallInfo) -> Exception:
    return failure_of(error, prepared.settings, info)


def rpc_of(channel: Any) -> Any:
    """The ``RequestExecution`` method on ``channel`` (sync or asyncio)."""
    return _rpc(channel)


def failure_of(error: Any, settings: ConnectionSettings, info: CallInfo) -> Any:
    """The readie error for a failed RPC: its code, details, ``readie-*`` trailers, a shed's
    retry-after hint and, for a plaintext dial that failed without saying why, whether the address
    speaks TLS."""
    code, details = error.code(), error.details() or ""
    metadata = _trailers(error)
    trailers = {}
    for key, value in metadata or ():
        if key.startswith("readie-"):
            trailers[key] = value.decode() if isinstance(value, bytes) else str(value)
    tls_found = False
    if code == grpc.StatusCode.UNAVAILABLE and settings.insecure:
        if transport_problem_of(details) in AMBIGUOUS:
            tls_found = speaks_tls(settings.address)
    return error_for_status(
        code,
        details,
        address=settings.address,
        call=info,
        trailers=trailers,
        insecure=settings.insecure,
        tls_found=tls_found,
        retry_after=retry_after(metadata) if code == grpc.StatusCode.RESOURCE_EXHAUSTED else None,
    )


def _run_once(prepared: PreparedCall, on_call: Optional[Callable[[Any], None]] = None) -> Any:
    reader = AnswerReader(prepared.info(), prepared.on_log)
    call = _rpc(channel_for(prepared.settings))(
        request_messages(prepared.config, prepared.payload),
        metadata=prepared.settings.metadata(),
        timeout=prepared.timeout(),
    )
    try:
        # Inside the try: an interrupt from here on cancels the call on the cluster.
        if on_call is not None:
            on_call(call)
        for answer in call:
            reader.feed(answer)
    except grpc.RpcError as error:
        reader.info = reader.info.with_trailers(_trailers(error))
        raise _failure(error, prepared, reader.info) from None
    except BaseException:
        call.cancel()
        raise
    finally:
        _finish(prepared, reader.info)
    return decode_cloudpickle(reader.payload(), call=reader.info)


async def _run_once_async(prepared: PreparedCall) -> Any:
    reader = AnswerReader(prepared.info(), prepared.on_log)
    call = _rpc(await aio_channel_for(prepared.settings))(
        request_messages(prepared.config, prepared.payload),
        metadata=prepared.settings.metadata(),
        timeout=prepared.timeout(),
    )
    try:
        async for answer in call:
            reader.feed(answer)
    except grpc.aio.AioRpcError as error:
        reader.info = reader.info.with_trailers(_trailers(error))
        raise _failure(error, prepared, reader.info) from None
    except BaseException:
        call.cancel()
        raise
    finally:
        _finish(prepared, reader.info)
    return decode_cloudpickle(reader.payload(), call=reader.info)


#: How long an interrupted blocking call waits for its cancellation to reach the cluster (s).
CANCEL_WAIT = 5.0


class _LoopCall:
    """A blocking call running on readie's loop, as ``on_call`` hands it out: ``cancel()`` from
    any thread cancels it (on the cluster too)."""

    def __init__(self, future: Any) -> None:
        self._future = future

    def cancel(self) -> bool:
        return self._future.cancel()


def run(prepared: PreparedCall, on_call: Optional[Callable[[Any], None]] = None) -> Any:
    """Runs the call, blocking this thread (retrying sheds); Ctrl-C cancels it on the cluster.

    The call itself runs on readie's own event loop (the asyncio channel underneath: no thread
    started per call, as the blocking gRPC stream would); on that loop's own thread (a log sink
    calling a remote function) it runs here instead. ``on_call`` receives a handle another
    thread may ``cancel()``."""
    if on_loop_thread():
        return _run_here(prepared, on_call)
    settled: List[CallInfo] = []
    done = prepared.on_done

    def on_done(info: CallInfo) -> None:
        settled.append(info)
        done(info)

    future = on_loop(run_async(replace(prepared, on_done=on_done)))
    try:
        if on_call is not None:
            on_call(_LoopCall(future))
        while True:
            try:
                # With a timeout: an interrupt that wakes no wait (a signal another thread took,
                # ``_thread.interrupt_main``) is seen within it.
                return future.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                pass
    except concurrent.futures.CancelledError:
        raise CallCancelledError("the call was cancelled by the client", call=settled[-1] if settled else prepared.info()) from None
    except BaseException:
        # Ctrl-C (or any exception here): cancel the call, and let the cancel reach the cluster.
        if future.cancel():
            concurrent.futures.wait([future], timeout=CANCEL_WAIT)
        raise
    finally:
        if settled:
            _last_call.set(settled[-1])


def _run_here(prepared: PreparedCall, on_call: Optional[Callable[[Any], None]] = None) -> Any:
    """:func:`run` on this thread, with the blocking gRPC stream."""
    attempt, tries = prepared, 0
    routers = RouterMoves(prepared.settings.addresses(), prepared.deadline)
    while True:
        try:
            return _run_once(attempt, on_call)
        except ReadieError as error:
            moved = routers.next(error, attempt.settings.address, time.monotonic())
            if moved is None:
                if not isinstance(error, ShedError):
                    raise
            else:
                time.sleep(moved[1])
                attempt = replace(attempt, settings=attempt.settings.at(moved[0]))
                continue
            shed = error
            tries += 1
            retry = attempt.retry_after_shed(shed, tries)
            if retry is None:
                raise
            time.sleep(shed.retry_after)
            attempt = retry


async def run_async(prepared: PreparedCall) -> Any:
    """Runs the call on the running event loop (retrying sheds); cancelling the task cancels it."""
    attempt, tries = prepared, 0
    routers = RouterMoves(prepared.settings.addresses(), prepared.deadline)
    while True:
        try:
            return await _run_once_async(attempt)
        except ReadieError as error:
            moved = routers.next(error, attempt.settings.address, time.monotonic())
            if moved is None:
                if not isinstance(error, ShedError):
                    raise
            else:
                await asyncio.sleep(moved[1])
                attempt = replace(attempt, settings=attempt.settings.at(moved[0]))
                continue
            shed = error
            tries += 1
            retry = attempt.retry_after_shed(shed, tries)
            if retry is None:
                raise
            await asyncio.sleep(shed.retry_after)
            attempt = retry
