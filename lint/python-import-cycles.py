"""Refuses import circles inside a Python package: `python3 lint/python-import-cycles.py DIR...`.

Every `import` of the package's own modules counts, wherever it is written: at the top, inside a
function (a lazy import) or under `if TYPE_CHECKING:`. A circle drawn with lazy imports still
means two modules that cannot be read one without the other; the shared names belong a layer
down. The package's `__init__.py` (its public face, which imports everything) is left out.
Prints each circle found and exits 1; exits 0 when there is none.
"""

import ast
import os
import sys


def own_imports(package, path, module):
    """The package's modules that the file at `path` (module `module`) imports."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level > 0:
                base = module.split(".")[: -node.level] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
                names += [f"{node.module}.{a.name}" for a in node.names]
            found.update(n for n in names if n.startswith(package + "."))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(package + "."))
    return found


def cycles(directory):
    """Each import circle among the modules of the package in `directory`, as module names."""
    package = os.path.basename(os.path.normpath(directory))
    graph = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py") and name != "__init__.py":
            module = f"{package}.{name[:-3]}"
            graph[module] = own_imports(package, os.path.join(directory, name), module)
    for module in graph:
        graph[module] = {d for d in graph[module] if d in graph and d != module}
    found = []
    seen = set()
    state = {}

    def visit(module, stack):
        state[module] = "open"
        stack.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == "open":
                circle = stack[stack.index(dep) :] + [dep]
                key = frozenset(circle)
                if key not in seen:
                    seen.add(key)
                    found.append(circle)
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[module] = "done"

    for module in graph:
        if module not in state:
            visit(module, [])
    return found


def main(directories):
    failed = False
    for directory in directories:
        for circle in cycles(directory):
            failed = True
            print(f"{directory}: import circle: {' -> '.join(circle)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
