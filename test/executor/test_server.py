"""The executor's accept loop over a real unix socket, in a child process (no sandbox)."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import cloudpickle

from readie_executor import PROTOCOL_VERSION, frames

SERVER = r"""
import sys
from readie_executor import container, sandbox
from readie_executor.capture import OutputCapture
from readie_executor.server import Executor
listener = sandbox.listen(sys.argv[1])
container.fresh_main()
Executor(listener, OutputCapture(), {"container": "c-test", "checkpoint": "", "modules": []}).serve_forever()
"""


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.dir.name, "executor.sock")
        env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..", "..", "src", "executor"))
        cls.process = subprocess.Popen([sys.executable, "-c", SERVER, cls.path], env=env)

    @classmethod
    def tearDownClass(cls):
        cls.process.kill()
        cls.process.wait()
        cls.dir.cleanup()

    def connect(self):
        deadline = time.monotonic() + 20
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(self.path)
                break
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        reader = sock.makefile("rb")
        kind, body = frames.read_frame(reader)
        self.assertEqual(kind, frames.HELLO)
        return sock, reader, json.loads(body)

    def call(self, fmt, payload, pieces=1):
        sock, reader, hello = self.connect()
        sock.sendall(frames.encode_json(frames.CALL, {"format": fmt}))
        step = max(1, len(payload) // pieces)
        for start in range(0, len(payload), step):
            sock.sendall(frames.encode(frames.PAYLOAD, payload[start : start + step]))
        sock.sendall(frames.encode(frames.PAYLOAD_END))
        logs, result = [], b""
        while True:
            kind, body = frames.read_frame(reader)
            if kind == frames.LOG:
                logs.append((body[0], body[1:].decode()))
            elif kind == frames.RESULT:
                result += body
            elif kind == frames.RESULT_END:
                end = json.loads(body)
                break
        sock.close()
        return hello, logs, result, end

    def test_hello_names_the_protocol_python_and_container(self):
        sock, _reader, hello = self.connect()
        sock.close()
        self.assertEqual(hello["protocol"], PROTOCOL_VERSION)
        self.assertEqual(hello["container"], "c-test")
        self.assertRegex(hello["python"], r"^3\.\d+\.\d+")
        self.assertIn("ok", hello["dns"])

    def test_a_call_in_pieces_with_logs(self):
        def work(n):
            print("working on", n)
            return n * 2

        _hello, logs, result, end = self.call("cloudpickle", cloudpickle.dumps((work, (21,), {})), pieces=5)
        self.assertEqual(cloudpickle.loads(result), {"ok": True, "value": 42})
        self.assertEqual(end["ok"], True)
        self.assertIn((frames.STDOUT, "working on 21"), logs)

    def test_a_function_that_raises_says_so_in_result_end(self):
        source = "def f():\n    raise ValueError('bad input\\nsecond line')\n"
        payload = json.dumps({"module": None, "source": source, "function": "f"}).encode()
        _hello, _logs, result, end = self.call("json-call", payload)
        self.assertEqual(json.loads(result)["error"]["type"], "ValueError")
        self.assertFalse(end["ok"])
        self.assertEqual(end["raised"]["type"], "ValueError")
        self.assertEqual(end["raised"]["message"], "bad input ...")
        self.assertIn("raise ValueError", end["raised"]["traceback"])
        ok_payload = json.dumps({"module": None, "source": "def f():\n    return 1\n", "function": "f"}).encode()
        self.assertNotIn("raised", self.call("json-call", ok_payload)[3])

    def test_state_persists_from_connection_to_connection(self):
        source = "def f():\n    global seen\n    seen = globals().get('seen', 0) + 1\n    return seen\n"
        payload = json.dumps({"module": None, "source": source, "function": "f"}).encode()
        first = json.loads(self.call("json-call", payload)[2])
        second = json.loads(self.call("json-call", payload)[2])
        self.assertEqual(second["value"], first["value"] + 1)

    def test_an_unexpected_frame_gets_an_error_frame(self):
        sock, reader, _hello = self.connect()
        sock.sendall(frames.encode(frames.RESULT, b"?"))
        kind, body = frames.read_frame(reader)
        self.assertEqual(kind, frames.ERROR)
        self.assertIn("unexpected RESULT", json.loads(body)["message"])
        sock.close()

    def test_a_call_for_a_version_the_container_does_not_hold_is_refused(self):
        # This container started cold ("checkpoint": ""): no pinned call may run in it.
        sock, reader, _hello = self.connect()
        sock.sendall(frames.encode_json(frames.CALL, {"format": "json-call", "version": "policy-v1"}))
        kind, body = frames.read_frame(reader)
        self.assertEqual(kind, frames.ERROR)
        error = json.loads(body)
        self.assertEqual(error["reason"], "version")
        self.assertIn("not version 'policy-v1'", error["message"])
        self.assertIsNone(frames.read_frame(reader))
        sock.close()

    def test_a_call_without_a_version_still_runs(self):
        payload = json.dumps({"module": None, "source": "def f():\n    return 1\n", "function": "f"}).encode()
        self.assertEqual(json.loads(self.call("json-call", payload)[2])["value"], 1)

    def test_a_large_result_comes_in_pieces_of_at_most_1_mib(self):
        payload = json.dumps({"module": None, "source": "def f():\n    return 'z' * 3000000\n", "function": "f"}).encode()
        sock, reader, _hello = self.connect()
        sock.sendall(frames.encode_json(frames.CALL, {"format": "json-call"}))
        sock.sendall(frames.encode(frames.PAYLOAD, payload) + frames.encode(frames.PAYLOAD_END))
        sizes = []
        while True:
            kind, body = frames.read_frame(reader)
            if kind == frames.RESULT:
                sizes.append(len(body))
            if kind == frames.RESULT_END:
                break
        sock.close()
        self.assertGreaterEqual(len(sizes), 3)
        self.assertLessEqual(max(sizes), frames.MAX_PIECE)


if __name__ == "__main__":
    unittest.main()
