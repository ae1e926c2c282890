"""The call on the wire: the config message, payload chunks, and reading the answers back."""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, List, Optional, Sequence

from readie._ids import CallInfo
from readie._image import Image
from readie._proto import call_pb2, proxy_pb2
from readie.errors import ProtocolError

#: The largest payload chunk the wire contract allows (1 MiB).
CHUNK_SIZE = 1024 * 1024

#: The gRPC method of every call.
METHOD = "/readie.v1.ProxyService/RequestExecution"


def iter_chunks(payload: bytes, chunk_size: int = CHUNK_SIZE) -> Iterator[memoryview]:
    """Slices ``payload`` into pieces of at most ``chunk_size`` bytes, in order, without copying.

    An empty payload has no chunks."""
    if chunk_size < 1:
        raise ValueError("chunk_size must be positive")
    view = memoryview(payload)
    for start in range(0, len(view), chunk_size):
        yield view[start : start + chunk_size]


@dataclass(frozen=True)
class CallDemand:
    """What a call asks of the cluster, in wire units (bytes): the decorator's options."""

    memory: Optional[int] = None
    gpu: bool = False
    gpu_memory: Optional[int] = None
    checkpoint_id: str = ""
    disable_optimized_execution: bool = False
    packages: Sequence[str] = field(default_factory=tuple)
    #: Run on the tenant's pinned version (the tenant comes from the token).
    pinned: bool = False
    #: The image the function runs in (readie.Image), or None.
    image: Optional[Image] = None


def build_config(
    request_id: str,
    demand: CallDemand,
    imports: Sequence[str],
    *,
    session_id: str = "",
    python_version: Optional[str] = None,
    retry_of: str = "",
    function: str = "",
) -> proxy_pb2.CallConfig:
    """The first message's config: IDs, hints, budgets, packages and this client's Python."""
    config = proxy_pb2.CallConfig(
        request_id=request_id,
        session_id=session_id,
        imports=list(imports),
        gpu=demand.gpu,
        disable_optimized_execution=demand.disable_optimized_execution,
        packages=list(demand.packages),
        checkpoint_id=demand.checkpoint_id,
        python_version=python_version or platform.python_version(),
        format=call_pb2.PAYLOAD_FORMAT_CLOUDPICKLE,
        pinned=demand.pinned,
        retry_of=retry_of,
        function=function[:256],
    )
    # Optional fields: absent means "the router's default", which is not the same as zero.
    if demand.image is not None:
        config.image.packages.extend(demand.image.packages)
        config.image.imports.extend(demand.image.imports)
        for name, value in demand.image.env:
            config.image.env[name] = value
    if demand.memory is not None:
        config.memory = demand.memory
    if demand.gpu_memory is not None:
        config.gpu_memory = demand.gpu_memory
    return config


def request_messages(
    config: proxy_pb2.CallConfig, payload: bytes
) -> Iterator[proxy_pb2.RequestExecutionRequest]:
    """The client's side of the stream: the config alone, then the payload in chunks."""
    yield proxy_pb2.RequestExecutionRequest(config=config)
    for piece in iter_chunks(payload):
        yield proxy_pb2.RequestExecutionRequest(chunk=call_pb2.PayloadChunk(data=bytes(piece)))


LogSink = Callable[[call_pb2.LogLine], None]


class AnswerReader:
    """Folds a call's answers: IDs into :attr:`info`, log lines to ``on_log``, result chunks into
    the result payload."""

    def __init__(self, info: CallInfo, on_log: Optional[LogSink] = None) -> None:
        self.info = info
        self._on_log = on_log
        self._chunks: List[bytes] = []
        self._has_result = False

    def feed(self, answer: proxy_pb2.RequestExecutionResponse) -> None:
        """Takes one answer in."""
        if answer.HasField("ids"):
            self.info = self.info.updated(answer.ids)
        kind = answer.WhichOneof("message")
        if kind == "chunk":
            self._has_result = True
            self._chunks.append(answer.chunk.data)
        elif kind == "log":
            if self._on_log is not None:
                self._on_log(answer.log)
        # An answer with neither only carries IDs.

    def payload(self) -> bytes:
        """The result payload, once the stream ended well; a stream without one is an error."""
        if not self._has_result:
            raise ProtocolError(
                "the cluster ended the call without a result", call=self.info
            )
        return b"".join(self._chunks)


def function_name(fn: Any) -> str:
    """The name the call history shows for ``fn``: ``module.qualname`` (printable, at most 256)."""
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or ""
    full = f"{module}.{name}" if module else str(name)
    return "".join(ch for ch in full if ch.isprintable())[:256]
