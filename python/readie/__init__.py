"""readie: run Python functions on a remote cluster as if they were local.

    import readie

    @readie.remote(memory="2GiB", packages=["tqdm"])
    def add(a, b):
        return a + b

    add(2, 3)              # runs remotely, returns 5
    await add.aio(2, 3)    # the same on an asyncio channel
    with readie.Session():
        ...                # calls share one container and its Python state
    list(add.map([1, 2], [3, 4]))   # [4, 6]: many calls over the whole cluster
    add.spawn(2, 3).get()           # 5, from a call run in the background

Configure with READIE_ADDRESS, READIE_INSECURE, READIE_CA_FILE and READIE_AUTH_TOKEN, or
:func:`configure`. See docs/clients.md.
"""

import os as _os

# grpc's C core logs connection failures (TLS handshakes, resets) to stderr on its own; a readie
# error already says what happened and what to do. GRPC_VERBOSITY=INFO or DEBUG brings them back.
_os.environ.setdefault("GRPC_VERBOSITY", "NONE")

from readie._call import last_call  # noqa: E402
from readie._connection import aclose_channels, close_channels, configure
from readie._ids import CallInfo
from readie._image import Image, ImageStatus
from readie._spawn import FunctionCall, gather
from readie._remote import RemoteFunction, remote
from readie._session import Session, current_session
from readie._history import call_record, calls, logs
from readie.errors import (
    AuthenticationError,
    CallCancelledError,
    ClusterUnavailableError,
    ConfigurationError,
    ConflictError,
    InternalServerError,
    InvalidRequestError,
    PermissionDeniedError,
    PreconditionError,
    ProtocolError,
    ReadieError,
    RemoteExecutionError,
    RemoteOutOfMemoryError,
    RemoteTimeoutError,
    ResourceExhaustedError,
    NotFoundError,
    SessionExpiredError,
    NeverFitsError,
    ShedError,
    UnsupportedError,
)

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "CallCancelledError",
    "CallInfo",
    "Image",
    "ImageStatus",
    "ClusterUnavailableError",
    "ConfigurationError",
    "ConflictError",
    "FunctionCall",
    "InternalServerError",
    "InvalidRequestError",
    "PermissionDeniedError",
    "PreconditionError",
    "ProtocolError",
    "ReadieError",
    "RemoteExecutionError",
    "RemoteFunction",
    "RemoteOutOfMemoryError",
    "RemoteTimeoutError",
    "ResourceExhaustedError",
    "Session",
    "NotFoundError",
    "SessionExpiredError",
    "NeverFitsError",
    "ShedError",
    "UnsupportedError",
    "aclose_channels",
    "call_record",
    "calls",
    "logs",
    "close_channels",
    "configure",
    "current_session",
    "gather",
    "last_call",
    "remote",
]
