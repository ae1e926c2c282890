"""The errors a remote call raises: one class per family of gRPC status, and the user's own
exception as :class:`RemoteExecutionError`. Every one is a :class:`ReadieError`."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import grpc

from readie._error_hints import (
    cause_of,
    hint_for,
    missing_module_hint,
    never_sent,
    never_started,
    with_client_source,
)
from readie._ids import CallInfo


class ReadieError(Exception):
    """Base of every readie error. ``code`` is the gRPC status (``None`` for local errors),
    ``details`` the server's message and ``call`` the IDs of the call as far as they were known."""

    code: Optional[grpc.StatusCode] = None

    def __init__(
        self,
        message: str,
        *,
        code: Optional[grpc.StatusCode] = None,
        details: str = "",
        call: Optional[CallInfo] = None,
        not_started: bool = False,
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.details = details
        self.call = call
        #: True when the cluster said the function never started (``readie-not-started``): such a
        #: call can be retried as it is. False when it may have run, or the error is local.
        self.not_started = not_started
        #: Seconds the cluster asked the client to wait before retrying (a shed's ``retry-after-ms``
        #: trailer or RetryInfo), else ``None``.
        self.retry_after: Optional[float] = None
        #: True when a standby router refused the call (``readie-standby``): another router leads.
        self.standby = False
        #: The leading router's address a standby named (``readie-leader``), else ``None``.
        self.leader: Optional[str] = None
        #: True when the call waited the router's ``QUEUE_TIMEOUT`` in its admission queue and
        #: left it unplaced (``readie-queued``): the router waited for room already, so the client
        #: does not retry it by itself.
        self.queue_timed_out = False
        #: In a map, the index of the input whose call failed (0 is the first); else ``None``.
        self.input_index: Optional[int] = None


class ConfigurationError(ReadieError):
    """The client is not configured to reach a cluster (no address, unreadable CA file, ...)."""


class ProtocolError(ReadieError):
    """The cluster answered something the client cannot read: no result, a malformed envelope."""


class RemoteExecutionError(ReadieError):
    """The function raised on the worker. ``remote_type``, ``remote_module`` and
    ``remote_message`` describe the exception; ``remote_traceback`` is the remote traceback text;
    ``exception`` is the exception object itself when the worker could pickle it, else ``None``."""

    def __init__(
        self,
        remote_type: str,
        remote_message: str,
        remote_traceback: str,
        *,
        remote_module: str = "",
        exception: Optional[BaseException] = None,
        call: Optional[CallInfo] = None,
    ) -> None:
        qualified = remote_type if remote_module in ("", "builtins") else f"{remote_module}.{remote_type}"
        message = f"{qualified}: {remote_message}" if remote_message else qualified
        missing = missing_module_hint(remote_type, remote_module, remote_message)
        if missing:
            message += f"; {missing}"
        remote_traceback = with_client_source(remote_traceback) if remote_traceback else remote_traceback
        if remote_traceback:
            message += "\n\nRemote traceback:\n" + remote_traceback.rstrip("\n")
        super().__init__(message, details=remote_message, call=call)
        self.remote_type = remote_type
        self.remote_module = remote_module
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        self.exception = exception


class CallCancelledError(ReadieError):
    """CANCELLED: the call was cancelled by the cluster (a local cancel raises
    ``KeyboardInterrupt`` or ``asyncio.CancelledError`` as usual)."""

    code = grpc.StatusCode.CANCELLED


class InternalServerError(ReadieError):
    """UNKNOWN, INTERNAL or DATA_LOSS: the cluster failed on its side; the call may be retried."""

    code = grpc.StatusCode.INTERNAL


class InvalidRequestError(ReadieError):
    """INVALID_ARGUMENT or OUT_OF_RANGE: the cluster refused the call as malformed (a bad package
    requirement, an unknown checkpoint, a payload it cannot read)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class RemoteTimeoutError(ReadieError):
    """DEADLINE_EXCEEDED: the call ran past its deadline (the router's EXECUTION_TIMEOUT) or the
    worker's executor never answered."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(ReadieError):
    """NOT_FOUND: what a request named is not there (a call or its output the history does not
    hold for this tenant, an image); a session that is gone is its own kind,
    :class:`SessionExpiredError`."""

    code = grpc.StatusCode.NOT_FOUND


class SessionExpiredError(NotFoundError):
    """NOT_FOUND: the session's container or worker is gone, and its Python state with it; start
    a new :class:`readie.Session`."""

    code = grpc.StatusCode.NOT_FOUND


class ConflictError(ReadieError):
    """ALREADY_EXISTS or ABORTED: the call collided with another (e.g. a reused request ID)."""

    code = grpc.StatusCode.ABORTED


class RemoteOutOfMemoryError(ReadieError):
    """RESOURCE_EXHAUSTED with ``readie-killed: out-of-memory``: the function ran and was killed for
    exceeding its memory budget (``memory_budget``, bytes, when the worker said). Ask for more
    memory (``@readie.remote(memory=...)``)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    memory_budget: Optional[int] = None


class PermissionDeniedError(ReadieError):
    """PERMISSION_DENIED: the token is valid but not allowed to do this."""

    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(ReadieError):
    """RESOURCE_EXHAUSTED: no worker has room for the call's budget, or the session stayed busy
    past the router's SESSION_WAIT_TIMEOUT."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class NeverFitsError(ResourceExhaustedError):
    """RESOURCE_EXHAUSTED marked ``readie-never-fits``: no ready worker of the cluster could ever
    take the call as asked (its memory or GPU memory above every worker's offer, or a GPU call
    with no gpu worker). Final: neither ``map`` nor ``spawn`` retries it."""


class ShedError(ResourceExhaustedError):
    """RESOURCE_EXHAUSTED with a retry-after hint: a pinned call was shed because its version is
    loading on the worker that must load it (one load at a time per worker). ``retry_after`` is
    the hint in seconds. The client retries a shed on its own (``shed_retries``, within the call's
    ``timeout``); this is raised when it gives up."""

    def __init__(self, message: str, *, retry_after: float, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class PreconditionError(ReadieError):
    """FAILED_PRECONDITION: the call cannot run as asked: a package did not install, the Python
    versions differ, or the session's container contradicts ``checkpoint_id`` or
    ``disable_optimized_execution``."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class UnsupportedError(ReadieError):
    """UNIMPLEMENTED: the server does not offer readie's ProxyService (is READIE_ADDRESS a readie
    router?)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class ClusterUnavailableError(ReadieError):
    """UNAVAILABLE: the router cannot be reached, or no worker can take the call right now."""

    code = grpc.StatusCode.UNAVAILABLE


class AuthenticationError(ReadieError):
    """UNAUTHENTICATED: the router wants a token (READIE_AUTH_TOKEN) and got none or a wrong one."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE = {
    grpc.StatusCode.CANCELLED: (CallCancelledError, "the call was cancelled by the cluster"),
    grpc.StatusCode.UNKNOWN: (InternalServerError, "the cluster failed with an unknown error"),
    grpc.StatusCode.INVALID_ARGUMENT: (InvalidRequestError, "the cluster refused the call as invalid"),
    grpc.StatusCode.DEADLINE_EXCEEDED: (RemoteTimeoutError, "the call ran out of time"),
    grpc.StatusCode.NOT_FOUND: (SessionExpiredError, "the session has expired"),
    grpc.StatusCode.ALREADY_EXISTS: (ConflictError, "the call collides with an existing one"),
    grpc.StatusCode.PERMISSION_DENIED: (PermissionDeniedError, "the call is not permitted"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (ResourceExhaustedError, "the cluster has no room for the call"),
    grpc.StatusCode.FAILED_PRECONDITION: (PreconditionError, "the call cannot run as asked"),
    grpc.StatusCode.ABORTED: (ConflictError, "the call was aborted"),
    grpc.StatusCode.OUT_OF_RANGE: (InvalidRequestError, "the call asked for something out of range"),
    grpc.StatusCode.UNIMPLEMENTED: (UnsupportedError, "the server does not implement readie's ProxyService"),
    grpc.StatusCode.INTERNAL: (InternalServerError, "the cluster failed internally"),
    grpc.StatusCode.UNAVAILABLE: (ClusterUnavailableError, "the cluster is unavailable"),
    grpc.StatusCode.DATA_LOSS: (InternalServerError, "the cluster lost data of the call"),
    grpc.StatusCode.UNAUTHENTICATED: (AuthenticationError, "the cluster refused the credentials"),
}

def error_for_status(
    code: grpc.StatusCode,
    details: Optional[str],
    *,
    address: str = "",
    call: Optional[CallInfo] = None,
    trailers: Optional[Mapping[str, str]] = None,
    insecure: bool = False,
    tls_found: bool = False,
    retry_after: Optional[float] = None,
    lookup: bool = False,
) -> ReadieError:
    """The error to raise for a call that ended with gRPC status ``code`` (never OK): the family's
    class (an out-of-memory kill, a shed with its ``retry_after`` hint in seconds: their own), and a
    message naming the code, the address and the one hint for the cause (readie._error_hints).
    ``lookup``: a tenant-service request, whose NOT_FOUND is :class:`NotFoundError`."""
    if code == grpc.StatusCode.OK:
        return ProtocolError("the call ended without a result", call=call)
    trailers = trailers or {}
    said = " ".join((details or "").split())
    cause = cause_of(
        code, said, trailers, insecure=insecure, tls_found=tls_found, retry_after=retry_after
    )
    error_class, summary = _BY_CODE.get(code, (ReadieError, "the call failed"))
    # A tenant-service request's NOT_FOUND (a call's record or output, an image): what it named
    # is not there, which is no session's expiry (and wants no session hint).
    lookup_missed = lookup and code == grpc.StatusCode.NOT_FOUND
    if lookup_missed:
        error_class, summary = NotFoundError, "not found"
    if cause.kind == "out-of-memory":
        error_class, summary = RemoteOutOfMemoryError, "the call ran out of memory"
    if cause.kind == "shed":
        summary = "the call was shed"
    if cause.kind == "never-fits":
        error_class, summary = NeverFitsError, "the call can never fit"
    where = f" at {address}" if address else ""
    message = f"{summary}{where} ({code.name})"
    if said:
        message += f": {said}"
    hint = None if lookup_missed else hint_for(cause, address=address, insecure=insecure, trailers=trailers)
    # The router's refusal of a call without a token says already which variable to set.
    said_so = cause.kind == "unauthenticated" and "READIE_AUTH_TOKEN" in said
    if hint and not said_so:
        message += f"; {hint}"
    if cause.kind == "shed":
        # A shed is a refusal before the function started.
        return ShedError(
            message,
            retry_after=cause.retry_after or 0.0,
            code=code,
            details=details or "",
            call=call,
            not_started=True,
        )
    # A refusal the cluster marked, or a connection that never came up: nothing was sent.
    error = error_class(
        message,
        code=code,
        details=details or "",
        call=call,
        not_started=never_started(trailers) or never_sent(cause),
    )
    error.retry_after = retry_after
    error.standby = trailers.get("readie-standby") == "1"
    error.leader = (trailers.get("readie-leader") or "").strip() or None
    error.queue_timed_out = trailers.get("readie-queued") == "1"
    if isinstance(error, RemoteOutOfMemoryError):
        error.memory_budget = cause.budget
    return error
