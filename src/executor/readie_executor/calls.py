"""One call: decode the payload, run the function, encode the result envelope.

Envelope (the contract with the clients):
  {"ok": True, "value": <return value>}
  {"ok": False, "error": {"type", "module", "message", "traceback"}}
For `cloudpickle` the result is cloudpickle.dumps(envelope) (an error envelope may also carry
"exception", the exception object, when it pickles); for `json-call` it is UTF-8 JSON.
A user exception is data: it becomes an error envelope and the executor carries on.
"""

import importlib
import inspect
import json
import linecache
import os
import sys
import traceback
import types

CLOUDPICKLE = "cloudpickle"
JSON_CALL = "json-call"
FORMATS = (CLOUDPICKLE, JSON_CALL)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_SOURCE_NAME = "<readie-source>"


class CallError(Exception):
    """A call that cannot be built from its payload (bad JSON, wrong shapes): the user's error."""


def session_namespace():
    """The persistent module globals of this container's session: the `__main__` module's."""
    return sys.modules["__main__"].__dict__


def _is_code(value):
    return isinstance(value, (types.FunctionType, type, types.ModuleType))


def adopt(fn, namespace, adopted=None):
    """Rebinds a function pickled by value from the client's `__main__` to the session namespace.

    cloudpickle gives every unpickled `__main__` function a fresh globals dict, so `global x`
    would never outlive the call. Adopted functions share the session's `__main__` globals
    instead: the pickled globals fill in names the session lacks, and replace functions, classes
    and modules (code travels with each call), while data already in the session stays.
    """
    if adopted is None:
        adopted = {}
    if not isinstance(fn, types.FunctionType) or fn.__module__ != "__main__":
        return fn
    if fn.__globals__ is namespace:
        return fn
    if id(fn) in adopted:
        return adopted[id(fn)]
    rebound = types.FunctionType(
        fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__
    )
    rebound.__kwdefaults__ = fn.__kwdefaults__
    rebound.__qualname__ = fn.__qualname__
    rebound.__doc__ = fn.__doc__
    rebound.__annotations__ = fn.__annotations__
    rebound.__dict__.update(fn.__dict__)
    adopted[id(fn)] = rebound
    for name, value in list(fn.__globals__.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if name not in namespace or _is_code(value):
            namespace[name] = adopt(value, namespace, adopted)
    return rebound


def json_call_of(payload):
    """The JSON object of a json-call payload."""
    try:
        call = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise CallError(f"the json-call payload is not UTF-8 JSON: {error}") from None
    if not isinstance(call, dict):
        raise CallError("the json-call payload must be a JSON object")
    return call


def _from_json_call(payload, namespace):
    call = json_call_of(payload)
    name, args, kwargs = call.get("function"), call.get("args", []), call.get("kwargs", {})
    if not isinstance(name, str) or not name:
        raise CallError('the json-call payload needs "function", a non-empty string')
    if not isinstance(args, list):
        raise CallError('"args" must be a JSON array')
    if not isinstance(kwargs, dict):
        raise CallError('"kwargs" must be a JSON object')
    return json_function(call, namespace), args, kwargs


def json_function(call, namespace):
    """The function a json-call object names: defined by its `source`, or found in its `module`."""
    module, source, name = call.get("module"), call.get("source"), call.get("function")
    if not isinstance(name, str) or not name:
        raise CallError('the json-call payload needs "function", a non-empty string')
    if (module is None) == (source is None):
        raise CallError('the json-call payload needs exactly one of "module" and "source"')
    if source is not None:
        if not isinstance(source, str):
            raise CallError('"source" must be a string of Python source')
        linecache.cache[_SOURCE_NAME] = (len(source), None, source.splitlines(True), _SOURCE_NAME)
        exec(compile(source, _SOURCE_NAME, "exec"), namespace)
        if name not in namespace:
            raise CallError(f'the source defines no "{name}"')
        fn = namespace[name]
    else:
        if not isinstance(module, str) or not module:
            raise CallError('"module" must be a dotted module name')
        fn = importlib.import_module(module)
        for part in name.split("."):
            fn = getattr(fn, part)
    return fn


def _from_cloudpickle(payload, namespace):
    import cloudpickle

    call = cloudpickle.loads(payload)
    if not isinstance(call, tuple) or len(call) != 3:
        raise CallError("the cloudpickle payload must be a (function, args, kwargs) tuple")
    fn, args, kwargs = call
    return adopt(fn, namespace), tuple(args), dict(kwargs)


def _user_traceback(error):
    """The formatted traceback without the executor's own frames at its start."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb))


def error_envelope(error):
    """The envelope of a failed call, from the exception it raised."""
    kind = type(error)
    return {
        "ok": False,
        "error": {
            "type": kind.__qualname__,
            "module": kind.__module__,
            "message": str(error),
            "traceback": _user_traceback(error),
        },
    }


def _replaced(error, kind, prefix):
    """A `kind` error saying `prefix: error`, with `error`'s traceback, for encoding failures."""
    try:
        replacement = kind(f"{prefix}: {error}")
    except Exception:
        replacement = TypeError(f"{prefix}: {error}")
    replacement.__traceback__ = error.__traceback__
    return error_envelope(replacement)


def _encode_cloudpickle(envelope, error):
    import cloudpickle

    if error is not None:
        try:
            cloudpickle.dumps(error)
            envelope = dict(envelope, exception=error)
        except Exception:
            pass
    try:
        return envelope["ok"], cloudpickle.dumps(envelope)
    except Exception as failure:
        failed = _replaced(failure, type(failure), "the return value could not be pickled")
        return False, cloudpickle.dumps(failed)


def _encode_json(envelope):
    try:
        return envelope["ok"], json.dumps(envelope, allow_nan=False, ensure_ascii=False).encode()
    except (TypeError, ValueError) as failure:
        failed = _replaced(failure, TypeError, "the return value is not JSON-serializable")
        return False, json.dumps(failed, ensure_ascii=False).encode("utf-8")


def invoke(fn, args, kwargs):
    """The function's return value; a coroutine it returns (an async function) is run to its end."""
    value = fn(*args, **kwargs)
    if inspect.iscoroutine(value):
        import asyncio

        return asyncio.run(value)
    return value


def encode(fmt, envelope, error=None):
    """(ok, envelope bytes) in the call's format; a value that does not encode becomes an error."""
    if fmt == CLOUDPICKLE:
        return _encode_cloudpickle(envelope, error)
    return _encode_json(envelope)


# The bounds of what RESULT_END says of an exception (UTF-16 units, as the worker counts them).
MAX_RAISED_TYPE = 256
MAX_RAISED_MESSAGE = 1024
MAX_RAISED_TRACEBACK = 8192
_CUT = "... (cut)"


def _utf16_units(text):
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _bounded(text, limit, keep_end=False):
    """`text` in at most `limit` UTF-16 units; a longer one cut, saying so (its end kept on request)."""
    if _utf16_units(text) <= limit:
        return text
    units = (limit - len(_CUT)) * 2
    data = text.encode("utf-16-le", "surrogatepass")
    if keep_end:
        return _CUT + data[len(data) - units :].decode("utf-16-le", "ignore")
    return data[:units].decode("utf-16-le", "ignore") + _CUT


def raised_summary(envelope):
    """What RESULT_END says of an error envelope: the exception's type name, its message's first
    line and its traceback (each bounded; the traceback keeps its end); None for a value."""
    if envelope.get("ok"):
        return None
    error = envelope.get("error") or {}
    qualname, module = str(error.get("type", "")), str(error.get("module", ""))
    name = qualname if module in ("builtins", "__main__", "") else f"{module}.{qualname}"
    lines = str(error.get("message", "")).splitlines()
    message = (lines[0] if lines else "") + (" ..." if len(lines) > 1 else "")
    return {
        "type": _bounded("".join(name.split()) or "Exception", MAX_RAISED_TYPE),
        "message": _bounded(message, MAX_RAISED_MESSAGE),
        "traceback": _bounded(str(error.get("traceback", "")), MAX_RAISED_TRACEBACK, keep_end=True),
    }


def run(fmt, payload, namespace=None):
    """Runs one call; returns (ok, envelope bytes). Never raises for the user's errors."""
    ok, body, _raised = execute(fmt, payload, namespace)
    return ok, body


def execute(fmt, payload, namespace=None):
    """Runs one call; returns (ok, envelope bytes, what it raised: `raised_summary`, or None).
    Never raises for the user's errors."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown payload format {fmt!r}")
    if namespace is None:
        namespace = session_namespace()
    error = None
    try:
        if fmt == CLOUDPICKLE:
            fn, args, kwargs = _from_cloudpickle(payload, namespace)
        else:
            fn, args, kwargs = _from_json_call(payload, namespace)
        envelope = {"ok": True, "value": invoke(fn, args, kwargs)}
    except BaseException as raised:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are data too
        error = raised
        envelope = error_envelope(raised)
    ok, body = encode(fmt, envelope, error)
    if ok or error is not None:
        return ok, body, raised_summary(envelope)
    # The value did not encode: the envelope sent is the encoding error's.
    return ok, body, raised_summary(_decoded(fmt, body))


def _decoded(fmt, body):
    """The envelope `encode` made of an encoding failure (small: an error envelope)."""
    if fmt == CLOUDPICKLE:
        import cloudpickle

        return cloudpickle.loads(body)
    return json.loads(body)
