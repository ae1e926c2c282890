"""Import hints: the top-level modules a function uses, so the router can pick a checkpoint that
already imported them.

Three sources, united:

1. ``import`` statements in the function's source (``ast``), including ones nested in inner
   functions; relative imports are skipped. Where the source is unavailable (a REPL, ``exec``),
   the ``IMPORT_NAME`` instructions of its bytecode stand in.
2. Global names the code (and its nested code objects) reads, resolved in the function's globals
   and closure: a module gives its top-level package (``np`` -> ``numpy``), a class or function
   gives the top-level package of its ``__module__`` (``from torch import nn`` -> ``torch``).
3. Hints the caller names explicitly (``imports=[...]``).

Dropped: the standard library (``sys.stdlib_module_names``), ``__main__``, the function's own
module, and what every sandbox already has (``readie``, ``cloudpickle``).
"""

from __future__ import annotations

import ast
import dis
import inspect
import sys
import textwrap
import types
from typing import Any, Callable, Iterable, Iterator, List, Optional, Set

# What the executor in every sandbox imports anyway, besides the standard library.
_ALWAYS_PRESENT = frozenset({"readie", "cloudpickle", "__main__", "builtins", "__future__"})


def top_level(module_name: str) -> str:
    """``"numpy.linalg"`` -> ``"numpy"``."""
    return module_name.split(".", 1)[0]


def is_hint_worthy(name: str, own_module: Optional[str] = None) -> bool:
    """Whether a top-level module name is worth a hint: not stdlib, not always present, and one
    the router takes (ASCII letters, digits and ``_``: a derived hint it would refuse is dropped,
    as hints are only hints)."""
    if not name or name in _ALWAYS_PRESENT or name in sys.stdlib_module_names:
        return False
    if not (name.isascii() and name.isidentifier()):
        return False
    if name.startswith("_"):  # private modules: C helpers of the stdlib or of a package
        return False
    return own_module is None or name != top_level(own_module)


def source_imports(source: str) -> Set[str]:
    """Top-level modules named by absolute ``import`` statements in Python source."""
    tree = ast.parse(textwrap.dedent(source))
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(top_level(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(top_level(node.module))
    return found


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _code_objects(constant)


def bytecode_imports(code: types.CodeType) -> Set[str]:
    """Top-level modules named by absolute imports in compiled code (when source is missing)."""
    found: Set[str] = set()
    for nested in _code_objects(code):
        instructions = list(dis.get_instructions(nested))
        for index, instruction in enumerate(instructions):
            if instruction.opname != "IMPORT_NAME":
                continue
            # IMPORT_NAME follows LOAD_CONST level, LOAD_CONST fromlist: skip relative imports.
            level = instructions[index - 2].argval if index >= 2 else 0
            if level == 0 and isinstance(instruction.argval, str):
                found.add(top_level(instruction.argval))
    return found


def _module_of(value: Any) -> Optional[str]:
    if isinstance(value, types.ModuleType):
        return value.__name__
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and (inspect.isclass(value) or callable(value)):
        return module
    return None


def referenced_modules(fn: types.FunctionType) -> Set[str]:
    """Top-level modules behind the globals and closure variables ``fn``'s code reads."""
    names: Set[str] = set()
    for nested in _code_objects(fn.__code__):
        names.update(nested.co_names)
    found: Set[str] = set()
    for name in names:
        if name in fn.__globals__:
            module = _module_of(fn.__globals__[name])
            if module:
                found.add(top_level(module))
    for cell in fn.__closure__ or ():
        try:
            module = _module_of(cell.cell_contents)
        except ValueError:  # an empty cell
            continue
        if module:
            found.add(top_level(module))
    return found


def _unwrap(fn: Callable[..., Any]) -> Optional[types.FunctionType]:
    fn = inspect.unwrap(fn)
    if isinstance(fn, types.MethodType):
        fn = fn.__func__
    return fn if isinstance(fn, types.FunctionType) else None


def static_imports(fn: Callable[..., Any]) -> Set[str]:
    """The import statements of ``fn``: from its source, or from its bytecode without source.

    These cannot change after definition, so callers may cache them."""
    function = _unwrap(fn)
    if function is None:
        return set()
    try:
        return source_imports(inspect.getsource(function))
    except (OSError, TypeError, SyntaxError):
        return bytecode_imports(function.__code__)


def import_hints(
    fn: Callable[..., Any],
    extra: Iterable[str] = (),
    *,
    static: Optional[Set[str]] = None,
) -> List[str]:
    """The sorted import hints of ``fn``: its imports, the modules behind the globals it reads,
    and ``extra``; see the module docstring for what is dropped. ``static`` is a cached
    :func:`static_imports` result."""
    function = _unwrap(fn)
    own_module = getattr(function, "__module__", None)
    found: Set[str] = set(static if static is not None else static_imports(fn))
    if function is not None:
        found |= referenced_modules(function)
    hints = {top_level(name) for name in found if is_hint_worthy(top_level(name), own_module)}
    # What the caller names explicitly is kept, apart from duplicates.
    hints.update(top_level(name) for name in extra if name)
    return sorted(hints)
