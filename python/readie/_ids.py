"""Identifiers: new request and session IDs, and the IDs every answer of a call repeats."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace


def new_request_id() -> str:
    """A new request ID: ``req-`` and 32 random hex digits."""
    return "req-" + secrets.token_hex(16)


def new_session_id() -> str:
    """A new session ID: ``ses-`` and 32 random hex digits."""
    return "ses-" + secrets.token_hex(16)


@dataclass(frozen=True)
class CallInfo:
    """Where a call ran, as its answers named it. ``checkpoint_id`` is the checkpoint the container
    was actually restored from, empty for a cold start; IDs the cluster never sent are empty."""

    request_id: str
    session_id: str = ""
    worker_id: str = ""
    container_id: str = ""
    checkpoint_id: str = ""

    def updated(self, ids: object) -> "CallInfo":
        """This info with an answer's ``CallIds`` taken over.

        An answer that names a container comes from the worker and is authoritative for worker,
        container and checkpoint (an empty checkpoint there means a cold start, even if an earlier
        answer named the checkpoint the router planned); an answer without one only fills gaps.
        """
        authoritative = bool(getattr(ids, "container_id", ""))
        changes = {}
        for field in ("request_id", "session_id", "worker_id", "container_id", "checkpoint_id"):
            value = getattr(ids, field, "")
            placement = field not in ("request_id", "session_id")
            if (value or (authoritative and placement)) and value != getattr(self, field):
                changes[field] = value
        return replace(self, **changes) if changes else self
