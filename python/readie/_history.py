"""The tenant's own calls from the router's call history, and their output (docs/calls.md):
``readie.calls()``, ``readie.call_record(request_id)``, ``readie.logs(request_id)``. Only this
token's tenant's calls: another tenant's request ID is answered as an unknown one (NOT_FOUND)."""

from __future__ import annotations

from typing import Any

from readie._connection import current_settings
from readie._tenant import OutputLine, own_call, own_call_logs, own_calls

__all__ = ["OutputLine", "call_record", "calls", "logs"]


def calls(*, since: Any = None, failed: bool = False, function: str = "", limit: int = 0) -> list:
    """This tenant's recent calls, newest first (``readie.v1.CallView`` messages: request_id,
    function, state, code, message, raised_type, raised_message, requested_at, queued_at,
    queued_why, admitted_at, queue_wait_ms, finished_at, duration_ms, worker_id, attempts, inputs
    and inputs_raised (a batch of a map: how many inputs it carried, how many of them raised), ...;
    a call the admission queue holds is in state ``queued``). ``since`` is seconds or a duration
    with its unit (``"10m"``); ``failed`` keeps calls that failed, whose function raised (state
    ``raised``), were refused or expired, and batches some of whose inputs raised
    (``inputs_raised``); ``function`` keeps one function (``module.qualname``)."""
    return own_calls(current_settings(), since=since, failed=failed, function=function, limit=limit)


def call_record(request_id: str) -> Any:
    """One of this tenant's calls, its whole story (a ``readie.v1.CallView``). Raises
    :class:`readie.ReadieError` (NOT_FOUND) when the history holds no call of yours by that ID."""
    return own_call(current_settings(), request_id)


def logs(request_id: str, follow: bool = False) -> list:
    """One of this tenant's calls' output (stdout, stderr, readie's notes) as the worker that ran
    it kept it: a list of :class:`OutputLine` (``at``, ``source``, ``text``). With ``follow``,
    waits for new lines until the call ends. NOT_FOUND names why when there is none."""
    return own_call_logs(current_settings(), request_id, follow)
