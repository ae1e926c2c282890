import os
import unittest

import grpc

import readie
from readie._ids import CallInfo
from readie.errors import error_for_status

# Every status code but OK, and the class a call that ends with it raises.
EXPECTED = {
    grpc.StatusCode.CANCELLED: readie.CallCancelledError,
    grpc.StatusCode.UNKNOWN: readie.InternalServerError,
    grpc.StatusCode.INVALID_ARGUMENT: readie.InvalidRequestError,
    grpc.StatusCode.DEADLINE_EXCEEDED: readie.RemoteTimeoutError,
    grpc.StatusCode.NOT_FOUND: readie.SessionExpiredError,
    grpc.StatusCode.ALREADY_EXISTS: readie.ConflictError,
    grpc.StatusCode.PERMISSION_DENIED: readie.PermissionDeniedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: readie.ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: readie.PreconditionError,
    grpc.StatusCode.ABORTED: readie.ConflictError,
    grpc.StatusCode.OUT_OF_RANGE: readie.InvalidRequestError,
    grpc.StatusCode.UNIMPLEMENTED: readie.UnsupportedError,
    grpc.StatusCode.INTERNAL: readie.InternalServerError,
    grpc.StatusCode.UNAVAILABLE: readie.ClusterUnavailableError,
    grpc.StatusCode.DATA_LOSS: readie.InternalServerError,
    grpc.StatusCode.UNAUTHENTICATED: readie.AuthenticationError,
}


class ErrorMappingTest(unittest.TestCase):
    def test_every_status_code_has_a_class(self):
        self.assertEqual(set(EXPECTED), set(grpc.StatusCode) - {grpc.StatusCode.OK})

    def test_every_status_code_maps_to_its_class(self):
        call = CallInfo("req-1", "ses-1", "w1")
        for code, error_class in EXPECTED.items():
            with self.subTest(code=code.name):
                error = error_for_status(code, "the server said so", address="router:443", call=call)
                self.assertIs(type(error), error_class)
                self.assertIsInstance(error, readie.ReadieError)
                self.assertIs(error.code, code)
                self.assertEqual(error.details, "the server said so")
                self.assertIs(error.call, call)
                text = str(error)
                self.assertIn(code.name, text)
                self.assertIn("the server said so", text)
                self.assertIn("router:443", text)

    def test_messages_say_what_to_do(self):
        refused = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused"
        self.assertIn("nothing listens at r:1: check READIE_ADDRESS", str(error_for_status(grpc.StatusCode.UNAVAILABLE, refused, address="r:1")))
        self.assertIn("READIE_AUTH_TOKEN", str(error_for_status(grpc.StatusCode.UNAUTHENTICATED, None)))
        self.assertIn("new readie.Session", str(error_for_status(grpc.StatusCode.NOT_FOUND, "session expired")))

    def test_a_lookup_not_found_is_no_expired_session(self):
        # A tenant-service request (readie.call_record, readie.logs, Image.status) that names
        # nothing the router holds: NotFoundError, without the session's words or hint.
        error = error_for_status(grpc.StatusCode.NOT_FOUND, "no call r1 of yours", address="r:1", lookup=True)
        self.assertIs(type(error), readie.NotFoundError)
        self.assertNotIsInstance(error, readie.SessionExpiredError)
        self.assertEqual(str(error), "not found at r:1 (NOT_FOUND): no call r1 of yours")
        # A session's NOT_FOUND is still SessionExpiredError, itself a NotFoundError.
        expired = error_for_status(grpc.StatusCode.NOT_FOUND, "session expired")
        self.assertIs(type(expired), readie.SessionExpiredError)
        self.assertIsInstance(expired, readie.NotFoundError)

    def test_ok_without_a_result_is_a_protocol_error(self):
        self.assertIsInstance(error_for_status(grpc.StatusCode.OK, ""), readie.ProtocolError)

    def test_class_level_codes(self):
        self.assertIs(readie.ClusterUnavailableError.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIs(readie.SessionExpiredError.code, grpc.StatusCode.NOT_FOUND)
        self.assertIs(readie.RemoteTimeoutError.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertIs(readie.ResourceExhaustedError.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIsNone(readie.ReadieError.code)


class RemoteExecutionErrorTest(unittest.TestCase):
    def test_carries_type_message_and_traceback(self):
        error = readie.RemoteExecutionError(
            "ValueError", "bad value", "Traceback (most recent call last):\n  ...\nValueError: bad value\n",
            remote_module="builtins",
        )
        self.assertEqual(error.remote_type, "ValueError")
        self.assertEqual(error.remote_message, "bad value")
        self.assertIn("Traceback", error.remote_traceback)
        self.assertTrue(str(error).startswith("ValueError: bad value\n\nRemote traceback:\nTraceback"))
        self.assertIsNone(error.code)

    def test_a_missing_module_suggests_packages(self):
        error = readie.RemoteExecutionError("ModuleNotFoundError", "No module named 'sklearn.linear_model'", "")
        self.assertEqual(
            str(error),
            "ModuleNotFoundError: No module named 'sklearn.linear_model'; the worker's Python has no module sklearn: "
            'if a distribution on the package index provides it, install it with the call '
            '(@readie.remote(packages=["scikit-learn"])); sklearn comes from scikit-learn',
        )
        self.assertIn('packages=["requests"]', str(readie.RemoteExecutionError("ModuleNotFoundError", "No module named 'requests'", "")))
        # readie's own modules missing mean a wrong checkpoint, not a package to install.
        self.assertNotIn("packages=", str(readie.RemoteExecutionError("ModuleNotFoundError", "No module named 'readie_checkpoint'", "")))

    def test_the_remote_traceback_shows_the_source_lines_this_client_has(self):
        here = os.path.abspath(__file__)
        line = _LINE_OF_THE_RAISE
        remote = (
            "Traceback (most recent call last):\n"
            f'  File "{here}", line {line}, in raiser\n'
            '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads\n'
            "    return _default_decoder.decode(s)\n"
            '  File "<frozen importlib._bootstrap>", line 1206, in _gcd_import\n'
            "ValueError: bad value\n"
        )
        error = readie.RemoteExecutionError("ValueError", "bad value", remote, remote_module="builtins")
        lines = error.remote_traceback.split("\n")
        # The client's own line is filled in; lines the worker showed, and frozen ones, stay as they were.
        self.assertEqual(lines[2], '    raise ValueError("bad value")  # the line a remote traceback names')
        self.assertEqual(lines[3:6], remote.split("\n")[2:5])
        self.assertEqual(len(lines), len(remote.split("\n")) + 1)
        self.assertIn('raise ValueError("bad value")', str(error))

    def test_names_the_module_of_a_non_builtin_type(self):
        error = readie.RemoteExecutionError("LinAlgError", "singular", "", remote_module="numpy.linalg")
        self.assertEqual(str(error), "numpy.linalg.LinAlgError: singular")


def raiser():
    raise ValueError("bad value")  # the line a remote traceback names


_LINE_OF_THE_RAISE = raiser.__code__.co_firstlineno + 1


if __name__ == "__main__":
    unittest.main()
