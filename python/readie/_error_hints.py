"""What a failed call's cause is, and the one hint per cause that ends its message: the same table
as the TypeScript client's (src/client/error-hints.ts) and the same words for a TLS mismatch
(src/shared/transport-problem.ts). A call that reached a worker never gets a hint about the
router's address."""

from __future__ import annotations

import linecache
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Mapping, Optional

import grpc

NOT_STARTED_TRAILER = "readie-not-started"
KILLED_TRAILER = "readie-killed"
MEMORY_BUDGET_TRAILER = "readie-memory-budget"
KILLED_OUT_OF_MEMORY = "out-of-memory"
#: No ready worker could ever take the call: final, never retried.
NEVER_FITS_TRAILER = "readie-never-fits"

_TRANSPORT_PATTERNS = (
    ("tls-to-plaintext", re.compile(r"wrong version number|WRONG_VERSION_NUMBER|packet length too long", re.I)),
    (
        "untrusted-certificate",
        re.compile(
            r"certificate verify failed|unable to verify the first certificate|self[- ]signed certificate"
            r"|unable to get local issuer certificate|CERTIFICATE_VERIFY_FAILED",
            re.I,
        ),
    ),
    ("name-mismatch", re.compile(r"Peer name .* is not in peer certificate|does not match certificate's altnames", re.I)),
    ("http1", re.compile(r"http1\.x server|HTTP/1\.[01]", re.I)),
    # grpc's C core: "Received http2 header with status: 502"; grpc-js: "Received HTTP status code 502".
    ("bad-gateway", re.compile(r"header with status: 50[234]\b|HTTP status code 50[234]\b", re.I)),
    ("refused", re.compile(r"ECONNREFUSED|Connection refused", re.I)),
    ("unresolved", re.compile(r"DNS resolution failed|Name resolution failed|ENOTFOUND", re.I)),
    # Before the losses: a connection that never came up may say why in the same words.
    ("connection-failed", re.compile(r"failed to connect to all addresses|No connection established|Failed to connect", re.I)),
    ("connection-lost", re.compile(r"Socket closed|Connection reset|Connection dropped|ECONNRESET", re.I)),
)

#: The problems a plaintext dial of a TLS port can show: a plaintext client asks whether it speaks TLS.
AMBIGUOUS = frozenset({"connection-failed", "connection-lost", "http1"})

#: The problems that mean nothing reached the router: the call never started.
NEVER_CONNECTED = frozenset(
    {
        "tls-to-plaintext",
        "plaintext-to-tls",
        "untrusted-certificate",
        "name-mismatch",
        "http1",
        "refused",
        "unresolved",
        "connection-failed",
    }
)


def transport_problem_of(details: str) -> Optional[str]:
    """The connection problem an ``UNAVAILABLE`` error's text shows, or ``None``."""
    for problem, pattern in _TRANSPORT_PATTERNS:
        if pattern.search(details):
            return problem
    return None


def speaks_tls(address: str, timeout: float = 2.0) -> bool:
    """Whether a TLS handshake with ``host:port`` completes (its certificate unchecked): the
    diagnosis of a plaintext dial that failed without saying why."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        return False
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ssl.SSLError, ValueError):
        return False


def never_started(trailers: Mapping[str, str]) -> bool:
    """Whether the trailers say the user's function never started (a refusal before it ran)."""
    return trailers.get(NOT_STARTED_TRAILER) == "1"


@dataclass(frozen=True)
class Cause:
    """Why a call failed: ``kind`` and what the hint needs."""

    kind: str
    worker_id: str = ""
    problem: str = ""
    budget: Optional[int] = None
    retry_after: Optional[float] = None
    status: int = 0


def never_sent(cause: Cause) -> bool:
    """Whether nothing of the call reached the cluster: the connection never came up."""
    return cause.kind == "transport" and cause.problem in NEVER_CONNECTED


