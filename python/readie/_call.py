"""One remote call end to end: pack, stream, read answers, map failures; sync and asyncio."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import cloudpickle
import grpc

from readie._connection import ConnectionSettings, aio_channel_for, channel_for
from readie._envelope import decode_cloudpickle
from readie._ids import CallInfo
from readie._proto import proxy_pb2
from readie._wire import METHOD, AnswerReader, LogSink, request_messages
from readie._error_hints import speaks_tls, transport_problem_of
from readie.errors import RETRY_AFTER_TRAILER, error_for_status

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

    def info(self) -> CallInfo:
        return CallInfo(request_id=self.config.request_id, session_id=self.config.session_id)


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
def _module_by_value(module_name: Optional[str]) -> Iterator[None]:
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
    with _module_by_value(getattr(fn, "__module__", None)):
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


def _failure(error: Any, prepared: PreparedCall, info: CallInfo) -> Exception:
    """The readie error for a failed RPC: its code, details, ``readie-*`` trailers and, for a
    plaintext dial that failed without saying why, whether the address speaks TLS."""
    code, details = error.code(), error.details() or ""
    trailers = {}
    for key, value in error.trailing_metadata() or ():
        if key.startswith("readie-") or key == RETRY_AFTER_TRAILER:
            trailers[key] = value.decode() if isinstance(value, bytes) else str(value)
    settings = prepared.settings
    tls_found = False
    if code == grpc.StatusCode.UNAVAILABLE and settings.insecure:
        if transport_problem_of(details) in ("connection-failed", "http1"):
            tls_found = speaks_tls(settings.address)
    return error_for_status(
        code,
        details,
        address=settings.address,
        call=info,
        trailers=trailers,
        insecure=settings.insecure,
        tls_found=tls_found,
    )


def run(prepared: PreparedCall, on_call: Optional[Callable[[Any], None]] = None) -> Any:
    """Runs the call on this thread; Ctrl-C (or any exception) cancels it on the cluster.

    ``on_call`` receives the RPC once it is open, so another thread may ``cancel()`` it."""
    reader = AnswerReader(prepared.info(), prepared.on_log)
    call = _rpc(channel_for(prepared.settings))(
        request_messages(prepared.config, prepared.payload),
        metadata=prepared.settings.metadata(),
    )
    if on_call is not None:
        on_call(call)
    try:
        for answer in call:
            reader.feed(answer)
    except grpc.RpcError as error:
        raise _failure(error, prepared, reader.info) from None
    except BaseException:
        call.cancel()
        raise
    finally:
        _finish(prepared, reader.info)
    return decode_cloudpickle(reader.payload(), call=reader.info)


async def run_async(prepared: PreparedCall) -> Any:
    """Runs the call on the running event loop; cancelling the task cancels it on the cluster."""
    reader = AnswerReader(prepared.info(), prepared.on_log)
    call = _rpc(await aio_channel_for(prepared.settings))(
        request_messages(prepared.config, prepared.payload),
        metadata=prepared.settings.metadata(),
    )
    try:
        async for answer in call:
            reader.feed(answer)
    except grpc.aio.AioRpcError as error:
        raise _failure(error, prepared, reader.info) from None
    except BaseException:
        call.cancel()
        raise
    finally:
        _finish(prepared, reader.info)
    return decode_cloudpickle(reader.payload(), call=reader.info)
