"""Package installs into a container's own prefix, with the installer's output streamed.

The worker decides the command (pip or uv, index or local wheel directory); the executor runs it
inside the sandbox, as the container's user, and then puts the prefix's site directories first on
`sys.path` so the next call imports what was installed.
"""

import importlib
import os
import site
import subprocess
import sys

from .frames import SYSTEM


def site_dirs(prefix):
    """The site-packages (or Debian dist-packages) directories under an install prefix."""
    found = []
    for root, dirs, _files in os.walk(prefix):
        depth = root[len(prefix) :].count(os.sep)
        if os.path.basename(root) in ("site-packages", "dist-packages"):
            found.append(root)
            dirs[:] = []
        elif depth >= 4:
            dirs[:] = []
        else:
            dirs.sort()
    return found


def activate(prefix):
    """Puts the prefix's site directories first on sys.path (processing their .pth files)."""
    for directory in reversed(site_dirs(prefix)):
        if directory not in sys.path:
            sys.path.insert(0, directory)
            site.addsitedir(directory)
    importlib.invalidate_caches()


def install(request, send_log):
    """Runs the install command of an INSTALL frame; returns the INSTALL_DONE body."""
    argv = request.get("argv")
    prefix = request.get("prefix")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return {"ok": False, "exitCode": None, "message": "INSTALL needs argv, a list of strings"}
    if not isinstance(prefix, str) or not prefix:
        return {"ok": False, "exitCode": None, "message": "INSTALL needs prefix, a directory"}
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (request.get("env") or {}).items()})
    # The installer must see what earlier installs of this container put in the prefix.
    dirs = site_dirs(prefix)
    if dirs:
        env["PYTHONPATH"] = os.pathsep.join(dirs)
    else:
        env.pop("PYTHONPATH", None)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
    except OSError as error:
        return {"ok": False, "exitCode": None, "message": f"could not run {argv[0]}: {error}"}
    with process.stdout:
        for raw in process.stdout:
            send_log(SYSTEM, raw.decode("utf-8", "replace").rstrip("\r\n"))
    code = process.wait()
    if code != 0:
        return {"ok": False, "exitCode": code, "message": f"{argv[0]} exited with code {code}"}
    activate(prefix)
    return {"ok": True, "exitCode": 0, "message": "installed"}
