"""When a fan-out retries a call, and how long it waits first.

A refusal for lack of room before the function started (``not_started`` with RESOURCE_EXHAUSTED:
no worker has room, the session is busy, a shed) and a refusal before the function started with
UNAVAILABLE (no worker right now, the chosen worker unreachable) are waited out and retried,
never a call that never fits (``NeverFitsError``: no wait makes room for it) nor one that waited
the router's ``QUEUE_TIMEOUT`` in its admission queue (``queue_timed_out``: the router waited
already; a router that queues sends no other "no room" refusal), with
exponential backoff (50 ms doubling to 2 s, with jitter) or the wait the cluster asked for
(``retry_after``), whichever is longer. They do not count against ``retries``. A call that may
have run (the function raised, was killed for its memory, its worker failed mid-call, a
deadline) is retried only when asked (``retries=N``), and never when the request itself is wrong
(credentials, an invalid request, a failed precondition such as a package that does not install)."""

from __future__ import annotations

import random
from typing import Optional

import grpc

from readie._error_hints import cause_of, never_sent
from readie.errors import (
    AuthenticationError,
    CallCancelledError,
    ConfigurationError,
    InvalidRequestError,
    NeverFitsError,
    PermissionDeniedError,
    PreconditionError,
    ReadieError,
    SessionExpiredError,
    UnsupportedError,
)

#: The first wait before retrying a refusal, in seconds.
FIRST_BACKOFF = 0.05
#: The longest wait between two attempts of a refused call (a retry-after hint may ask for more).
MAX_BACKOFF = 2.0
#: UNAVAILABLE refusals before the function started are retried this many times, then raised.
MAX_UNAVAILABLE_RETRIES = 20

_NEVER_RETRIED = (
    AuthenticationError,
    CallCancelledError,
    ConfigurationError,
    InvalidRequestError,
    NeverFitsError,
    PermissionDeniedError,
    PreconditionError,
    UnsupportedError,
)


def waits_for_room(error: BaseException, unavailable_retries: int = 0) -> bool:
    """Whether ``error`` is a refusal before the function started that waiting can cure."""
    if not isinstance(error, ReadieError) or not error.not_started:
        return False
    # No wait makes room for a call that never fits: final.
    if isinstance(error, NeverFitsError):
        return False
    # The router waited for room already (QUEUE_TIMEOUT in its admission queue): final.
    if getattr(error, "queue_timed_out", False):
        return False
    if error.code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return True
    if error.code == grpc.StatusCode.UNAVAILABLE and unavailable_retries < MAX_UNAVAILABLE_RETRIES:
        # The cluster's own refusal, not a router this client could not reach (nothing to wait for).
        return not never_sent(cause_of(error.code, error.details, {}, insecure=False, tls_found=False))
    return False


def needs_new_session(error: BaseException) -> bool:
    """Whether a map slot must move to a new session after ``error``: its container is gone (the
    session expired) or may be (the call failed other than by the function raising)."""
    from readie.errors import RemoteExecutionError

    if isinstance(error, SessionExpiredError):
        return True
    return isinstance(error, ReadieError) and not isinstance(error, RemoteExecutionError) and not error.not_started


def may_retry_ran(error: BaseException) -> bool:
    """Whether ``retries=`` may retry ``error``: a call that ran (or may have) and failed, not a
    request that is wrong as it stands."""
    return isinstance(error, ReadieError) and not isinstance(error, _NEVER_RETRIED)


def backoff(attempt: int, hint: Optional[float] = None, rng: Optional[random.Random] = None) -> float:
    """Seconds to wait before attempt ``attempt`` + 1 of a refused call (``attempt`` from 0):
    exponential with jitter (half to all of the step), never less than the cluster's ``hint``."""
    step = min(MAX_BACKOFF, FIRST_BACKOFF * (2 ** min(attempt, 16)))
    jitter = (rng or random).uniform(0.5, 1.0)
    wait = step * jitter
    return max(wait, hint) if hint is not None else wait
