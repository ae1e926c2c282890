"""Entering an image (docs/images.md): its installed prefix first on `sys.path`, its environment
set, its modules imported, all inside the sandbox as the container's user.

The worker sends IMAGE once per container, before the first call: when the image is built (its
prefix freshly installed, so a failed import fails the build with the module and its traceback)
and in every container restored for it later.
"""

import importlib
import os
import sys
import time
import traceback

from .install import activate

_MAX_TRACEBACK = 8000


def enter_image(request):
    """Runs an IMAGE frame; returns the IMAGE_DONE body."""
    prefix = request.get("prefix")
    modules = request.get("imports") or []
    env = request.get("env") or {}
    if not isinstance(prefix, str) or not prefix:
        return {"ok": False, "message": "IMAGE needs prefix, a directory", "module": None}
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        return {"ok": False, "message": "IMAGE needs imports, a list of module names", "module": None}
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        return {"ok": False, "message": "IMAGE needs env, an object of strings", "module": None}
    started = time.perf_counter()
    os.environ.update(env)
    activate(prefix)
    for module in modules:
        try:
            importlib.import_module(module)
        except BaseException as error:  # noqa: BLE001 - an import may raise anything
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            return {
                "ok": False,
                "module": module,
                "message": f"importing {module} failed: {type(error).__name__}: {error}\n"
                + text[-_MAX_TRACEBACK:],
            }
    ms = round((time.perf_counter() - started) * 1000, 3)
    return {"ok": True, "module": None, "message": f"image entered in {ms} ms"}
