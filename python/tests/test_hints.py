import sys
import types
import unittest
from unittest import mock

import numpy
import numpy as np
from numpy.linalg import norm

from readie._hints import bytecode_imports, import_hints, source_imports


def uses_alias(values):
    return np.sum(values)


def uses_imported_function(values):
    return norm(values)


def imports_inside():
    import json  # stdlib: dropped
    import torch.nn as nn
    from sklearn.linear_model import LinearRegression
    from . import sibling  # relative: skipped
    import pandas, scipy.sparse

    return nn, LinearRegression, sibling, pandas, scipy


def nested_import():
    def inner():
        import polars

        return polars

    return [lambda: numpy.zeros(1) for _ in range(1)], inner


def stdlib_only():
    import os
    import collections.abc

    return os.getcwd(), sys.argv, collections.abc


def closure_over_module():
    module = np

    def uses_cell():
        return module.ones(2)

    return uses_cell


class SourceImportsTest(unittest.TestCase):
    def test_import_statements(self):
        source = "import a.b as c, d\nfrom e.f import g\nfrom .h import i\nfrom . import j\n"
        self.assertEqual(source_imports(source), {"a", "d", "e"})

    def test_indented_source(self):
        self.assertEqual(source_imports("    def f():\n        import x.y\n"), {"x"})


class ImportHintsTest(unittest.TestCase):
    def test_module_alias_resolves_to_its_top_level_package(self):
        self.assertEqual(import_hints(uses_alias), ["numpy"])

    def test_imported_function_resolves_to_its_package(self):
        self.assertEqual(import_hints(uses_imported_function), ["numpy"])

    def test_import_statements_in_the_body(self):
        self.assertEqual(import_hints(imports_inside), ["pandas", "scipy", "sklearn", "torch"])

    def test_nested_functions_and_comprehensions(self):
        self.assertEqual(import_hints(nested_import), ["numpy", "polars"])

    def test_stdlib_is_dropped(self):
        self.assertEqual(import_hints(stdlib_only), [])

    def test_closure_variables(self):
        self.assertEqual(import_hints(closure_over_module()), ["numpy"])

    def test_explicit_imports_are_added(self):
        self.assertEqual(import_hints(stdlib_only, ["torch.cuda", "pandas"]), ["pandas", "torch"])

    def test_a_module_name_the_router_would_refuse_is_not_derived(self):
        namespace = {}
        exec("def f():\n    import numpy, m\u00f3dulo\n    return numpy\n", namespace)
        self.assertEqual(import_hints(namespace["f"]), ["numpy"])

    def test_own_module_is_dropped(self):
        package = types.ModuleType("userpkg")
        namespace = {"__name__": "userpkg.tasks"}
        exec("def task():\n    return helper()\n", namespace)
        namespace["helper"] = namespace["task"]  # a function of the same module
        with mock.patch.dict(sys.modules, {"userpkg": package}):
            self.assertEqual(import_hints(namespace["task"]), [])

    def test_without_source_bytecode_stands_in(self):
        namespace = {}
        exec("def f():\n    import torch.nn\n    from .rel import x\n    return torch\n", namespace)
        self.assertEqual(bytecode_imports(namespace["f"].__code__), {"torch"})
        self.assertEqual(import_hints(namespace["f"]), ["torch"])

    def test_lambdas_and_callables_without_code(self):
        self.assertEqual(import_hints(lambda: np.ones(1)), ["numpy"])
        self.assertEqual(import_hints(len), [])
        self.assertEqual(import_hints(len, ["numpy"]), ["numpy"])

    def test_sorted_and_unique(self):
        hints = import_hints(imports_inside, ["torch", "aaa"])
        self.assertEqual(hints, sorted(set(hints)))
        self.assertEqual(hints[0], "aaa")


if __name__ == "__main__":
    unittest.main()
