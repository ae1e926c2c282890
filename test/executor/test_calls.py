"""Building calls from payloads and the result envelope (the contract with the clients)."""

import json
import types
import unittest

import cloudpickle

from readie_executor import calls


def json_payload(**fields):
    call = {"module": None, "source": None, "function": "f", "args": [], "kwargs": {}}
    call.update(fields)
    return json.dumps(call).encode()


def run_json(namespace=None, **fields):
    ok, body = calls.run(calls.JSON_CALL, json_payload(**fields), namespace if namespace is not None else {})
    return ok, json.loads(body)


def run_pickle(fn, args=(), kwargs=None, namespace=None):
    payload = cloudpickle.dumps((fn, args, kwargs or {}))
    ok, body = calls.run(calls.CLOUDPICKLE, payload, namespace if namespace is not None else {})
    return ok, cloudpickle.loads(body)


class JsonCallTest(unittest.TestCase):
    def test_source_with_args_and_kwargs(self):
        ok, envelope = run_json(source="def f(a, b=0):\n    return [a, b]\n", args=[1], kwargs={"b": 2})
        self.assertTrue(ok)
        self.assertEqual(envelope, {"ok": True, "value": [1, 2]})

    def test_module_and_dotted_function(self):
        ok, envelope = run_json(module="collections", function="OrderedDict.fromkeys", args=[["a"]])
        self.assertEqual(envelope, {"ok": True, "value": {"a": None}})

    def test_exception_envelope_has_type_module_message_and_traceback(self):
        ok, envelope = run_json(source="import json\ndef f():\n    json.loads('{')\n")
        self.assertFalse(ok)
        error = envelope["error"]
        self.assertEqual(error["type"], "JSONDecodeError")
        self.assertEqual(error["module"], "json.decoder")
        self.assertIn("Expecting property name", error["message"])
        self.assertIn('File "<readie-source>", line 3, in f', error["traceback"])
        self.assertIn("json.loads('{')", error["traceback"])
        self.assertNotIn("readie_executor", error["traceback"])

    def test_the_summary_of_what_was_raised_is_bounded_and_one_line(self):
        source = "class Boom(Exception):\n    pass\ndef f():\n    raise Boom('x' * 10000 + '\\n' + 'y')\n"
        ok, _body, raised = calls.execute(calls.JSON_CALL, json_payload(source=source), {})
        self.assertFalse(ok)
        self.assertEqual(raised["type"], "Boom")
        self.assertEqual(len(raised["message"]), calls.MAX_RAISED_MESSAGE)
        self.assertTrue(raised["message"].endswith("... (cut)"))
        self.assertNotIn("\n", raised["message"])
        self.assertTrue(raised["traceback"].startswith("... (cut)"))
        self.assertLessEqual(len(raised["traceback"]), calls.MAX_RAISED_TRACEBACK)
        # A type outside builtins is named with its module; a value raises nothing.
        ok, _body, raised = calls.execute(calls.JSON_CALL, json_payload(source="import json\ndef f():\n    json.loads('{')\n"), {})
        self.assertEqual(raised["type"], "json.decoder.JSONDecodeError")
        self.assertIsNone(calls.execute(calls.JSON_CALL, json_payload(source="def f():\n    return 1\n"), {})[2])
        # Astral characters count two UTF-16 units, as the worker counts them.
        ok, _body, raised = calls.execute(calls.JSON_CALL, json_payload(source="def f():\n    raise ValueError('\\U0001f600' * 800)\n"), {})
        self.assertLessEqual(len(raised["message"].encode("utf-16-le")) // 2, calls.MAX_RAISED_MESSAGE)

    def test_unserializable_value_becomes_a_type_error(self):
        ok, envelope = run_json(source="def f():\n    return object()\n")
        self.assertFalse(ok)
        self.assertEqual(envelope["error"]["type"], "TypeError")
        self.assertTrue(envelope["error"]["message"].startswith("the return value is not JSON-serializable"))

    def test_nan_is_not_json(self):
        ok, envelope = run_json(source="def f():\n    return float('nan')\n")
        self.assertFalse(ok)
        self.assertEqual(envelope["error"]["type"], "TypeError")

    def test_malformed_calls_are_user_errors(self):
        cases = [
            ({"source": None, "module": None}, "exactly one"),
            ({"source": "x = 1", "module": "os"}, "exactly one"),
            ({"source": "def f(): pass", "args": {}}, '"args" must be'),
            ({"source": "def g(): pass"}, 'defines no "f"'),
        ]
        for fields, words in cases:
            ok, envelope = run_json(**fields)
            self.assertFalse(ok)
            self.assertEqual(envelope["error"]["type"], "CallError")
            self.assertIn(words, envelope["error"]["message"])
        ok, body = calls.run(calls.JSON_CALL, b"\xff", {})
        self.assertIn("not UTF-8 JSON", json.loads(body)["error"]["message"])

    def test_source_runs_in_the_session_namespace(self):
        namespace = {}
        source = "def f():\n    global n\n    n = globals().get('n', 0) + 1\n    return n\n"
        self.assertEqual(run_json(namespace, source=source)[1]["value"], 1)
        self.assertEqual(run_json(namespace, source=source)[1]["value"], 2)

    def test_system_exit_is_data(self):
        ok, envelope = run_json(source="import sys\ndef f():\n    sys.exit(3)\n")
        self.assertFalse(ok)
        self.assertEqual(envelope["error"]["type"], "SystemExit")


class CloudpickleTest(unittest.TestCase):
    def test_value_envelope(self):
        ok, envelope = run_pickle(lambda a, b: {"sum": a + b}, (1, 2))
        self.assertTrue(ok)
        self.assertEqual(envelope, {"ok": True, "value": {"sum": 3}})

    def test_error_envelope_carries_the_exception_when_it_pickles(self):
        def fail():
            raise ValueError("bad")

        ok, envelope = run_pickle(fail)
        self.assertFalse(ok)
        self.assertEqual(envelope["error"]["type"], "ValueError")
        self.assertEqual(envelope["error"]["module"], "builtins")
        self.assertEqual(envelope["error"]["message"], "bad")
        self.assertIsInstance(envelope["exception"], ValueError)
        self.assertIn("in fail", envelope["error"]["traceback"])

    def test_unpicklable_exception_is_left_out(self):
        source = (
            "import threading\n"
            "class Holds(Exception):\n"
            "    def __init__(self):\n"
            "        super().__init__('holds a lock')\n"
            "        self.lock = threading.Lock()\n"
            "def fail():\n"
            "    raise Holds()\n"
        )
        namespace = {"__name__": "__main__"}
        exec(source, namespace)
        ok, envelope = run_pickle(namespace["fail"])
        self.assertFalse(ok)
        self.assertEqual(envelope["error"]["type"], "Holds")
        self.assertNotIn("exception", envelope)

    def test_unpicklable_value_becomes_an_error(self):
        import threading

        ok, envelope = run_pickle(lambda: threading.Lock())
        self.assertFalse(ok)
        self.assertIn("could not be pickled", envelope["error"]["message"])

    def test_not_a_triple_is_a_call_error(self):
        ok, body = calls.run(calls.CLOUDPICKLE, cloudpickle.dumps("nope"), {})
        self.assertEqual(cloudpickle.loads(body)["error"]["type"], "CallError")


class AdoptTest(unittest.TestCase):
    def make(self, source, name):
        namespace = {"__name__": "__main__"}
        exec(source, namespace)
        return cloudpickle.loads(cloudpickle.dumps(namespace[name]))

    def test_globals_persist_in_the_session_and_code_is_refreshed(self):
        session = {}
        source = "total = 0\ndef helper(n):\n    return n\ndef add(n):\n    global total\n    total += helper(n)\n    return total\n"
        first = calls.adopt(self.make(source, "add"), session)
        self.assertEqual(first(2), 2)
        second = calls.adopt(self.make(source, "add"), session)
        self.assertEqual(second(3), 5)
        self.assertIs(second.__globals__, session)
        self.assertIs(session["helper"].__globals__, session)

    def test_leaves_module_functions_alone(self):
        self.assertIs(calls.adopt(json.dumps, {}), json.dumps)
        self.assertIsInstance(calls.adopt(lambda: 1, {}), types.FunctionType)


if __name__ == "__main__":
    unittest.main()
