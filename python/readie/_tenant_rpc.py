"""One request of the tenant service (``readie.v1.TenantService``), sync or asyncio, on the process's
channels: a request a standby router refuses (or that reaches no router) moves along the client's
router list (:mod:`readie._routers`). Below :mod:`readie._tenant` and :mod:`readie._image`."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

import grpc

from readie._connection import ConnectionSettings, aio_channel_for, channel_for
from readie._routers import RouterMoves
from readie.errors import ReadieError, error_for_status

#: How long a tenant-service request may take before the client gives up on it (seconds).
TENANT_TIMEOUT = 30.0


def status_error(error: Any, settings: ConnectionSettings) -> ReadieError:
    trailers = {}
    try:
        for key, value in error.trailing_metadata() or ():
            if key.startswith("readie-"):
                trailers[key] = value.decode() if isinstance(value, bytes) else str(value)
    except Exception:  # noqa: BLE001 - an error that is no call carries none
        pass
    return error_for_status(
        error.code(), error.details(), address=settings.address, trailers=trailers, lookup=True
    )


def unary(
    settings: ConnectionSettings,
    path: str,
    request: Any,
    serializer: Callable[[Any], bytes],
    deserializer: Callable[[bytes], Any],
) -> Any:
    moves = RouterMoves(settings.addresses(), None)
    while True:
        method = channel_for(settings).unary_unary(
            path, request_serializer=serializer, response_deserializer=deserializer
        )
        try:
            return method(request, metadata=settings.metadata(), timeout=TENANT_TIMEOUT)
        except grpc.RpcError as error:
            failure = status_error(error, settings)
        moved = moves.next(failure, settings.address, time.monotonic())
        if moved is None:
            raise failure
        time.sleep(moved[1])
        settings = settings.at(moved[0])


async def unary_async(
    settings: ConnectionSettings,
    path: str,
    request: Any,
    serializer: Callable[[Any], bytes],
    deserializer: Callable[[bytes], Any],
) -> Any:
    moves = RouterMoves(settings.addresses(), None)
    while True:
        method = (await aio_channel_for(settings)).unary_unary(
            path, request_serializer=serializer, response_deserializer=deserializer
        )
        try:
            return await method(request, metadata=settings.metadata(), timeout=TENANT_TIMEOUT)
        except grpc.aio.AioRpcError as error:
            failure = status_error(error, settings)
        moved = moves.next(failure, settings.address, time.monotonic())
        if moved is None:
            raise failure
        await asyncio.sleep(moved[1])
        settings = settings.at(moved[0])
