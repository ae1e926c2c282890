"""A real gRPC server on loopback implementing readie.v1.ProxyService, scripted by each test.

The default script behaves like router, worker and executor in one: it reads the whole request,
unpickles ``(fn, args, kwargs)``, runs it here, and streams the envelope back in 1 MiB chunks."""

from __future__ import annotations

import io
import os
import struct
import threading
import traceback
from concurrent import futures
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import cloudpickle
import grpc

from readie._proto import call_pb2, proxy_pb2

MiB = 1024 * 1024

#: The test CA and server certificate shared with the TypeScript tests.
TLS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "support", "tls")
CA_FILE = os.path.join(TLS_DIR, "ca.pem")


@dataclass
class ReceivedCall:
    """What the server saw of one call."""

    metadata: Dict[str, str]
    kinds: List[str] = field(default_factory=list)  # "config" or "chunk", in arrival order
    chunk_sizes: List[int] = field(default_factory=list)
    config: Optional[proxy_pb2.CallConfig] = None
    payload: bytes = b""
    half_closed: bool = False
    cancelled: threading.Event = field(default_factory=threading.Event)
    started: threading.Event = field(default_factory=threading.Event)

    def read(self, requests: Iterable[proxy_pb2.RequestExecutionRequest]) -> None:
        """Consumes the client's stream to its half-close."""
        parts = []
        for request in requests:
            kind = request.WhichOneof("message")
            self.kinds.append(str(kind))
            if kind == "config":
                self.config = request.config
                self.started.set()
            elif kind == "chunk":
                self.chunk_sizes.append(len(request.chunk.data))
                parts.append(request.chunk.data)
        self.payload = b"".join(parts)
        self.half_closed = True

    def ids(self, **overrides: str) -> call_pb2.CallIds:
        """The IDs an answer repeats: this call's, placed on worker-1 / container-1."""
        assert self.config is not None
        values = dict(
            request_id=self.config.request_id,
            session_id=self.config.session_id,
            worker_id="worker-1",
            container_id="container-1",
            checkpoint_id="ckpt-numpy",
        )
        values.update(overrides)
        return call_pb2.CallIds(**values)


Script = Callable[[ReceivedCall, Iterator[proxy_pb2.RequestExecutionRequest], grpc.ServicerContext], Iterable[proxy_pb2.RequestExecutionResponse]]


