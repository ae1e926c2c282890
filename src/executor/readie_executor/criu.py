"""The CRIU restore backend's Python side: what its two halves share.

criu_seed.py dumps a checkpoint (`--criu-seed`); criu_restore.py restores containers from it
(`--criu-launcher`). The dumped executor holds two pipes, its channel to the worker, in place on
SPEC_FD (its container spec comes in) and EVENTS_FD (its events go out); each restore hands it
new ones through `criu restore --inherit-fd`.
"""

import fcntl
import json
import os
import signal
import time

SPEC_FD = 3
EVENTS_FD = 4
# An image snapshot's listening socket (image_seed.py, image_restore.py).
LISTENER_FD = 5
# criu's cache of the kernel's features. Its detection does not pass inside a sandbox (no route
# out of its network namespace, for one), so each criu run there is handed the host's cache.
KDAT = "/dev/shm/criu.kdat"


def _place(mapping):
    """dup2 each source fd onto its target fd, without one placement clobbering another."""
    high = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 100) for target, source in mapping.items()}
    for target, source in high.items():
        os.dup2(source, target, inheritable=True)
        os.close(source)


def _read_line(fd):
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_event(fd):
    """One event line read from `fd`, as a dict ({} for anything else, or for none)."""
    try:
        event = json.loads(_read_line(fd))
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def restore_argv(criu, images, workdir, pidfile, log, inherit, *extra):
    """`criu restore` of the image in `images` as the launcher's restorers run it: detached, the
    restored task a sibling of criu, cgroups left as they are; `inherit` maps an fd number to the
    resource it replaces (`pipe:[ino]`, `socket:[ino]`)."""
    argv = [criu, "restore", "--images-dir", images, "--work-dir", workdir, "--restore-detached", "--restore-sibling"]
    argv += ["--pidfile", pidfile, "--manage-cgroups=ignore"]
    for fd, resource in inherit.items():
        argv += ["--inherit-fd", f"fd[{fd}]:{resource}"]
    return argv + ["--log-file", log, "-v2", *extra]


def _tail(path, lines=3):
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            return " | ".join(line.strip() for line in log.readlines()[-lines:])
    except OSError as error:
        return f"(no log: {error.strerror})"


def _wait_exit(pid):
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _kill(pid):
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def host_kdat(criu):
    """The host's criu feature cache (made by `criu check` when there is none yet)."""
    if not os.path.exists(KDAT):
        import subprocess

        subprocess.run([criu, "check"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    with open(KDAT, "rb") as cache:
        return cache.read()


def place_kdat(kdat):
    """In the container's own /dev/shm (root's alone), for the criu that runs there."""
    fd = os.open(KDAT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    _write_all(fd, kdat)
    os.close(fd)


def _kill_cgroup_members(spec):
    """SIGKILLs every process in the container's cgroups (R is in none of them) until none is left."""
    files = spec.get("cgroupProcs") or []
    for _ in range(100):
        members = set()
        for procs in [files] if isinstance(files, str) else files:
            try:
                with open(procs, encoding="ascii") as listed:
                    members.update(int(line) for line in listed if line.strip())
            except (OSError, ValueError):
                continue
        if not members:
            return
        for member in members:
            _kill(member)
        time.sleep(0.001)


def _pidfd(pid):
    if not pid:
        return None
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)  # the worker is gone: restore nothing
