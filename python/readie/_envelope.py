"""The result envelope the executor sends back: ``{"ok": True, "value": ...}`` or
``{"ok": False, "error": {"type", "module", "message", "traceback"}}`` (a cloudpickle envelope may
also carry ``"exception"``, the exception object itself)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import cloudpickle

from readie._ids import CallInfo
from readie.errors import ProtocolError, RemoteExecutionError


def value_of(envelope: Any, *, call: Optional[CallInfo] = None) -> Any:
    """The envelope's value, or raises :class:`RemoteExecutionError` for a remote exception."""
    if not isinstance(envelope, Mapping) or not isinstance(envelope.get("ok"), bool):
        raise ProtocolError(f"the result is not a readie envelope: {_preview(envelope)}", call=call)
    if envelope["ok"]:
        return envelope.get("value")
    error = envelope.get("error")
    if not isinstance(error, Mapping):
        raise ProtocolError(f"a failed call's envelope has no error: {_preview(envelope)}", call=call)
    exception = envelope.get("exception")
    raise RemoteExecutionError(
        str(error.get("type") or "Exception"),
        str(error.get("message") or ""),
        str(error.get("traceback") or ""),
        remote_module=str(error.get("module") or ""),
        exception=exception if isinstance(exception, BaseException) else None,
        call=call,
    )


def decode_cloudpickle(payload: bytes, *, call: Optional[CallInfo] = None) -> Any:
    """The value of a cloudpickle result envelope (raises for a remote exception)."""
    try:
        envelope = cloudpickle.loads(payload)
    except Exception as error:  # noqa: BLE001 - anything unpickling raises means "unreadable"
        raise ProtocolError(
            f"the result cannot be unpickled here ({type(error).__name__}: {error}); does this "
            "client have the modules the result's types live in?",
            call=call,
        ) from error
    return value_of(envelope, call=call)


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
