"""Output capture at the fd level, in a child process (it takes over fds 1 and 2)."""

import json
import os
import subprocess
import sys
import unittest

CHILD = r"""
import json, os, sys, time
from readie_executor.capture import OutputCapture
from readie_executor.frames import STDOUT, STDERR
real_out = os.dup(1)
capture = OutputCapture()
seen = []
capture.begin(lambda source, text: seen.append([source, text]))
print("line one")
print("to stderr", file=sys.stderr)
os.write(1, b"raw fd write\n")
os.system("echo from a shell")
sys.stdout.write("unterminated")
capture.drain()
capture.end()
print("dropped between calls")
capture.drain()
capture.begin(lambda source, text: seen.append([source, text]))
print("x" * 40000)
capture.drain()
os.write(real_out, json.dumps({"seen": seen}).encode())
"""


class CaptureTest(unittest.TestCase):
    def test_lines_from_every_writer_arrive_and_drain_flushes_partial_lines(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "src", "executor"))
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, check=True, timeout=30)
        result = json.loads(out.stdout)
        seen = result["seen"]
        stdout = [text for source, text in seen if source == 1 and not set(text) <= {"x"}]
        long_pieces = [text for source, text in seen if source == 1 and text and set(text) == {"x"}]
        stderr = [text for source, text in seen if source == 2]
        self.assertEqual(stderr, ["to stderr"])
        self.assertIn("line one", stdout)
        self.assertIn("raw fd write", stdout)
        self.assertIn("from a shell", stdout)
        # "unterminated" was written without a newline: the drain ends the line.
        self.assertEqual(stdout[-1], "unterminated")
        self.assertNotIn("dropped between calls", stdout)
        self.assertEqual(sum(len(text) for text in long_pieces), 40000)
        self.assertTrue(all(len(text) <= 16 * 1024 for text in long_pieces))


if __name__ == "__main__":
    unittest.main()
