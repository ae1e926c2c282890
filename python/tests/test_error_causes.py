"""One hint per cause: out of memory, a worker's failure, refusals before the function started,
TLS mismatches; and grpc's C-core noise kept off stderr."""

import os
import socket
import subprocess
import sys
import threading
import unittest

import grpc

import readie
from fake_proxy import CA_FILE, FakeProxy
from readie.errors import error_for_status

MiB = 1024 * 1024
HERE = os.path.dirname(os.path.abspath(__file__))


@readie.remote
def work():
    return 1


def failing(code, details, trailers=()):
    def script(received, requests, context):
        received.read(requests)
        context.set_trailing_metadata(tuple(trailers))
        context.abort(code, details)
        yield  # pragma: no cover

    return script


class DroppingRelay:
    """A TCP relay in front of a server that closes every connection on ``drop()``, as the server's
    process dying does."""

    def __init__(self, port):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._port = port
        self._sockets = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._port))
            self._sockets += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source, target):
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass

    def drop(self):
        for sock in self._sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self):
        self.drop()
        self._listener.close()


class CauseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proxy = FakeProxy()

    @classmethod
    def tearDownClass(cls):
        readie.close_channels()
        cls.proxy.stop()

    def setUp(self):
        readie.configure(self.proxy.address, insecure=True)

    def tearDown(self):
        readie.configure()

    def test_out_of_memory_is_its_own_error_with_the_budget(self):
        self.proxy.script = failing(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "worker w1: the call ran out of memory: it was killed when it exceeded its memory budget of 512MiB",
            (("readie-killed", "out-of-memory"), ("readie-memory-budget", str(512 * MiB))),
        )
        with self.assertRaises(readie.RemoteOutOfMemoryError) as raised:
            work()
        error = raised.exception
        self.assertNotIsInstance(error, readie.ResourceExhaustedError)
        self.assertEqual(error.memory_budget, 512 * MiB)
        self.assertTrue(str(error).startswith("the call ran out of memory at "))
        self.assertIn("memory budget of 512MiB: ask for more", str(error))
        self.assertNotIn("READIE_ADDRESS", str(error))
        self.assertFalse(error.not_started)

    def test_a_call_that_reached_a_worker_gets_a_worker_hint(self):
        self.proxy.script = failing(grpc.StatusCode.UNAVAILABLE, "worker w1: the executor was killed by SIGSEGV")
        with self.assertRaises(readie.ClusterUnavailableError) as raised:
            work()
        self.assertIn("placed the call on worker w1", str(raised.exception))
        self.assertIn("may have run", str(raised.exception))
        self.assertNotIn("READIE_ADDRESS", str(raised.exception))
        self.assertFalse(raised.exception.not_started)

    def test_a_refusal_before_the_function_started_says_so(self):
        self.proxy.script = failing(grpc.StatusCode.UNAVAILABLE, "no workers available", (("readie-not-started", "1"),))
        with self.assertRaises(readie.ClusterUnavailableError) as raised:
            work()
        self.assertTrue(raised.exception.not_started)
        self.assertIn("has no worker", str(raised.exception))
        self.assertIn("readie status", str(raised.exception))


