"""What the router tells a tenant about itself (``readie.v1.TenantService``): its usable slots
for a budget, and the end of one of its sessions. Sync and asyncio, on the process's channels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import grpc

from readie._connection import ConnectionSettings, aio_channel_for, channel_for
from readie._proto import tenant_pb2
from readie._wire import CallDemand
from readie.errors import ReadieError, error_for_status

#: The gRPC methods of the tenant service.
SLOTS_METHOD = "/readie.v1.TenantService/Slots"
END_SESSION_METHOD = "/readie.v1.TenantService/EndSession"

#: How long a tenant-service request may take before the client gives up on it (seconds).
TENANT_TIMEOUT = 30.0


@dataclass(frozen=True)
class SessionEnd:
    """What ending a session did: whether this request ended it, and whether the worker confirmed
    its container destroyed."""

    ended: bool
    worker_id: str = ""
    container_id: str = ""
    container_removed: bool = False


def _slots_request(demand: CallDemand) -> tenant_pb2.SlotsRequest:
    request = tenant_pb2.SlotsRequest(
        gpu_memory=demand.gpu_memory or 0, gpu=demand.gpu, pinned=demand.pinned
    )
    if demand.memory is not None:
        request.memory = demand.memory
    return request


def _error(error: grpc.RpcError, settings: ConnectionSettings) -> ReadieError:
    return error_for_status(error.code(), error.details(), address=settings.address)


def usable_slots(settings: ConnectionSettings, demand: CallDemand) -> int:
    """How many more calls of ``demand``'s budget the router would place now for this tenant (for a
    pinned demand, on its pinned version's subset only)."""
    method = channel_for(settings).unary_unary(
        SLOTS_METHOD,
        request_serializer=tenant_pb2.SlotsRequest.SerializeToString,
        response_deserializer=tenant_pb2.SlotsResponse.FromString,
    )
    try:
        answer = method(_slots_request(demand), metadata=settings.metadata(), timeout=TENANT_TIMEOUT)
    except grpc.RpcError as error:
        raise _error(error, settings) from None
    return int(answer.slots)


async def usable_slots_async(settings: ConnectionSettings, demand: CallDemand) -> int:
    """:func:`usable_slots` on the running event loop."""
    method = (await aio_channel_for(settings)).unary_unary(
        SLOTS_METHOD,
        request_serializer=tenant_pb2.SlotsRequest.SerializeToString,
        response_deserializer=tenant_pb2.SlotsResponse.FromString,
    )
    try:
        answer = await method(
            _slots_request(demand), metadata=settings.metadata(), timeout=TENANT_TIMEOUT
        )
    except grpc.aio.AioRpcError as error:
        raise _error(error, settings) from None
    return int(answer.slots)


def _session_end(answer: Optional[tenant_pb2.EndSessionResponse]) -> SessionEnd:
    if answer is None:
        return SessionEnd(ended=False)
    return SessionEnd(
        ended=answer.ended,
        worker_id=answer.worker_id,
        container_id=answer.container_id,
        container_removed=answer.container_removed,
    )


def end_session(settings: ConnectionSettings, session_id: str) -> SessionEnd:
    """Ends ``session_id`` on the cluster: its container is destroyed now, its calls refused."""
    method = channel_for(settings).unary_unary(
        END_SESSION_METHOD,
        request_serializer=tenant_pb2.EndSessionRequest.SerializeToString,
        response_deserializer=tenant_pb2.EndSessionResponse.FromString,
    )
    try:
        answer = method(
            tenant_pb2.EndSessionRequest(session_id=session_id),
            metadata=settings.metadata(),
            timeout=TENANT_TIMEOUT,
        )
    except grpc.RpcError as error:
        raise _error(error, settings) from None
    return _session_end(answer)


async def end_session_async(settings: ConnectionSettings, session_id: str) -> SessionEnd:
    """:func:`end_session` on the running event loop."""
    method = (await aio_channel_for(settings)).unary_unary(
        END_SESSION_METHOD,
        request_serializer=tenant_pb2.EndSessionRequest.SerializeToString,
        response_deserializer=tenant_pb2.EndSessionResponse.FromString,
    )
    try:
        answer = await method(
            tenant_pb2.EndSessionRequest(session_id=session_id),
            metadata=settings.metadata(),
            timeout=TENANT_TIMEOUT,
        )
    except grpc.aio.AioRpcError as error:
        raise _error(error, settings) from None
    return _session_end(answer)
