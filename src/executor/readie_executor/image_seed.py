"""Dumping an image snapshot with CRIU (`--image-seed IMAGES --spec SPEC --image IMAGE`).

A catalogue seed (criu_seed.py) imports as root outside any sandbox, and its restored process
enters the sandbox afterwards: right for the operator's modules, wrong for a tenant's packages,
whose import-time code would then have shaped a process that runs as root. An image's seed
imports inside its sandbox instead, and the dump keeps it there:

- S (this process, root) unshares a pid namespace and forks I, its pid 1.
- I (root) makes the container's namespaces and filesystem (sandbox.enter_namespaces: the
  seed's cgroups, its own /proc, the image's prefix bound read-only) and forks B.
- B execs a fresh executor (so that nothing it maps comes from the host's mount namespace),
  drops to the image's uid with its seccomp filter (sandbox.drop_privileges), enters the image
  (its prefix on sys.path, its environment, its imports), says `seeded` on its events pipe
  (fd 4) and blocks reading its container spec on fd 3; fd 5 holds a placeholder listening
  socket, which each restore replaces with the container's real one.
- I dumps B with `criu dump`, run in I's namespaces (criu then dumps none of them, and each
  restore recreates them as I does here: see image_restore.py), writes IMAGES/seed.json and
  says `ready` (or `failed`).

criu runs with B's uid as its real uid (its effective uid stays root): reading another user's
resource limits needs CAP_SYS_RESOURCE, which a container host may not grant even to root.
"""

import json
import os
import platform
import signal
import subprocess
import sys
import time

from . import sandbox
from .criu import EVENTS_FD, LISTENER_FD, SPEC_FD, _place, _read_event, _read_line, _tail, _write_all, host_kdat, place_kdat
from .container import describe, emit

# Where B finds the executor's code until it has imported it (closed by drop_privileges).
_CODE_FD = 6
# The placeholder's path inside the seed's /tmp (each restore's /tmp is a fresh tmpfs).
_PLACEHOLDER = "placeholder.sock"


def _inode(path):
    """The inode number in a /proc/PID/fd link such as `pipe:[123]` or `socket:[123]`."""
    link = os.readlink(path)
    return int(link[link.index("[") + 1 : link.index("]")])


def seed(images, spec, image, criu, name):
    """Process S: dumps the image's seed into `images`; never returns."""

    def failed(error):
        emit({"event": "failed", "checkpoint": name, "error": error})
        os._exit(1)

    try:
        images_fd = os.open(images, os.O_RDONLY | os.O_DIRECTORY)
        kdat = host_kdat(criu)
        sandbox.unshare(sandbox.CLONE_NEWPID)
        pid = os.fork()
    except BaseException as error:  # noqa: BLE001
        failed(describe(error))
    if pid == 0:
        try:
            _seed_init(images_fd, spec, image, criu, name, kdat)
        except BaseException as error:  # noqa: BLE001
            emit({"event": "failed", "checkpoint": name, "error": describe(error)})
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    os._exit(0 if os.waitstatus_to_exitcode(status) == 0 else 1)


