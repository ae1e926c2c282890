"""Dumping a checkpoint with CRIU (`--criu-seed IMAGES --modules a,b [--setup FILE]`).

Process S makes two pipes (the seed's channel to the worker, re-created for each restore),
unshares a pid namespace for its next child only and forks B, pid 1 there. B calls setsid,
imports the modules, runs the setup, says `seeded` on its events pipe (fd 4) and blocks reading
its container spec from fd 3. S dumps B with `criu dump` (which ends B; one dump at a time on a
host, see DUMP_LOCK), writes the pipes' inodes
and the modules' source files to IMAGES/seed.json, and says `ready` (or `failed`, exiting 1).
After a restore (criu_restore.py), B reads its spec, listens on its socket, says `spawned` and
becomes the container exactly as a template's fork does (container.become_container).
"""

import ctypes
import fcntl
import json
import os
import platform
import signal
import subprocess
import sys
import time

from . import command_line, sandbox
from .checkpoint_setup import run_setup
from .criu import EVENTS_FD, SPEC_FD, _place, _read_event, _read_line, _tail, _write_all
from .container import become_container, describe, emit, import_checkpoint

_libc = ctypes.CDLL(None, use_errno=True)
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]

# criu dump's parasite needs a procfs of the dumped process's pid namespace; a seed is pid 1 of
# its own, so the parasite mounts one at `proc.crtools` in the seed's working directory (the
# executor's, shared by every seed) and removes it after. Two dumps at once collide there ("Can't
# get proc fd", "Parasite failed to dump /proc/self/cgroup"): dumps on one host take turns.
DUMP_LOCK = "/run/readie/criu-dump.lock"


def _setns(fd, nstype):
    if _libc.setns(fd, nstype) != 0:
        code = ctypes.get_errno()
        raise sandbox.SandboxError(f"setns: {os.strerror(code)} (errno {code})")


def _sources():
    """[path, size, mtime_ns as text] of every loaded module's file: an image is stale once one
    changes (as text: a JSON reader may hold numbers in doubles, too coarse for nanoseconds)."""
    seen = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not os.path.isabs(path) or path in seen:
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue
        seen[path] = [path, info.st_size, str(info.st_mtime_ns)]
    return sorted(seen.values())


def _dump_turn():
    """Waits for this host's turn to dump (an exclusive lock on DUMP_LOCK, released when the fd
    closes); returns the fd. Without a lock file (no writable /run) dumps go ahead unordered."""
    try:
        os.makedirs(os.path.dirname(DUMP_LOCK), mode=0o700, exist_ok=True)
        fd = os.open(DUMP_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _seed_process(spec_r, events_w, modules, setup):
    """Process B of a seed: imports, waits for its spec; after a restore, becomes a container."""
    try:
        os.setsid()
        sandbox.die_with_parent()
        null = os.open("/dev/null", os.O_RDWR)
        _place({0: null, 1: null, 2: null, SPEC_FD: spec_r, EVENTS_FD: events_w})
        os.closerange(EVENTS_FD + 1, 1 << 16)
        started = time.perf_counter()
        import_checkpoint(modules)
        run_setup(setup)
        import gc

        gc.collect()
        gc.freeze()
        import_ms = round((time.perf_counter() - started) * 1000, 3)
        # Can be larger than the pipe's buffer (the list of sources): S reads it whole meanwhile.
        _write_all(EVENTS_FD, (json.dumps({"event": "seeded", "importMs": import_ms, "sources": _sources()}) + "\n").encode())
        line = _read_line(SPEC_FD)  # the dump happens while B waits here
    except BaseException as error:  # noqa: BLE001
        try:
            emit({"event": "failed", "error": describe(error)}, EVENTS_FD)
        finally:
            os._exit(70)
    # Restored: this is a new container.
    spec = json.loads(line)
    container = spec.get("container")
    try:
        sandbox.die_with_parent()
        # ps shows the seed's command line until told otherwise: an earlier worker's pid.
        command_line.show_restored(spec.get("workerPid") or 0, spec.get("restoredFrom") or "")
        os.close(SPEC_FD)
        # Listening before saying `spawned`, as a template's spawner does: the worker's first
        # dial then connects at once instead of retrying. become_container reseeds.
        listener = sandbox.listen(spec["socket"])
        host_pid = int(os.readlink("/proc/self"))  # the host's /proc is still mounted here
        emit({"event": "spawned", "container": container, "pid": host_pid}, EVENTS_FD)
    except BaseException as error:  # noqa: BLE001
        emit({"event": "sandbox-failed", "container": container, "error": describe(error)}, EVENTS_FD)
        os._exit(70)
    become_container(spec, listener, EVENTS_FD)


def seed(images, modules, setup, criu, checkpoint):
    """Process S: dumps the seed image into `images`; never returns."""

    def failed(error):
        emit({"event": "failed", "checkpoint": checkpoint, "error": error})
        os._exit(1)

    spec_r, spec_w = os.pipe()
    events_r, events_w = os.pipe()
    try:
        os.makedirs(images, exist_ok=True)
        own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY)
        sandbox.unshare(sandbox.CLONE_NEWPID)
        pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        failed(describe(error))
    if pid == 0:
        _seed_process(spec_r, events_w, modules, setup)
    try:
        # S's next children (criu) run in S's own pid namespace again: B's pid means B there.
        _setns(own_pid_ns, sandbox.CLONE_NEWPID)
    except BaseException as error:  # noqa: BLE001
        os.kill(pid, signal.SIGKILL)
        failed(describe(error))
    os.close(spec_r)
    os.close(events_w)
    seeded = _read_event(events_r)
    if seeded.get("event") != "seeded":
        failed(seeded.get("error") or "the seed process died while importing")
    log = os.path.join(images, "dump.log")
    # Taken after B was forked, so the lock's fd is never part of the image.
    turn = _dump_turn()
    started = time.perf_counter()
    try:
        dump = subprocess.run(
            [criu, "dump", "--tree", str(pid), "--images-dir", images, "--manage-cgroups=ignore", "--log-file", log, "-v2"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=sandbox.die_with_parent,
            check=False,
        )
    finally:
        if turn is not None:
            os.close(turn)
    dump_ms = round((time.perf_counter() - started) * 1000, 3)
    if dump.returncode != 0:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        failed(f"criu dump exited with {dump.returncode}: {_tail(log)}")
    with open(os.path.join(images, "seed.json"), "w", encoding="utf-8") as out:
        json.dump(
            {
                "spec": os.fstat(spec_w).st_ino,
                "events": os.fstat(events_r).st_ino,
                "modules": modules,
                "python": platform.python_version(),
                "sources": seeded.get("sources", []),
            },
            out,
        )
    emit(
        {
            "event": "ready",
            "checkpoint": checkpoint,
            "modules": modules,
            "python": platform.python_version(),
            "importMs": seeded.get("importMs", 0),
            "dumpMs": dump_ms,
            "pid": os.getpid(),
        }
    )
    os._exit(0)