def cause_of(
    code: grpc.StatusCode,
    details: str,
    trailers: Mapping[str, str],
    *,
    insecure: bool,
    tls_found: bool,
    retry_after: Optional[float] = None,
) -> Cause:
    """The cause of a call that ended with ``code`` (``retry_after``: a shed's hint, seconds)."""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and trailers.get(NEVER_FITS_TRAILER) == "1":
        return Cause("never-fits")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_after is not None:
        return Cause("shed", retry_after=retry_after)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and trailers.get(KILLED_TRAILER) == KILLED_OUT_OF_MEMORY:
        budget = trailers.get(MEMORY_BUDGET_TRAILER, "")
        return Cause("out-of-memory", budget=int(budget) if budget.isdigit() and int(budget) > 0 else None)
    worker = re.match(r"^worker (\S+?):? ", details)
    if worker:
        return Cause("worker", worker_id=worker.group(1))
    if code == grpc.StatusCode.UNAVAILABLE:
        if details.startswith("no workers available"):
            return Cause("no-workers")
        if "shutting down" in details:
            return Cause("router-stopping")
        problem = transport_problem_of(details)
        if problem is None:
            return Cause("other")
        # A plaintext dial of a TLS port just closes (or, at nginx, answers HTTP/1.1 400).
        if problem in AMBIGUOUS and insecure and tls_found:
            problem = "plaintext-to-tls"
        if problem == "bad-gateway":
            status = re.search(r"(50[234])\b", details)
            return Cause("proxy-upstream", status=int(status.group(1)) if status else 502)
        return Cause("transport", problem=problem)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Cause("session-busy" if details.startswith("session is busy") else "no-room")
    return Cause(
        {
            grpc.StatusCode.NOT_FOUND: "session-expired",
            grpc.StatusCode.UNAUTHENTICATED: "unauthenticated",
            grpc.StatusCode.PERMISSION_DENIED: "permission-denied",
            grpc.StatusCode.UNIMPLEMENTED: "unimplemented",
        }.get(code, "other")
    )


def _duration(seconds: float) -> str:
    """Seconds the way operators write them (``90s``, ``1h``, ``250ms``), as the TS client does."""
    ms = round(seconds * 1000)
    for unit, factor in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= factor and ms % factor == 0:
            return f"{ms // factor}{unit}"
    return f"{ms}ms"


def _size(budget: int) -> str:
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if budget >= factor and budget % factor == 0:
            return f"{budget // factor}{unit}"
    return f"{budget}B"


def _transport_hint(problem: str, address: str, insecure: bool) -> str:
    server = f"the router (or nginx) at {address}"
    if problem == "tls-to-plaintext":
        return (
            f"{server} speaks plaintext but this client speaks TLS: serve TLS there (the router's "
            "--tls-cert/--tls-key, or nginx's ssl_certificate), or make this client speak plaintext "
            "(READIE_INSECURE=1)"
        )
    if problem == "plaintext-to-tls":
        return (
            f"{server} speaks TLS but this client speaks plaintext: unset READIE_INSECURE, with "
            "READIE_CA_FILE naming the CA that signed its certificate"
        )
    if problem == "untrusted-certificate":
        return (
            f"{server} presented a certificate that this client does not trust: set READIE_CA_FILE "
            "to the CA certificate that signed it"
        )
    if problem == "name-mismatch":
        return (
            f"{server} presented a certificate that does not name the host dialed: dial a name the "
            "certificate carries, or make its certificate name that host (readie certs)"
        )
    if problem == "http1":
        return f"{server} answered HTTP/1.x, not gRPC: check the port (nginx must listen with http2)"
    if problem == "refused":
        return f"nothing listens at {address}: check READIE_ADDRESS, and that the router (or nginx) runs"
    if problem == "unresolved":
        return f"the host of {server} does not resolve: check READIE_ADDRESS"
    if problem == "connection-lost":
        return (
            f"the connection to {server} was lost during the call: it stopped or restarted, or the network "
            "dropped it; the function may have run: retry only if running it twice is safe"
        )
    if insecure:
        return f"this client could not connect to {server}; if it serves TLS, unset READIE_INSECURE"
    return f"this client could not connect to {server}"


