"""Starts containers: a resident template (a checkpoint) or a one-off cold start.

Template (`--checkpoint ID --modules a,b [--setup FILE]`): imports the checkpoint's modules and
runs its setup once (checkpoint_setup.py), says `ready`, then reads spawn commands (JSON lines) on
stdin and forks one container per command. The CRIU backend's modes live in criu_seed.py and
criu_restore.py.
Cold (`--once SPEC`): imports nothing more and starts exactly one container.

Either way the container is started by a small spawner process A (the template's fork, or the
cold zygote itself): A binds the container's socket, unshares a pid namespace and forks B, pid 1
of that namespace, which enters the sandbox and serves calls (container.py, which the CRIU modes
share). A reports to the worker on stdout,
one JSON line per event (a write under PIPE_BUF bytes is atomic, so concurrent spawners never
interleave): `spawned` (B's host pid), `sandbox-failed`, `spawn-failed`, and `exited` (B's exit
code or signal). A kills B if the worker dies.

Spec fields: container, hostname, socket, tmpDir, cgroupProcs (a list), network (none, egress),
hardened, tmpSize, readieDir, binds, hide, uid, gid, shmSize, env, workerPid, checkpoint, modules.
In the egress mode the container reports `network` (its network namespace exists) on the same
events stream, for the worker to attach its user-mode network stack.
"""

import argparse
import gc
import json
import os
import platform
import select
import signal
import sys
import time

from . import sandbox
from .container import become_container, describe, emit, import_checkpoint

def wait_for(pid, worker_pid):
    """Waits for B; kills it first if the worker dies. Returns B's exit code (-signal if killed)."""
    try:
        child = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(child, select.POLLIN)
        worker = None
        if worker_pid:
            try:
                worker = os.pidfd_open(worker_pid)
                poller.register(worker, select.POLLIN)
            except ProcessLookupError:
                os.kill(pid, signal.SIGKILL)
        while True:
            ready = [fd for fd, _ in poller.poll()]
            if worker is not None and worker in ready:
                os.kill(pid, signal.SIGKILL)
                poller.unregister(worker)
                worker = None
            if child in ready:
                break
    except (OSError, AttributeError):
        pass  # no pidfds on this kernel: a plain wait still reports the exit
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def spawn(spec):
    """Process A: starts the container B and reports on it; never returns."""
    container = spec.get("container")
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        listener = sandbox.listen(spec["socket"])
        sandbox.unshare(sandbox.CLONE_NEWPID)
        pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        emit({"event": "spawn-failed", "container": container, "error": describe(error)})
        os._exit(1)
    if pid == 0:
        become_container(spec, listener)
    listener.close()
    emit({"event": "spawned", "container": container, "pid": pid})
    code = wait_for(pid, spec.get("workerPid"))
    emit(
        {
            "event": "exited",
            "container": container,
            "pid": pid,
            "code": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
        }
    )
    os._exit(0)


def _serve_template(checkpoint, modules):
    # Children are spawners; auto-reap them (each spawner reports its container itself).
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin.buffer:
        try:
            command = json.loads(line)
        except ValueError:
            continue
        if command.get("op") == "exit":
            return
        if command.get("op") != "spawn":
            continue
        spec = dict(command["spec"], checkpoint=checkpoint, modules=modules)
        try:
            pid = os.fork()
        except OSError as error:
            emit({"event": "spawn-failed", "container": spec.get("container"), "error": describe(error)})
            continue
        if pid == 0:
            try:
                # The spawner reads no commands; fd 0 stays taken so the socket never lands on it.
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.close(null)
                spawn(spec)
            finally:
                os._exit(1)


def main(argv):
    parser = argparse.ArgumentParser(prog="readie_executor")
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--modules", default="")
    parser.add_argument("--worker-pid", type=int, default=0)
    parser.add_argument("--once", metavar="SPEC", help="start one cold container from this JSON spec")
    parser.add_argument("--setup", default="", help="a file of Python run once after the imports")
    parser.add_argument("--criu-seed", metavar="IMAGES", help="build a CRIU checkpoint into IMAGES")
    parser.add_argument("--criu-launcher", action="store_true", help="restore containers from CRIU images")
    parser.add_argument("--criu", default="criu", help="the criu binary")
    parser.add_argument("--image-seed", metavar="IMAGES", help="dump an image snapshot into IMAGES")
    parser.add_argument("--spec", default="{}", help="the image seed's container spec (JSON)")
    parser.add_argument("--image", default="{}", help="the image seed's image: prefix, imports, env (JSON)")
    parser.add_argument("--image-seed-process", metavar="PLAN", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    modules = [m for m in args.modules.split(",") if m]
    sandbox.die_with_parent()
    if args.image_seed_process is not None:
        from . import image_seed

        image_seed.seed_process(args.image_seed_process)
    if args.worker_pid and os.getppid() != args.worker_pid:
        os._exit(1)  # the worker died before we could ask to die with it
    if args.image_seed is not None:
        from . import image_seed

        image_seed.seed(args.image_seed, json.loads(args.spec), json.loads(args.image), args.criu, args.checkpoint)
    if args.criu_seed is not None:
        from . import criu_seed

        criu_seed.seed(args.criu_seed, modules, args.setup, args.criu, args.checkpoint)
    if args.criu_launcher:
        from . import criu_restore

        criu_restore.serve_launcher(args.criu, args.worker_pid)
    if args.once is not None:
        import_checkpoint([])
        spawn(json.loads(args.once))
    try:
        import_ms = import_checkpoint(modules)
        if args.setup:
            from .checkpoint_setup import run_setup

            started = time.perf_counter()
            run_setup(args.setup)
            import_ms += round((time.perf_counter() - started) * 1000, 3)
    except BaseException as error:  # noqa: BLE001
        emit({"event": "failed", "checkpoint": args.checkpoint, "error": describe(error)})
        os._exit(1)
    # Objects that exist now are shared with every container: keep the collector off their pages.
    gc.collect()
    gc.freeze()
    emit(
        {
            "event": "ready",
            "checkpoint": args.checkpoint,
            "modules": modules,
            "python": platform.python_version(),
            "importMs": import_ms,
            "pid": os.getpid(),
        }
    )
    _serve_template(args.checkpoint, modules)
