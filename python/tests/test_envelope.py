import unittest

import cloudpickle

import readie
from readie._envelope import decode_cloudpickle, value_of
from readie._ids import CallInfo

TRACEBACK = 'Traceback (most recent call last):\n  File "<remote>", line 2, in f\nValueError: nope\n'
ERROR = {"type": "ValueError", "module": "builtins", "message": "nope", "traceback": TRACEBACK}


class EnvelopeTest(unittest.TestCase):
    def test_ok_value(self):
        self.assertEqual(decode_cloudpickle(cloudpickle.dumps({"ok": True, "value": {"x": [1, 2]}})), {"x": [1, 2]})
        self.assertIsNone(decode_cloudpickle(cloudpickle.dumps({"ok": True, "value": None})))

    def test_ok_value_of_a_dynamic_class(self):
        class Point:
            def __init__(self, x):
                self.x = x

        self.assertEqual(decode_cloudpickle(cloudpickle.dumps({"ok": True, "value": Point(3)})).x, 3)

    def test_error_with_traceback(self):
        call = CallInfo("req-1", worker_id="w1")
        exception = ValueError("nope")
        payload = cloudpickle.dumps({"ok": False, "error": ERROR, "exception": exception})
        with self.assertRaises(readie.RemoteExecutionError) as caught:
            decode_cloudpickle(payload, call=call)
        error = caught.exception
        self.assertEqual((error.remote_type, error.remote_module, error.remote_message), ("ValueError", "builtins", "nope"))
        self.assertEqual(error.remote_traceback, TRACEBACK)
        self.assertIsInstance(error.exception, ValueError)
        self.assertIs(error.call, call)
        self.assertIn('File "<remote>", line 2', str(error))

    def test_error_without_exception_object(self):
        with self.assertRaises(readie.RemoteExecutionError) as caught:
            value_of({"ok": False, "error": {"type": "KeyError", "message": "'k'"}})
        self.assertIsNone(caught.exception.exception)
        self.assertEqual(caught.exception.remote_traceback, "")

    def test_malformed_results_are_protocol_errors(self):
        for payload in (b"not a pickle", cloudpickle.dumps([1, 2]), cloudpickle.dumps({"ok": "yes"}), cloudpickle.dumps({"ok": False})):
            with self.subTest(payload=payload[:20]), self.assertRaises(readie.ProtocolError):
                decode_cloudpickle(payload)


if __name__ == "__main__":
    unittest.main()