def _seed_init(images_fd, spec, image, criu, name, kdat):
    """Process I of a seed (pid 1 of its pid namespace, root): makes the sandbox, forks B, dumps it."""
    sandbox.die_with_parent()
    # I reaps nothing until it has looked for processes outside B's tree (_outside_tree).
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    # Opened before the sandbox hides it (an executor under /tmp, say): B imports through the fd.
    code = os.open(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.O_RDONLY | os.O_DIRECTORY)
    sandbox.enter_namespaces(spec)
    place_kdat(kdat)
    spec_r, spec_w = os.pipe()
    events_r, events_w = os.pipe()
    plan = json.dumps({"spec": spec, "image": image})
    pid = os.fork()
    if pid == 0:
        try:
            _place({SPEC_FD: spec_r, EVENTS_FD: events_w, _CODE_FD: code})
            start = f"import sys; sys.path[0] = '/proc/self/fd/{_CODE_FD}'; from readie_executor.zygote import main; main(sys.argv[1:])"
            os.execv(sys.executable, [sys.executable, "-s", "-E", "-B", "-c", start, "--image-seed-process", plan])
        finally:
            os._exit(127)
    os.close(code)
    os.close(spec_r)
    os.close(events_w)
    seeded = _read_event(events_r)
    if seeded.get("event") != "seeded":
        _kill(pid)
        # B's words (its import's traceback): the tenant's own, shown to the tenant.
        error = seeded.get("error") if isinstance(seeded.get("error"), str) else None
        emit({"event": "failed", "checkpoint": name, "error": error or "the image's seed died while importing"})
        os._exit(1)
    listener = _inode(f"/proc/{pid}/fd/{LISTENER_FD}")
    uid, gid = int(spec["uid"]), int(spec["gid"])

    def as_seed_user():
        sandbox.die_with_parent()
        os.setresgid(gid, 0, 0)
        os.setresuid(uid, 0, 0)

    started = time.perf_counter()
    # --leave-stopped: B's tree stays as it was frozen until I has checked that nothing else ran.
    dump = subprocess.run(
        [criu, "dump", "--tree", str(pid), "--leave-stopped", "--images-dir", f"/proc/self/fd/{images_fd}", "--manage-cgroups=ignore", "--log-file", "dump.log", "-v2"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=[images_fd],
        preexec_fn=as_seed_user,
        check=False,
    )
    dump_ms = round((time.perf_counter() - started) * 1000, 3)
    outsiders = _outside_tree(pid)
    # Everything in the namespace but I goes, B's stopped tree included.
    os.kill(-1, signal.SIGKILL)
    if dump.returncode != 0:
        emit({"event": "failed", "checkpoint": name, "error": f"criu dump exited with {dump.returncode}: {_tail(f'/proc/self/fd/{images_fd}/dump.log')}"})
        os._exit(1)
    if outsiders:
        emit({"event": "failed", "checkpoint": name, "error": f"the image's seed ran processes outside its process tree while it was dumped (pids {outsiders}): a snapshot is never made of it"})
        os._exit(1)
    info = {
        "spec": os.fstat(spec_w).st_ino,
        "events": os.fstat(events_r).st_ino,
        "listener": listener,
        "pid": pid,
        "uid": uid,
        "modules": image.get("imports", []),
        "python": platform.python_version(),
        "sources": [],
    }
    fd = os.open("seed.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400, dir_fd=images_fd)
    _write_all(fd, json.dumps(info).encode())
    os.close(fd)
    emit(
        {
            "event": "ready",
            "checkpoint": name,
            "modules": info["modules"],
            "python": info["python"],
            "importMs": seeded.get("importMs", 0) if isinstance(seeded.get("importMs"), (int, float)) else 0,
            "dumpMs": dump_ms,
            "pid": os.getpid(),
        }
    )
    os._exit(0)


def _outside_tree(seed):
    """Processes of the namespace outside B's tree: I's children other than B, alive or not yet
    reaped (I reaps none). criu freezes B's tree alone; a process outside it that shares B's memory
    (clone with CLONE_VM, then CLONE_PARENT or an exit that reparents it to I) could rewrite what
    criu's parasite hands criu inside B (the credentials criu restores, for one) while it dumps.
    Every process outside the tree descends from such a child of I, and I reaps nothing before
    this check, so none can go unseen."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (me, seed):
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                text = stat.read()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: count from the last ')'.
        parent = int(text[text.rindex(")") + 2 :].split()[1])
        if parent == me:
            found.append(int(entry))
    return sorted(found)


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def seed_process(plan_text):
    """Process B of an image's seed: drops privileges, enters the image, waits to be dumped;
    after each restore, becomes that container's executor. Never returns."""
    try:
        plan = json.loads(plan_text)
        spec, image = plan["spec"], plan["image"]
        # Its own session: criu restores a session whose leader it dumped, and no other.
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        _place({1: null, 2: null})
        os.close(null)
        from .container import import_checkpoint

        # As root still: what every executor imports (and the seccomp filter, built here and
        # loaded by drop_privileges).
        import_checkpoint([])
        # Imported now, while the executor's code is still reachable (drop_privileges closes its
        # fd), and so that no container pays for them after its restore.
        from .image import enter_image
        from .image_restore import become_restored
        import socket

        placeholder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        placeholder.bind(os.path.join(spec.get("readieDir", "/tmp/.readie"), _PLACEHOLDER))
        placeholder.listen(16)
        _place({LISTENER_FD: placeholder.detach()})
        sandbox.drop_privileges(spec, keep_fds=[SPEC_FD, EVENTS_FD, LISTENER_FD])
        os.chdir("/tmp")
    except BaseException as error:  # noqa: BLE001
        _say_failed(f"the image's seed could not enter its sandbox: {describe(error)}")
    # From here on the process runs the tenant's packages' code: it is the sandbox's.

    started = time.perf_counter()
    entered = enter_image(image)
    if not entered.get("ok"):
        _say_failed(entered.get("message") or "the image did not import")
    import gc

    gc.collect()
    gc.freeze()
    import ctypes
    ctypes.CDLL(None).malloc_trim(0)
    import_ms = round((time.perf_counter() - started) * 1000, 3)
    _write_all(EVENTS_FD, (json.dumps({"event": "seeded", "importMs": import_ms}) + "\n").encode())
    line = _read_line(SPEC_FD)  # the dump happens while B waits here
    become_restored(line, image)


def _say_failed(error):
    try:
        emit({"event": "failed", "error": error}, EVENTS_FD)
    finally:
        os._exit(70)
