"""What the router tells a tenant about itself (``readie.v1.TenantService``): its usable slots
for a budget, and the end of one of its sessions. Sync and asyncio, on the process's channels.
Like calls, a request a standby router refuses (or that reaches no router) moves along the
client's router list (:mod:`readie._routers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import grpc

from readie._connection import ConnectionSettings, channel_for
from readie._proto import history_pb2, tenant_pb2
from readie._tenant_rpc import TENANT_TIMEOUT
from readie._tenant_rpc import status_error as _error
from readie._tenant_rpc import unary as _unary
from readie._tenant_rpc import unary_async as _unary_async
from readie._wire import CallDemand

#: The gRPC methods of the tenant service.
SLOTS_METHOD = "/readie.v1.TenantService/Slots"
OWN_CALLS_METHOD = "/readie.v1.TenantService/OwnCalls"
OWN_CALL_METHOD = "/readie.v1.TenantService/OwnCall"
OWN_CALL_LOGS_METHOD = "/readie.v1.TenantService/OwnCallLogs"
END_SESSION_METHOD = "/readie.v1.TenantService/EndSession"



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


def usable_slots(settings: ConnectionSettings, demand: CallDemand) -> int:
    """How many more calls of ``demand``'s budget the router would place now for this tenant (for a
    pinned demand, on its pinned version's subset only)."""
    answer = _unary(
        settings,
        SLOTS_METHOD,
        _slots_request(demand),
        tenant_pb2.SlotsRequest.SerializeToString,
        tenant_pb2.SlotsResponse.FromString,
    )
    return int(answer.slots)


@dataclass(frozen=True)
class Room:
    """What the router says a map may use now: its free ``slots`` for the budget, the calls its
    admission queue keeps waiting beside them (``queued``; 0 when it does not queue), and whether
    other tenants' calls wait in that queue now (``others_waiting``)."""

    slots: int
    queued: int = 0
    others_waiting: bool = False


def _room(answer: tenant_pb2.SlotsResponse) -> Room:
    return Room(
        slots=int(answer.slots),
        queued=int(answer.max_queued) if answer.queue_timeout_ms > 0 else 0,
        others_waiting=bool(answer.others_waiting),
    )


def map_room(settings: ConnectionSettings, demand: CallDemand) -> Room:
    """What a map of ``demand``'s budget may use now (:class:`Room`)."""
    return _room(
        _unary(
            settings,
            SLOTS_METHOD,
            _slots_request(demand),
            tenant_pb2.SlotsRequest.SerializeToString,
            tenant_pb2.SlotsResponse.FromString,
        )
    )


async def map_room_async(settings: ConnectionSettings, demand: CallDemand) -> Room:
    """:func:`map_room` on the running event loop."""
    return _room(
        await _unary_async(
            settings,
            SLOTS_METHOD,
            _slots_request(demand),
            tenant_pb2.SlotsRequest.SerializeToString,
            tenant_pb2.SlotsResponse.FromString,
        )
    )


async def usable_slots_async(settings: ConnectionSettings, demand: CallDemand) -> int:
    """:func:`usable_slots` on the running event loop."""
    answer = await _unary_async(
        settings,
        SLOTS_METHOD,
        _slots_request(demand),
        tenant_pb2.SlotsRequest.SerializeToString,
        tenant_pb2.SlotsResponse.FromString,
    )
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
    answer = _unary(
        settings,
        END_SESSION_METHOD,
        tenant_pb2.EndSessionRequest(session_id=session_id),
        tenant_pb2.EndSessionRequest.SerializeToString,
        tenant_pb2.EndSessionResponse.FromString,
    )
    return _session_end(answer)


async def end_session_async(settings: ConnectionSettings, session_id: str) -> SessionEnd:
    """:func:`end_session` on the running event loop."""
    answer = await _unary_async(
        settings,
        END_SESSION_METHOD,
        tenant_pb2.EndSessionRequest(session_id=session_id),
        tenant_pb2.EndSessionRequest.SerializeToString,
        tenant_pb2.EndSessionResponse.FromString,
    )
    return _session_end(answer)


def _since_ms(since: Any) -> int:
    if since is None:
        return 0
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        return int(since * 1000)
    text = str(since).strip()
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "", 1).isdigit():
            return int(float(text[: -len(unit)]) * units[unit])
    raise ValueError(f"since={since!r}: a duration needs a unit (10m, 2h) or a number of seconds")


def own_calls(
    settings: ConnectionSettings,
    *,
    since: Any = None,
    failed: bool = False,
    function: str = "",
    limit: int = 0,
) -> list:
    """This tenant's recent calls, newest first (``readie.v1.CallView`` messages)."""
    request = tenant_pb2.OwnCallsRequest(
        filter=history_pb2.CallFilter(
            since_ms=_since_ms(since), failed=failed, function=function, limit=limit
        )
    )
    answer = _unary(
        settings,
        OWN_CALLS_METHOD,
        request,
        tenant_pb2.OwnCallsRequest.SerializeToString,
        tenant_pb2.OwnCallsResponse.FromString,
    )
    return list(answer.calls)


def own_call(settings: ConnectionSettings, request_id: str) -> Any:
    """One of this tenant's calls (a ``readie.v1.CallView``); NOT_FOUND when the history has none."""
    answer = _unary(
        settings,
        OWN_CALL_METHOD,
        tenant_pb2.OwnCallRequest(request_id=request_id),
        tenant_pb2.OwnCallRequest.SerializeToString,
        tenant_pb2.OwnCallResponse.FromString,
    )
    return answer.call


@dataclass(frozen=True)
class OutputLine:
    """One line of a call's output, as the worker that ran it kept it."""

    at: str
    source: str
    text: str


_SOURCES = {
    1: "stdout",
    2: "stderr",
    3: "readie",
}


def own_call_logs(settings: ConnectionSettings, request_id: str, follow: bool = False) -> list:
    """One of this tenant's calls' output, fetched through the router from the worker that ran
    it (with ``follow``, until the call ends): a list of :class:`OutputLine`."""
    method = channel_for(settings).unary_stream(
        OWN_CALL_LOGS_METHOD,
        request_serializer=tenant_pb2.OwnCallLogsRequest.SerializeToString,
        response_deserializer=tenant_pb2.OwnCallLogsResponse.FromString,
    )
    lines = []
    try:
        for message in method(
            tenant_pb2.OwnCallLogsRequest(request_id=request_id, follow=follow),
            metadata=settings.metadata(),
            timeout=None if follow else TENANT_TIMEOUT,
        ):
            for line in message.lines:
                lines.append(OutputLine(line.at, _SOURCES.get(line.source, "output"), line.text))
    except grpc.RpcError as error:
        raise _error(error, settings) from None
    return lines
