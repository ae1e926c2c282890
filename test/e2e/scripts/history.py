"""The Python client's view of the call history (test/e2e/calls.test.ts): one call that prints,
then ``readie.calls()``, ``readie.call_record()`` and ``readie.logs()`` of it; with a request ID
argument, what this tenant gets for that (another tenant's) call. Prints one JSON object."""
import json
import sys

import readie


@readie.remote(memory="256MiB")
def greet(name):
    print("hello", name)
    return name.upper()


@readie.remote(memory="256MiB")
def lookup(key):
    return {}[key]


def refusal(read):
    try:
        read()
        return "answered"
    except readie.ReadieError as error:
        return f"{error.code.name if error.code else None}: {error.details}"


def refused_as(read):
    try:
        read()
        return None
    except readie.ReadieError as error:
        return type(error).__name__


if len(sys.argv) > 1:
    other = sys.argv[1]
    print(json.dumps({
        "listed": [c.request_id for c in readie.calls()],
        "recordError": refused_as(lambda: readie.call_record(other)),
        "record": refusal(lambda: readie.call_record(other)),
        "logs": refusal(lambda: readie.logs(other)),
    }))
else:
    assert greet("py") == "PY"
    request_id = greet.last_call.request_id
    mine = readie.calls(function=f"{greet.__module__}.greet", since="10m")
    record = readie.call_record(request_id)
    lines = readie.logs(request_id)
    try:
        lookup("missing")
        caught = None
    except readie.RemoteExecutionError as error:
        caught = error.remote_type
    raised = readie.call_record(lookup.last_call.request_id)
    failed = readie.calls(failed=True, since="10m")
    print(json.dumps({
        "requestId": request_id,
        "listed": [c.request_id for c in mine],
        "function": record.function,
        "state": record.state,
        "lines": [[line.source, line.text] for line in lines],
        "raised": {
            "id": raised.request_id,
            "state": raised.state,
            "code": raised.code,
            "raisedType": raised.raised_type,
            "raisedMessage": raised.raised_message,
            "caught": caught,
        },
        "failedListed": [c.request_id for c in failed],
    }))