class TransportTest(unittest.TestCase):
    def tearDown(self):
        readie.configure()
        readie.close_channels()

    def test_nothing_listening_never_started_the_call(self):
        with socket.create_server(("127.0.0.1", 0)) as taken:
            address = f"127.0.0.1:{taken.getsockname()[1]}"
        readie.configure(address, insecure=True)
        with self.assertRaises(readie.ClusterUnavailableError) as raised:
            work()
        self.assertIn(f"nothing listens at {address}", str(raised.exception))
        self.assertTrue(raised.exception.not_started)

    def test_a_router_that_dies_mid_call_lost_the_connection_and_says_nothing_of_tls(self):
        proxy = FakeProxy()
        relay = DroppingRelay(proxy.port)

        def drop_mid_call(received, requests, context):
            received.read(requests)
            relay.drop()
            while context.is_active():
                threading.Event().wait(0.01)
            yield  # pragma: no cover

        proxy.script = drop_mid_call
        try:
            readie.configure(relay.address, insecure=True)
            with self.assertRaises(readie.ClusterUnavailableError) as raised:
                work()
            text = str(raised.exception)
            self.assertIn(f"the connection to the router (or nginx) at {relay.address} was lost during the call", text)
            self.assertIn("retry only if running it twice is safe", text)
            self.assertNotIn("READIE_INSECURE", text)
            self.assertFalse(raised.exception.not_started)
        finally:
            relay.close()
            proxy.stop()

    def test_tls_client_against_a_plaintext_server(self):
        proxy = FakeProxy()
        try:
            readie.configure(proxy.address.replace("127.0.0.1", "localhost"), ca_file=CA_FILE)
            with self.assertRaises(readie.ClusterUnavailableError) as raised:
                work()
            text = str(raised.exception)
            self.assertIn("speaks plaintext but this client speaks TLS", text)
            self.assertIn("READIE_INSECURE=1", text)
        finally:
            proxy.stop()

    def test_plaintext_client_against_a_tls_server(self):
        proxy = FakeProxy(tls=True)
        try:
            readie.configure(proxy.address, insecure=True)
            with self.assertRaises(readie.ClusterUnavailableError) as raised:
                work()
            text = str(raised.exception)
            self.assertIn("speaks TLS but this client speaks plaintext: unset READIE_INSECURE", text)
        finally:
            proxy.stop()

    def test_a_certificate_the_client_does_not_trust(self):
        proxy = FakeProxy(tls=True)
        try:
            readie.configure(proxy.address.replace("127.0.0.1", "localhost"))
            with self.assertRaises(readie.ClusterUnavailableError) as raised:
                work()
            self.assertIn("does not trust: set READIE_CA_FILE", str(raised.exception))
        finally:
            proxy.stop()

    def test_grpc_core_noise_stays_off_stderr(self):
        # A fresh interpreter: the C core reads GRPC_VERBOSITY when it first logs.
        script = (
            "import readie\n"
            "from fake_proxy import FakeProxy\n"
            "proxy = FakeProxy()\n"
            "readie.configure(proxy.address.replace('127.0.0.1', 'localhost'))\n"
            "@readie.remote\n"
            "def f():\n    return 1\n"
            "try:\n    f()\nexcept readie.ClusterUnavailableError as error:\n    print('raised', 'plaintext' in str(error))\n"
            "proxy.stop()\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), HERE])
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(done.stdout.strip(), "raised True", done.stderr)
        self.assertEqual(done.stderr, "")


class MessageTest(unittest.TestCase):
    def test_the_hint_table_covers_the_router_side_causes(self):
        cases = {
            (grpc.StatusCode.RESOURCE_EXHAUSTED, "session is busy: ..."): "one at a time",
            (grpc.StatusCode.RESOURCE_EXHAUSTED, "no worker can accept this request"): "retry later",
            (grpc.StatusCode.UNAVAILABLE, "the router is shutting down"): "restarting or stopping",
            (grpc.StatusCode.PERMISSION_DENIED, "a worker credential ..."): "tenant (client) token",
        }
        for (code, details), hint in cases.items():
            with self.subTest(details=details):
                self.assertIn(hint, str(error_for_status(code, details, address="r:1")))

    def test_the_routers_token_hint_is_said_once(self):
        # The router's words for a call without a token (src/router/security/router-credentials.ts).
        error = error_for_status(
            grpc.StatusCode.UNAUTHENTICATED,
            'missing bearer token: send metadata "authorization: Bearer <token>" (clients: set READIE_AUTH_TOKEN to your client token)',
            address="r:1",
        )
        self.assertEqual(str(error).count("READIE_AUTH_TOKEN"), 1)
        self.assertIn("READIE_AUTH_TOKEN", str(error_for_status(grpc.StatusCode.UNAUTHENTICATED, "bad token", address="r:1")))

    def test_a_shed_is_a_shed_error_with_its_own_hint(self):
        error = error_for_status(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "version v1 is loading: retry in 2s (ROUTING_RETRY_AFTER)",
            address="r:1",
            retry_after=1.5,
        )
        self.assertIsInstance(error, readie.ShedError)
        self.assertEqual(error.retry_after, 1.5)
        self.assertTrue(error.not_started)
        self.assertTrue(str(error).startswith("the call was shed at r:1 (RESOURCE_EXHAUSTED)"))
        self.assertIn("retry after 1500ms", str(error))
        self.assertNotIn("ask for less memory", str(error))


if __name__ == "__main__":
    unittest.main()
