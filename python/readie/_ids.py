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
    was actually restored from, empty for a cold start; IDs the cluster never sent are empty.

    For a pinned call (``@readie.remote(pinned=True)``), ``served_version`` is the tenant's version
    that served it (or, for a failure or a shed, the one the router resolved) and
    ``routing_revision`` the routing table revision it came from; empty and 0 otherwise.
    ``retry_of`` is the request this one retried (a shed's automatic retry), else empty."""

    request_id: str
    session_id: str = ""
    worker_id: str = ""
    container_id: str = ""
    checkpoint_id: str = ""
    served_version: str = ""
    routing_revision: int = 0
    retry_of: str = ""

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
        version = getattr(ids, "version", "")
        revision = int(getattr(ids, "routing_revision", 0) or 0)
        if version and version != self.served_version:
            changes["served_version"] = version
        if revision and revision != self.routing_revision:
            changes["routing_revision"] = revision
        return replace(self, **changes) if changes else self

    def with_trailers(self, trailers: object) -> "CallInfo":
        """This info with what a call's trailing metadata names and the answers did not: the
        version and revision of a call that failed or was shed before any answer."""
        from readie._status_details import trailer

        changes = {}
        version = trailer(trailers, "readie-version")  # type: ignore[arg-type]
        revision = trailer(trailers, "readie-routing-revision")  # type: ignore[arg-type]
        if version and not self.served_version:
            changes["served_version"] = str(version)
        if revision and not self.routing_revision:
            try:
                changes["routing_revision"] = int(str(revision))
            except ValueError:
                pass
        return replace(self, **changes) if changes else self
