"""The real streaming path: the client against a real gRPC server on loopback (fake_proxy)."""

import _thread
import asyncio
import io
import socket
import threading
import unittest
from contextlib import redirect_stderr

import grpc
import numpy as np

import readie
from fake_proxy import CA_FILE, MiB, FakeProxy, log_answer, result_answers, run_locally, wait_for_cancel
from readie._proto import call_pb2
from test_errors import EXPECTED


@readie.remote(memory="2GiB", packages=["tqdm"])
def add(a, b):
    return a + b


@readie.remote
def echo(value):
    return value


@readie.remote
def uses_numpy(n):
    return int(np.arange(n).sum())


@readie.remote
def fails(message):
    raise ValueError(message)


@readie.remote(stream_logs=False)
def quiet_print(text):
    print(text)
    return len(text)


@readie.remote
def loud_print(text):
    print(text)
    return len(text)


def aborting(code):
    def script(received, requests, context):
        received.read(requests)
        yield log_answer(received, call_pb2.LOG_SOURCE_SYSTEM, "about to fail")
        context.abort(code, f"scripted {code.name}")

    return script


class ProxyTestCase(unittest.TestCase):
    proxy: FakeProxy

    @classmethod
    def setUpClass(cls):
        cls.proxy = FakeProxy()

    @classmethod
    def tearDownClass(cls):
        readie.close_channels()
        cls.proxy.stop()

    def setUp(self):
        readie.configure(self.proxy.address, insecure=True)
        self.proxy.script = run_locally
        self.proxy.calls.clear()

    def tearDown(self):
        readie.configure()


