"""Batches: one call carrying many inputs, each input's outcome streamed back with its index."""

import json
import operator
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import cloudpickle

from readie_executor import batches, calls, frames

SERVER = r"""
import sys
from readie_executor import container, sandbox
from readie_executor.capture import OutputCapture
from readie_executor.server import Executor
listener = sandbox.listen(sys.argv[1])
container.fresh_main()
Executor(listener, OutputCapture(), {"container": "c-test", "checkpoint": "", "modules": []}).serve_forever()
"""


def batch_payload(fn, inputs):
    """The cloudpickle batch layout: the function, then each input, each with its u32 length."""
    parts = [cloudpickle.dumps(fn)] + [cloudpickle.dumps((tuple(args), kwargs)) for args, kwargs in inputs]
    return b"".join(struct.pack(">I", len(part)) + part for part in parts)


def parse_records(body):
    """(index, flags, micros, data) of each record of an OUTCOME frame's body."""
    records, offset = [], 0
    while offset < len(body):
        index, flags, micros, length = frames.RECORD_HEADER.unpack_from(body, offset)
        offset += frames.RECORD_HEADER.size
        records.append((index, flags, micros, body[offset : offset + length]))
        offset += length
    return records


class Unloadable:
    """Pickles fine here, and fails to load in the container (1 / 0 when loaded)."""

    def __reduce__(self):
        return (operator.truediv, (1, 0))


class BatchOverSocketTest(unittest.TestCase):
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

    def run_batch(self, fmt, payload, inputs, max_inputs=0):
        """Sends one batch; returns (outcomes by index, frames of outcomes, input logs, untagged
        logs, RESULT_END, the order in which events came)."""
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
        self.assertEqual(frames.read_frame(reader)[0], frames.HELLO)
        sock.sendall(frames.encode_json(frames.CALL, {"format": fmt, "inputs": inputs, "maxInputs": max_inputs}))
        sock.sendall(frames.encode(frames.PAYLOAD, payload) + frames.encode(frames.PAYLOAD_END))
        outcomes, pieces, input_logs, logs, order = {}, {}, [], [], []
        outcome_frames = 0
        while True:
            kind, body = frames.read_frame(reader)
            if kind == frames.OUTCOME:
                outcome_frames += 1
                for index, flags, micros, data in parse_records(body):
                    pieces.setdefault(index, []).append(data)
                    if flags & frames.RECORD_LAST:
                        outcomes[index] = (bool(flags & frames.RECORD_OK), b"".join(pieces.pop(index)), micros)
                        order.append(("outcome", index))
            elif kind == frames.INPUT_LOG:
                index, source = struct.unpack_from(">IB", body)
                input_logs.append((index, source, body[5:].decode()))
                order.append(("log", index))
            elif kind == frames.LOG:
                logs.append((body[0], body[1:].decode()))
            elif kind == frames.RESULT_END:
                end = json.loads(body)
                break
            else:
                self.fail(f"unexpected frame {frames.NAMES.get(kind, kind)}")
        sock.close()
        return outcomes, outcome_frames, input_logs, logs, end, order

    def test_each_input_has_its_outcome_and_a_failing_one_fails_alone(self):
        def check(n):
            if n == 2:
                raise ValueError(f"input {n} is bad")
            return n * 10

        payload = batch_payload(check, [((n,), {}) for n in range(5)])
        outcomes, _frames, _, _, end, _ = self.run_batch("cloudpickle", payload, 5)
        self.assertEqual(sorted(outcomes), [0, 1, 2, 3, 4])
        values = {index: cloudpickle.loads(data) for index, (_ok, data, _) in outcomes.items()}
        self.assertEqual([values[i]["value"] for i in (0, 1, 3, 4)], [0, 10, 30, 40])
        self.assertFalse(outcomes[2][0])
        self.assertEqual(values[2]["error"]["type"], "ValueError")
        self.assertEqual(values[2]["error"]["message"], "input 2 is bad")
        self.assertIsInstance(values[2]["exception"], ValueError)
        self.assertEqual(end["ok"], False)

    def test_an_input_that_does_not_load_fails_alone(self):
        payload = batch_payload(lambda x: x, [((1,), {}), ((Unloadable(),), {}), ((3,), {})])
        outcomes, *_ = self.run_batch("cloudpickle", payload, 3)
        envelopes = {i: cloudpickle.loads(data) for i, (_ok, data, _) in outcomes.items()}
        self.assertEqual(envelopes[0]["value"], 1)
        self.assertEqual(envelopes[2]["value"], 3)
        self.assertEqual(envelopes[1]["error"]["type"], "ZeroDivisionError")

    def test_lines_written_one_at_a_time_are_tagged_and_come_before_their_outcome(self):
        def noisy(n):
            print(f"stdout of {n}")
            os.write(2, f"stderr of {n}\n".encode())
            return n

        outcomes, _f, input_logs, logs, _end, order = self.run_batch(
            "cloudpickle", batch_payload(noisy, [((n,), {}) for n in range(3)]), 3
        )
        self.assertEqual(len(outcomes), 3)
        for n in range(3):
            self.assertIn((n, frames.STDOUT, f"stdout of {n}"), input_logs)
            self.assertIn((n, frames.STDERR, f"stderr of {n}"), input_logs)
            logs_of_n = [i for i, event in enumerate(order) if event == ("log", n)]
            self.assertLess(max(logs_of_n), order.index(("outcome", n)))
        self.assertEqual(logs, [])

    def test_fast_outcomes_share_frames(self):
        payload = batch_payload(lambda x: x * 2, [((n,), {}) for n in range(1000)])
        outcomes, outcome_frames, *_ = self.run_batch("cloudpickle", payload, 1000)
        self.assertEqual(len(outcomes), 1000)
        self.assertEqual(cloudpickle.loads(outcomes[999][1])["value"], 1998)
        self.assertLess(outcome_frames, 200)

    def test_max_inputs_runs_threads_at_once_with_their_own_lines(self):
        def nap(n):
            print(f"napping {n}")
            started = time.monotonic()
            time.sleep(0.3)
            return started, time.monotonic()

        outcomes, _f, input_logs, *_ = self.run_batch(
            "cloudpickle", batch_payload(nap, [((n,), {}) for n in range(8)]), 8, max_inputs=8
        )
        self.assertEqual(sorted(outcomes), list(range(8)))
        spans = [cloudpickle.loads(data)["value"] for _ok, data, _m in outcomes.values()]
        self.assertLess(max(start for start, _ in spans), min(end for _, end in spans), "all eight ran at once")
        self.assertEqual(sorted(input_logs), [(n, frames.STDOUT, f"napping {n}") for n in range(8)])

    def test_an_async_function_runs_as_tasks_at_once(self):
        import asyncio

        async def nap(n):
            started = time.monotonic()
            await asyncio.sleep(0.3)
            print(f"task {n}")
            return n + 1, started, time.monotonic()

        outcomes, _f, input_logs, *_ = self.run_batch(
            "cloudpickle", batch_payload(nap, [((n,), {}) for n in range(6)]), 6, max_inputs=6
        )
        values = {i: cloudpickle.loads(d)["value"] for i, (_, d, _) in outcomes.items()}
        self.assertEqual({i: value[0] for i, value in values.items()}, {n: n + 1 for n in range(6)})
        self.assertLess(max(v[1] for v in values.values()), min(v[2] for v in values.values()))
        self.assertEqual(sorted(input_logs), [(n, frames.STDOUT, f"task {n}") for n in range(6)])

    def test_a_json_batch_with_kwargs_for_every_input_and_a_bad_input(self):
        source = "def f(a, scale=1):\n    return a * scale\n"
        payload = json.dumps({"source": source, "function": "f", "inputs": [[1], [2], "x", [4]], "kwargs": {"scale": 3}}).encode()
        outcomes, *_ = self.run_batch("json-call", payload, 4)
        envelopes = {i: json.loads(d) for i, (_ok, d, _) in outcomes.items()}
        self.assertEqual([envelopes[i]["value"] for i in (0, 1, 3)], [3, 6, 12])
        self.assertEqual(envelopes[2]["error"]["type"], "CallError")

    def test_a_function_that_does_not_load_fails_every_input(self):
        payload = json.dumps({"source": "def g():\n    pass\n", "function": "f", "inputs": [[1], [2]]}).encode()
        outcomes, _f, _l, _logs, end, _o = self.run_batch("json-call", payload, 2)
        self.assertEqual(sorted(outcomes), [0, 1])
        for _ok, data, _m in outcomes.values():
            self.assertIn('defines no "f"', json.loads(data)["error"]["message"])
        self.assertFalse(end["ok"])

    def test_a_large_result_comes_in_records_of_at_most_a_piece(self):
        payload = batch_payload(lambda n: b"z" * n, [((3 * 1024 * 1024,), {}), ((5,), {})])
        outcomes, *_ = self.run_batch("cloudpickle", payload, 2)
        self.assertEqual(cloudpickle.loads(outcomes[0][1])["value"], b"z" * 3 * 1024 * 1024)
        self.assertEqual(cloudpickle.loads(outcomes[1][1])["value"], b"zzzzz")

    def test_a_batch_whose_count_does_not_match_its_payload_fails_every_input(self):
        payload = batch_payload(lambda x: x, [((1,), {})])
        outcomes, *_ = self.run_batch("cloudpickle", payload, 2)
        for _ok, data, _m in outcomes.values():
            self.assertIn("holds 1 inputs, not 2", cloudpickle.loads(data)["error"]["message"])