def envelope_of(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Tuple[Dict[str, Any], str]:
    """Runs a call like the executor would: the envelope and the captured stdout."""
    stdout = io.StringIO()
    try:
        with redirect_stdout(stdout):
            value = fn(*args, **kwargs)
        return {"ok": True, "value": value}, stdout.getvalue()
    except Exception as error:  # noqa: BLE001 - the user's exception is data
        return {
            "ok": False,
            "error": {
                "type": type(error).__name__,
                "module": type(error).__module__,
                "message": str(error),
                "traceback": traceback.format_exc(),
            },
            "exception": error,
        }, stdout.getvalue()


def result_answers(received: ReceivedCall, payload: bytes, **ids: str) -> Iterator[proxy_pb2.RequestExecutionResponse]:
    """A result payload as answers of at most 1 MiB."""
    for start in range(0, max(len(payload), 1), MiB):
        yield proxy_pb2.RequestExecutionResponse(
            ids=received.ids(**ids), chunk=call_pb2.PayloadChunk(data=payload[start : start + MiB])
        )


def log_answer(received: ReceivedCall, source: int, text: str) -> proxy_pb2.RequestExecutionResponse:
    """One log line answer."""
    return proxy_pb2.RequestExecutionResponse(
        ids=received.ids(), log=call_pb2.LogLine(source=source, text=text)
    )


def batch_parts(payload: bytes) -> List[bytes]:
    """The parts of a batch payload: the function's pickle, then each input's."""
    parts, offset = [], 0
    while offset < len(payload):
        (length,) = struct.unpack_from(">I", payload, offset)
        parts.append(payload[offset + 4 : offset + 4 + length])
        offset += 4 + length
    return parts


def outcome_record(index: int, ok: bool, data: bytes, micros: int = 5) -> bytes:
    """One outcome record holding a whole envelope (the executor's layout)."""
    return struct.pack(">IBII", index, (1 if ok else 0) | 2, micros, len(data)) + data


def batch_answers(received: ReceivedCall, micros: int = 5) -> Iterator[proxy_pb2.RequestExecutionResponse]:
    """Runs a batch here, input by input: each outcome in its own chunk, its lines tagged, each
    saying its input took ``micros``."""
    parts = batch_parts(received.payload)
    fn = cloudpickle.loads(parts[0])
    for index, part in enumerate(parts[1:]):
        args, kwargs = cloudpickle.loads(part)
        envelope, stdout = envelope_of(fn, args, kwargs)
        for line in stdout.splitlines():
            yield proxy_pb2.RequestExecutionResponse(
                ids=received.ids(), log=call_pb2.LogLine(source=call_pb2.LOG_SOURCE_STDOUT, text=line, input=index)
            )
        record = outcome_record(index, envelope["ok"], cloudpickle.dumps(envelope), micros)
        yield proxy_pb2.RequestExecutionResponse(ids=received.ids(), chunk=call_pb2.PayloadChunk(data=record))


def run_locally(received: ReceivedCall, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[proxy_pb2.RequestExecutionResponse]:
    """The default script: executes the call here and answers like a worker would."""
    received.read(requests)
    assert received.config is not None
    if received.config.inputs > 0:
        yield from batch_answers(received)
        return
    fn, args, kwargs = cloudpickle.loads(received.payload)
    envelope, stdout = envelope_of(fn, args, kwargs)
    for line in stdout.splitlines():
        yield log_answer(received, call_pb2.LOG_SOURCE_STDOUT, line)
    yield from result_answers(received, cloudpickle.dumps(envelope))


def wait_for_cancel(received: ReceivedCall, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[proxy_pb2.RequestExecutionResponse]:
    """A call that never ends: reads the request, says so, and waits until the client cancels.

    A cancel can come while the request is still being read (the client is interrupted once the
    config arrived, before its half-close): the read then fails, and is a cancel all the same."""
    try:
        received.read(requests)
        yield log_answer(received, call_pb2.LOG_SOURCE_SYSTEM, "running forever")
        while context.is_active():
            threading.Event().wait(0.01)
    finally:
        if not context.is_active():
            received.cancelled.set()


class FakeProxy:
    """The server: ``script`` answers each call; ``calls`` records them."""

    def __init__(self, tls: bool = False) -> None:
        self.script: Script = run_locally
        self.calls: List[ReceivedCall] = []
        # A thread per call at once: a map of 8 slots may have two calls of each on the server
        # (the next one waiting for its session's turn), which fewer threads would serialize.
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        handler = grpc.method_handlers_generic_handler(
            "readie.v1.ProxyService",
            {
                "RequestExecution": grpc.stream_stream_rpc_method_handler(
                    self._handle,
                    request_deserializer=proxy_pb2.RequestExecutionRequest.FromString,
                    response_serializer=proxy_pb2.RequestExecutionResponse.SerializeToString,
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        if tls:
            with open(os.path.join(TLS_DIR, "server-key.pem"), "rb") as key, open(os.path.join(TLS_DIR, "server.pem"), "rb") as cert:
                credentials = grpc.ssl_server_credentials([(key.read(), cert.read())])
            self.port = self._server.add_secure_port("127.0.0.1:0", credentials)
        else:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self._server.start()

    def _handle(self, requests: Iterator[Any], context: grpc.ServicerContext) -> Iterable[Any]:
        received = ReceivedCall(metadata={key: value for key, value in context.invocation_metadata()})
        self.calls.append(received)
        return self.script(received, requests, context)

    def last(self, timeout: float = 5.0) -> ReceivedCall:
        """The most recent call, once its config arrived."""
        deadline = threading.Event()
        for _ in range(int(timeout * 100)):
            if self.calls and self.calls[-1].started.is_set():
                return self.calls[-1]
            deadline.wait(0.01)
        raise AssertionError("no call reached the server")

    def stop(self) -> None:
        self._server.stop(grace=None)


def first_maps(namespace: dict) -> None:
    """Makes each test's maps the first of their functions: what an earlier test's maps measured
    of the inputs (which a later map of the function starts from) is forgotten."""
    from readie._remote import RemoteFunction

    for value in namespace.values():
        if isinstance(value, RemoteFunction):
            value._input_times = None
