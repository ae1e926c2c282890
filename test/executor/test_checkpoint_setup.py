"""A checkpoint's setup: run once as module readie_checkpoint; a failing one leaves nothing."""

import os
import sys
import tempfile
import unittest

from readie_executor import checkpoint_setup


class CheckpointSetupTest(unittest.TestCase):
    def setup_file(self, source):
        handle, path = tempfile.mkstemp(suffix=".py")
        with os.fdopen(handle, "w") as out:
            out.write(source)
        self.addCleanup(os.unlink, path)
        self.addCleanup(sys.modules.pop, checkpoint_setup.MODULE, None)
        return path

    def test_what_the_setup_defines_is_importable_as_readie_checkpoint(self):
        checkpoint_setup.run_setup(self.setup_file("import math\nweights = [math.pi] * 3\n"))
        import readie_checkpoint

        self.assertEqual(len(readie_checkpoint.weights), 3)

    def test_a_failing_setup_raises_and_registers_no_module(self):
        with self.assertRaisesRegex(ValueError, "no weights"):
            checkpoint_setup.run_setup(self.setup_file("raise ValueError('no weights')\n"))
        self.assertNotIn(checkpoint_setup.MODULE, sys.modules)

    def test_no_setup_does_nothing(self):
        checkpoint_setup.run_setup("")
        self.assertNotIn(checkpoint_setup.MODULE, sys.modules)


if __name__ == "__main__":
    unittest.main()