def hint_for(cause: Cause, *, address: str, insecure: bool, trailers: Mapping[str, str]) -> Optional[str]:
    """The one hint for ``cause`` (``None``: the message says enough)."""
    kind = cause.kind
    if kind == "out-of-memory":
        budget = "" if cause.budget is None else f" of {_size(cause.budget)}"
        return (
            f"the function ran and was killed for using more than its memory budget{budget}: ask for "
            'more (@readie.remote(memory="2GiB"))'
        )
    if kind == "worker":
        retry = (
            "the function never started, so the call can be retried as it is"
            if never_started(trailers)
            else "the function may have run: retry only if running it twice is safe"
        )
        return (
            f"the router placed the call on worker {cause.worker_id}, which failed it; {retry} "
            "(the operator sees the worker in readie status)"
        )
    if kind == "transport":
        return _transport_hint(cause.problem, address, insecure)
    if kind == "proxy-upstream":
        return (
            f"nginx (or another proxy) at {address} answered HTTP {cause.status}: the router behind it is not "
            "answering (stopped, restarting, or not at the address nginx's grpc_pass names); the call may have "
            "reached it: retry only if running it twice is safe"
        )
    if kind == "shed":
        return (
            "the router sheds a pinned call while its version is loading or its workers are full: "
            f"retry after {_duration(cause.retry_after or 0.0)} (the client retries sheds on its own, within the "
            "call's timeout, up to shed_retries times)"
        )
    return {
        "no-workers": "the router runs but has no worker that can take the call: ask the operator "
        "(readie status shows the workers)",
        "no-room": "every worker is full for this budget now: retry later, or ask for less memory",
        "never-fits": (
            "no worker of this cluster can ever take it as asked: ask for less (memory, GPU memory) "
            "or for another flavor; the client does not retry it"
        ),
        "session-busy": "the session's previous call is still running: calls of one session run one at a time",
        "session-expired": "its container is gone; start a new readie.Session",
        "router-stopping": "the router is restarting or stopping: retry once it is back",
        "unauthenticated": "set READIE_AUTH_TOKEN to your client token (the cluster's operator gives it)",
        "permission-denied": "use a tenant (client) token: worker and operator tokens may not run calls",
        "unimplemented": "check that READIE_ADDRESS points at a readie router (or nginx in front of one)",
    }.get(kind)


# Distributions whose name is not the module they provide (the usual ones).
_DISTRIBUTION_OF = {
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "cv2": "opencv-python",
    "PIL": "Pillow",
    "yaml": "PyYAML",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
}

# Modules of readie itself: missing, they mean a wrong checkpoint, not a missing package.
_READIE_MODULES = frozenset({"readie_checkpoint", "readie_executor"})


def missing_module_hint(remote_type: str, remote_module: str, message: str) -> Optional[str]:
    """The hint of a remote ``ModuleNotFoundError``: the ``packages=`` that installs the module with
    the call (the TypeScript client says ``packages: [...]``: src/client/error-hints.ts)."""
    if remote_type != "ModuleNotFoundError" or remote_module not in ("", "builtins"):
        return None
    named = re.search(r"No module named '([^']+)'", message)
    if not named:
        return None
    module = named.group(1).split(".")[0]
    if module in _READIE_MODULES:
        return None
    distribution = _DISTRIBUTION_OF.get(module, module)
    hint = (
        f"the worker's Python has no module {module}: if a distribution on the package index provides it, "
        f'install it with the call (@readie.remote(packages=["{distribution}"]))'
    )
    return hint if distribution == module else f"{hint}; {module} comes from {distribution}"


_FRAME = re.compile(r'^  File "([^"]+)", line (\d+), in ')


def with_client_source(traceback: str) -> str:
    """The remote traceback with the source lines the worker could not show and this client has: a
    function shipped by value was defined in the client's files, which the worker never saw."""
    lines = traceback.split("\n")
    shown = []
    for index, line in enumerate(lines):
        shown.append(line)
        frame = _FRAME.match(line)
        if frame is None or frame.group(1).startswith("<"):
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if following.startswith("    "):
            continue  # the worker had the file
        source = linecache.getline(frame.group(1), int(frame.group(2))).strip()
        if source:
            shown.append(f"    {source}")
    return "\n".join(shown)
