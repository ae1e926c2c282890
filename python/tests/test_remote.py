import importlib
import os
import sys
import tempfile
import textwrap
import unittest

import cloudpickle

import readie
from readie._call import pack_call

USER_MODULE = textwrap.dedent(
    """
    import readie

    SCALE = 10

    def helper(x):
        return x * SCALE

    @readie.remote(memory="512MiB")
    def task(x):
        return helper(x) + 1

    @readie.remote
    def countdown(n):
        return 0 if n == 0 else countdown(n - 1) + 1
    """
)


class DecoratorTest(unittest.TestCase):
    def test_bare_and_with_options(self):
        @readie.remote
        def plain(a):
            "Doc."
            return a

        @readie.remote(memory="2GiB", gpu_memory="1GiB", packages=["tqdm"], checkpoint_id="ckpt-numpy")
        def configured(a):
            return a

        self.assertIsInstance(plain, readie.RemoteFunction)
        self.assertEqual(plain.__name__, "plain")
        self.assertEqual(plain.__doc__, "Doc.")
        self.assertIsNone(plain.options.demand.memory)
        self.assertTrue(plain.options.stream_logs)
        demand = configured.options.demand
        self.assertEqual((demand.memory, demand.gpu_memory), (2 * 1024**3, 1024**3))
        self.assertEqual(demand.packages, ("tqdm",))
        self.assertEqual(demand.checkpoint_id, "ckpt-numpy")
        self.assertIsNone(plain.last_call)

    def test_mistakes_show_at_definition(self):
        with self.assertRaisesRegex(ValueError, "memory"):
            readie.remote(memory="lots")
        with self.assertRaisesRegex(TypeError, "packages must be a list"):
            readie.remote(packages="tqdm")
        with self.assertRaisesRegex(TypeError, "non-empty strings"):
            readie.remote(packages=["tqdm", ""])
        with self.assertRaisesRegex(TypeError, "checkpoint_id"):
            readie.remote(checkpoint_id=3)
        with self.assertRaisesRegex(TypeError, "decorates a function"):
            readie.remote(memory="1GiB")(42)

    def test_import_hints_include_explicit_ones(self):
        import numpy as np

        @readie.remote(imports=["torch"])
        def uses_numpy():
            return np.ones(1)

        self.assertEqual(uses_numpy.import_hints(), ["numpy", "torch"])


class PackingTest(unittest.TestCase):
    """A user's own module travels by value, so the sandbox needs no copy of it."""

    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        with open(os.path.join(self.directory.name, "readie_user_module.py"), "w") as handle:
            handle.write(USER_MODULE)
        sys.path.insert(0, self.directory.name)
        self.module = importlib.import_module("readie_user_module")

    def tearDown(self):
        sys.path.remove(self.directory.name)
        sys.modules.pop("readie_user_module", None)
        self.directory.cleanup()

    def unpickle_without_the_module(self, payload):
        sys.path.remove(self.directory.name)
        sys.modules.pop("readie_user_module")
        try:
            return cloudpickle.loads(payload)
        finally:
            sys.path.insert(0, self.directory.name)

    def test_function_and_module_helpers_travel_by_value(self):
        payload = pack_call(self.module.task._fn, (4,), {})
        fn, args, kwargs = self.unpickle_without_the_module(payload)
        self.assertEqual(fn(*args, **kwargs), 41)
        # Registration is undone after packing.
        self.assertNotIn("readie_user_module", cloudpickle.cloudpickle._PICKLE_BY_VALUE_MODULES)

    def test_a_remote_function_is_the_plain_function_in_the_sandbox(self):
        payload = pack_call(self.module.countdown._fn, (3,), {})
        fn, args, _ = self.unpickle_without_the_module(payload)
        self.assertEqual(fn(*args), 3)
        self.assertNotIsInstance(fn, readie.RemoteFunction)

    def test_which_modules_travel_by_value(self):
        import numpy  # noqa: F401 - an installed package (dist-packages)

        from readie._call import _travels_by_reference

        self.assertFalse(_travels_by_reference("readie_user_module"))
        self.assertTrue(_travels_by_reference("numpy"))
        self.assertTrue(_travels_by_reference("__main__"))
        self.assertTrue(_travels_by_reference("json"))
        self.assertTrue(_travels_by_reference("readie._remote"))
        self.assertTrue(_travels_by_reference("not_imported_anywhere"))

    def test_a_pickled_remote_function_unpickles_as_the_plain_function(self):
        @readie.remote
        def double(x):
            return 2 * x

        restored = cloudpickle.loads(cloudpickle.dumps(double))
        self.assertNotIsInstance(restored, readie.RemoteFunction)
        self.assertEqual(restored(4), 8)


if __name__ == "__main__":
    unittest.main()


class ImageTest(unittest.TestCase):
    def test_an_image_travels_in_the_config(self):
        from readie._wire import build_config

        image = readie.Image(packages=["tomli==2.0.1"], imports=["tomli"], env={"MODE": "x"})

        @readie.remote(image=image)
        def f():
            return 1

        config = build_config("req-1", f.options.demand, [])
        self.assertEqual(list(config.image.packages), ["tomli==2.0.1"])
        self.assertEqual(list(config.image.imports), ["tomli"])
        self.assertEqual(dict(config.image.env), {"MODE": "x"})
        self.assertFalse(build_config("req-2", readie.remote(lambda: 1).options.demand, []).HasField("image"))

    def test_bad_images_are_refused_where_they_are_declared(self):
        with self.assertRaises(TypeError):
            readie.Image(packages="tomli")
        with self.assertRaises(ValueError):
            readie.Image(imports=["not a module"])
        with self.assertRaises(ValueError):
            readie.Image(env={"READIE_WORKER_ID": "x"})
        with self.assertRaises(TypeError):
            readie.remote(image=["tomli"])
        with self.assertRaises(ValueError):
            readie.remote(image=readie.Image(packages=["tomli"]), pinned=True)