class OutcomeTest(unittest.TestCase):
    def test_an_outcome_over_the_bound_becomes_an_error_of_its_own(self):
        batch = batches.Batch(calls.JSON_CALL, 1, json.dumps({"source": "def f(): pass", "function": "f", "inputs": [[]]}).encode(), {})
        saved = frames.MAX_OUTCOME_BYTES
        frames.MAX_OUTCOME_BYTES = 100
        try:
            records = batches.outcome(batch, 0, {"ok": True, "value": "y" * 500}, None, 1.0)
        finally:
            frames.MAX_OUTCOME_BYTES = saved
        index, flags, _micros, data = parse_records(b"".join(records))[0]
        self.assertEqual((index, flags), (0, frames.RECORD_LAST))
        self.assertIn("a batch input's result holds at most 100 bytes", json.loads(data)["error"]["message"])

    def test_records_split_an_envelope_into_pieces_the_last_flagged(self):
        records = frames.outcome_records(7, True, 12.5, b"a" * (frames.MAX_RECORD_DATA + 10))
        parsed = [parse_records(record)[0] for record in records]
        self.assertEqual([(i, f, m, len(d)) for i, f, m, d in parsed], [(7, frames.RECORD_OK, 12, frames.MAX_RECORD_DATA), (7, frames.RECORD_OK | frames.RECORD_LAST, 12, 10)])
        self.assertTrue(all(len(record) <= frames.MAX_PIECE for record in records))

    def test_the_payload_layout_is_checked(self):
        with self.assertRaises(calls.CallError):
            batches.split_payload(struct.pack(">I", 10) + b"abc", 0)
        function, inputs = batches.split_payload(struct.pack(">I", 1) + b"f" + struct.pack(">I", 2) + b"ab", 1)
        self.assertEqual((bytes(function), [bytes(i) for i in inputs]), (b"f", [b"ab"]))


if __name__ == "__main__":
    unittest.main()
