"""The CRIU restore backend's Python side: what its two halves share.

criu_seed.py dumps a checkpoint (`--criu-seed`); criu_restore.py restores containers from it
(`--criu-launcher`). The dumped executor holds two pipes, its channel to the worker, in place on
SPEC_FD (its container spec comes in) and EVENTS_FD (its events go out); each restore hands it
new ones through `criu restore --inherit-fd`.
"""

import fcntl
import os
import signal

SPEC_FD = 3
EVENTS_FD = 4


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
