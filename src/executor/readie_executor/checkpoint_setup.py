"""A checkpoint's setup: Python run once after its imports, before it is frozen (e.g. load weights).

The setup source runs as the body of module `readie_checkpoint`, so every container restored from
the checkpoint reaches what it defined with `import readie_checkpoint`. It is operator code (it
comes from the worker's catalogue) and runs before the sandbox, as the worker's user.
"""

import sys
import types

MODULE = "readie_checkpoint"


def run_setup(path):
    """Runs the setup source in `path` (nothing when `path` is empty); raises what it raises."""
    if not path:
        return
    with open(path, encoding="utf-8") as source_file:
        source = source_file.read()
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    try:
        exec(compile(source, "<checkpoint setup>", "exec"), module.__dict__)  # noqa: S102
    except BaseException:
        del sys.modules[MODULE]
        raise
