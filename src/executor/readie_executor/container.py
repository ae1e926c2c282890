"""Process B, the container itself, and what every process of the executor shares.

The template (zygote.py), a CRIU seed (criu_seed.py) and the CRIU launcher (criu_restore.py) all
start containers and report to the worker the same way: `emit` writes one event line,
`import_checkpoint` imports what a checkpoint holds, `become_container` enters the sandbox and
serves calls. They live here, below all three, so none of them imports another to reach them.
"""

import builtins
import importlib
import json
import os
import sys
import time
import types

from . import sandbox

_MAX_TEXT = 1500


def emit(event, fd=1):
    """Writes one event line to `fd` in a single write (atomic below PIPE_BUF)."""
    if isinstance(event.get("error"), str):
        event = dict(event, error=event["error"][:_MAX_TEXT])
    os.write(fd, (json.dumps(event, separators=(",", ":")) + "\n").encode("utf-8"))


def reseed():
    """Gives this container its own random state: its siblings forked from the same template
    would otherwise draw the same numbers from `random` and from numpy's global generator."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def fresh_main():
    """A clean `__main__` module: the session namespace user code runs in."""
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main


def describe(error):
    """An error as one line: its type and message."""
    return f"{type(error).__name__}: {error}"


def become_container(spec, listener, events_fd=1):
    """Process B: enters the sandbox and serves calls until killed; never returns.

    `events_fd` carries a `sandbox-failed` event if the sandbox cannot be entered; it is closed
    before any user code runs, so user code can never write to the worker's event stream.
    """
    container = spec.get("container")

    def network_ready():
        emit({"event": "network", "container": container}, events_fd)

    try:
        sandbox.die_with_parent()
        egress = spec.get("network") == "egress"
        sandbox.enter(spec, keep_fds=[listener.fileno(), events_fd], on_network=network_ready if egress else None)
        reseed()
        fresh_main()
        from .capture import OutputCapture
        from .server import Executor

        identity = {
            "container": spec["container"],
            "checkpoint": spec.get("checkpoint", ""),
            "modules": spec.get("modules", []),
            "network": spec.get("network", "host") if spec.get("hardened", True) else "host",
        }
    except BaseException as error:  # noqa: BLE001 - any failure here means no container
        emit({"event": "sandbox-failed", "container": container, "error": describe(error)}, events_fd)
        os._exit(70)
    try:
        if events_fd > 2:
            os.close(events_fd)
        # From here fds 1 and 2 are the capture pipes: the worker's event pipe is closed for good.
        capture = OutputCapture()
        Executor(listener, capture, identity).serve_forever()
    except BaseException:  # noqa: BLE001
        os._exit(71)
    os._exit(0)


def import_checkpoint(modules):
    """Imports what every executor needs and `modules`; returns how long it took, in ms."""
    started = time.perf_counter()
    import cloudpickle  # noqa: F401 - every executor needs it; importing it here shares it
    import random  # noqa: F401 - reseeded in every container (`reseed`): its import costs ~10 ms

    from . import calls, capture, server, syscall_filter  # noqa: F401

    # Every container of this process loads the same seccomp filter: build it once, here.
    syscall_filter.prepare()
    for module in modules:
        importlib.import_module(module)
    # Load the resolver's NSS modules now, so a container's first lookup (the executor's DNS
    # check) does not pay for it.
    try:
        import socket

        socket.getaddrinfo("localhost", None)
    except OSError:
        pass
    return round((time.perf_counter() - started) * 1000, 3)