class CallTest(ProxyTestCase):
    def test_plain_call(self):
        self.assertEqual(add(2, 3), 5)
        (received,) = self.proxy.calls
        self.assertEqual(received.kinds, ["config", "chunk"])
        self.assertTrue(received.half_closed)
        config = received.config
        self.assertRegex(config.request_id, r"^req-[0-9a-f]{32}$")
        self.assertEqual(config.session_id, "")
        self.assertEqual(config.memory, 2 * 1024**3)
        self.assertEqual(list(config.packages), ["tqdm"])
        self.assertEqual(config.format, call_pb2.PAYLOAD_FORMAT_CLOUDPICKLE)
        self.assertRegex(config.python_version, r"^3\.\d+\.\d+")
        self.assertNotIn("authorization", received.metadata)

    def test_where_it_ran_is_kept(self):
        add(1, 1)
        info = add.last_call
        self.assertEqual(info.request_id, self.proxy.calls[0].config.request_id)
        self.assertEqual((info.worker_id, info.container_id, info.checkpoint_id), ("worker-1", "container-1", "ckpt-numpy"))
        self.assertEqual(readie.last_call(), info)

    def test_each_call_has_its_own_request_id(self):
        add(1, 2)
        add(1, 2)
        first, second = (call.config.request_id for call in self.proxy.calls)
        self.assertNotEqual(first, second)

    def test_import_hints_travel(self):
        self.assertEqual(uses_numpy(4), 6)
        self.assertEqual(list(self.proxy.calls[0].config.imports), ["numpy"])

    def test_64_mebibyte_argument_and_result(self):
        blob = bytes(range(256)) * (64 * MiB // 256)
        self.assertEqual(echo(blob), blob)
        (received,) = self.proxy.calls
        self.assertEqual(received.kinds[0], "config")
        self.assertNotIn("config", received.kinds[1:])
        self.assertGreaterEqual(len(received.chunk_sizes), 65)
        self.assertLessEqual(max(received.chunk_sizes), MiB)
        self.assertTrue(all(size == MiB for size in received.chunk_sizes[:-1]))
        self.assertTrue(received.half_closed)

    def test_remote_exception_with_traceback(self):
        with self.assertRaises(readie.RemoteExecutionError) as caught:
            fails("bad input")
        error = caught.exception
        self.assertEqual((error.remote_type, error.remote_module, error.remote_message), ("ValueError", "builtins", "bad input"))
        self.assertIn("in fails", error.remote_traceback)
        self.assertIn("raise ValueError(message)", error.remote_traceback)
        self.assertIsInstance(error.exception, ValueError)
        self.assertEqual(error.call.container_id, "container-1")
        self.assertEqual(fails.last_call, error.call)

    def test_a_stream_without_result_is_a_protocol_error(self):
        def no_result(received, requests, context):
            received.read(requests)
            yield log_answer(received, call_pb2.LOG_SOURCE_SYSTEM, "nothing")

        self.proxy.script = no_result
        with redirect_stderr(io.StringIO()), self.assertRaisesRegex(readie.ProtocolError, "without a result"):
            add(1, 2)


class LogTest(ProxyTestCase):
    def test_output_is_printed_to_stderr(self):
        captured = io.StringIO()
        with redirect_stderr(captured):
            self.assertEqual(loud_print("hello there"), 11)
        self.assertEqual(captured.getvalue(), "hello there\n")

    def test_stream_logs_false_prints_nothing(self):
        captured = io.StringIO()
        with redirect_stderr(captured):
            self.assertEqual(quiet_print("hello"), 5)
        self.assertEqual(captured.getvalue(), "")

    def test_lines_print_as_they_arrive_and_system_lines_are_marked(self):
        printed = threading.Event()

        class Stream(io.StringIO):
            def write(self, text):
                printed.set()
                return super().write(text)

        def slow(received, requests, context):
            received.read(requests)
            yield log_answer(received, call_pb2.LOG_SOURCE_SYSTEM, "restored ckpt-numpy")
            yield log_answer(received, call_pb2.LOG_SOURCE_STDERR, "warming up")
            # The result waits until the client has printed the lines: they arrive live.
            assert printed.wait(5), "the client did not print a log line while the call ran"
            yield from result_answers(received, __import__("cloudpickle").dumps({"ok": True, "value": 1}))

        self.proxy.script = slow
        stream = Stream()
        with redirect_stderr(stream):
            self.assertEqual(add(0, 1), 1)
        self.assertEqual(stream.getvalue(), "[readie] restored ckpt-numpy\nwarming up\n")


class StatusTest(ProxyTestCase):
    def test_every_status_code_is_mapped(self):
        for code, error_class in EXPECTED.items():
            with self.subTest(code=code.name):
                self.proxy.script = aborting(code)
                with redirect_stderr(io.StringIO()), self.assertRaises(error_class) as caught:
                    add(1, 2)
                error = caught.exception
                self.assertIs(error.code, code)
                self.assertEqual(error.details, f"scripted {code.name}")
                self.assertIn(self.proxy.address, str(error))
                self.assertEqual(error.call.worker_id, "worker-1")

    def test_nothing_listening_is_cluster_unavailable(self):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        readie.configure(f"127.0.0.1:{port}", insecure=True)
        with self.assertRaisesRegex(readie.ClusterUnavailableError, "READIE_ADDRESS"):
            add(1, 2)

    def test_token_travels_as_bearer_metadata(self):
        readie.configure(self.proxy.address, insecure=True, token="s3cret")
        add(1, 2)
        self.assertEqual(self.proxy.calls[0].metadata["authorization"], "Bearer s3cret")


class TlsTest(unittest.TestCase):
    """TLS is the default: the client verifies the router against READIE_CA_FILE's roots."""

    @classmethod
    def setUpClass(cls):
        cls.proxy = FakeProxy(tls=True)

    @classmethod
    def tearDownClass(cls):
        readie.close_channels()
        cls.proxy.stop()

    def tearDown(self):
        readie.configure()

    def test_trusts_the_ca_file(self):
        readie.configure(self.proxy.address, ca_file=CA_FILE, token="over-tls")
        self.assertEqual(add(20, 22), 42)
        self.assertEqual(self.proxy.calls[-1].metadata["authorization"], "Bearer over-tls")

    def test_an_untrusted_server_is_unavailable(self):
        readie.configure(self.proxy.address)  # the system's roots do not know the test CA
        with self.assertRaises(readie.ClusterUnavailableError):
            add(1, 2)

    def test_plaintext_against_tls_is_unavailable(self):
        readie.configure(self.proxy.address, insecure=True)
        with self.assertRaises(readie.ClusterUnavailableError):
            add(1, 2)


class SessionTest(ProxyTestCase):
    def test_calls_in_a_session_share_its_id(self):
        add(0, 0)
        with readie.Session() as session:
            add(1, 2)
            echo("x")
            with readie.Session("ses-inner") as inner:
                add(3, 4)
            add(5, 6)
        add(7, 8)
        ids = [call.config.session_id for call in self.proxy.calls]
        self.assertRegex(session.id, r"^ses-[0-9a-f]{32}$")
        self.assertEqual(ids, ["", session.id, session.id, "ses-inner", session.id, ""])
        self.assertEqual(session.last_call.session_id, session.id)
        self.assertEqual(inner.last_call.session_id, "ses-inner")
        self.assertIsNone(readie.current_session())


class CancelTest(ProxyTestCase):
    def test_ctrl_c_cancels_the_call_on_the_server(self):
        self.proxy.script = wait_for_cancel

        def interrupt():
            self.proxy.last()
            _thread.interrupt_main()

        threading.Thread(target=interrupt, daemon=True).start()
        with redirect_stderr(io.StringIO()), self.assertRaises(KeyboardInterrupt):
            add(1, 2)
        self.assertTrue(self.proxy.calls[-1].cancelled.wait(5), "the server never saw the cancel")


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    proxy: FakeProxy

    @classmethod
    def setUpClass(cls):
        cls.proxy = FakeProxy()

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()

    def setUp(self):
        readie.configure(self.proxy.address, insecure=True)
        self.proxy.script = run_locally
        self.proxy.calls.clear()

    def tearDown(self):
        readie.configure()

    async def test_plain_call(self):
        self.assertEqual(await add.aio(2, 3), 5)
        self.assertEqual(self.proxy.calls[0].kinds, ["config", "chunk"])
        self.assertEqual(readie.last_call().checkpoint_id, "ckpt-numpy")

    async def test_concurrent_calls(self):
        results = await asyncio.gather(*(add.aio(i, i) for i in range(8)))
        self.assertEqual(results, [2 * i for i in range(8)])

    async def test_chunked_payload(self):
        blob = b"z" * (3 * MiB + 5)
        self.assertEqual(await echo.aio(blob), blob)
        self.assertLessEqual(max(self.proxy.calls[0].chunk_sizes), MiB)

    async def test_remote_exception(self):
        with self.assertRaisesRegex(readie.RemoteExecutionError, "ValueError: async bad"):
            await fails.aio("async bad")

    async def test_status_codes(self):
        for code, error_class in EXPECTED.items():
            with self.subTest(code=code.name):
                self.proxy.script = aborting(code)
                with redirect_stderr(io.StringIO()), self.assertRaises(error_class):
                    await add.aio(1, 2)

    async def test_session(self):
        async with readie.Session() as session:
            await add.aio(1, 2)
            await asyncio.gather(add.aio(3, 4), echo.aio(5))
        await add.aio(0, 0)
        ids = [call.config.session_id for call in self.proxy.calls]
        self.assertEqual(ids, [session.id] * 3 + [""])

    async def test_cancelling_the_task_cancels_the_call_on_the_server(self):
        self.proxy.script = wait_for_cancel
        with redirect_stderr(io.StringIO()):
            task = asyncio.create_task(add.aio(1, 2))
            received = await asyncio.to_thread(self.proxy.last)
            await asyncio.sleep(0.05)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
        self.assertTrue(await asyncio.to_thread(received.cancelled.wait, 5), "the server never saw the cancel")


if __name__ == "__main__":
    unittest.main()
