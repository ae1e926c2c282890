"""End-to-end scenarios run by test/e2e/*.test.ts through nginx, the router and real workers.

Usage: /usr/bin/python3 calls.py SCENARIO [ARG...]; prints one JSON object on stdout (the last
line), and user output goes to stderr as the client prints it.
"""
import json
import sys
import time

import readie


def info(call):
    last = call.last_call
    return {"worker": last.worker_id, "container": last.container_id, "checkpoint": last.checkpoint_id}


@readie.remote(memory="512MiB")
def add(a, b):
    return a + b


@readie.remote
def fails():
    def inner():
        raise ValueError("bad input: 42")

    inner()


@readie.remote
def chatty():
    import sys as remote_sys

    print("hello on stdout")
    print("warning on stderr", file=remote_sys.stderr)
    return "done"


@readie.remote
def bump():
    global counter
    counter = globals().get("counter", 0) + 1
    return counter


@readie.remote(packages=["readie-e2e-demo"])
def from_wheel():
    import readie_e2e_demo

    return readie_e2e_demo.greet()


@readie.remote
def with_numpy():
    import numpy

    return int(numpy.arange(10).sum())


def says_cold():
    return "cold"


# The same function twice: with the flag it must start cold; without, it restores checkpoint_0.
cold = readie.remote(disable_optimized_execution=True)(says_cold)
not_cold = readie.remote(says_cold)


@readie.remote(memory="1GiB")
def echo(data):
    return data


@readie.remote(memory="128MiB")
def hog():
    blocks = []
    for _ in range(64):
        blocks.append(b"x" * (16 * 1024 * 1024))
    return len(blocks)


@readie.remote
def sleeps(seconds):
    import time as remote_time

    print("started", flush=True)
    remote_time.sleep(seconds)
    return "woke"


def main():
    scenario = sys.argv[1]
    out = {}
    if scenario == "plain":
        out = {"value": add(2, 3), **info(add)}
    elif scenario == "exception":
        try:
            fails()
        except readie.RemoteExecutionError as error:
            out = {"type": error.remote_type, "message": error.remote_message, "traceback": error.remote_traceback}
    elif scenario == "stdout":
        out = {"value": chatty()}
    elif scenario == "session":
        with readie.Session() as session:
            out = {"values": [bump(), bump(), bump()], "session": session.last_call.session_id, **info(bump)}
    elif scenario == "session-then-expired":
        with readie.Session() as session:
            first = bump()
            print(json.dumps({"pinned": info(bump), "first": first}), flush=True)
            sys.stdin.readline()  # the test kills the session's worker, then presses enter
            try:
                bump()
                out = {"error": None}
            except readie.SessionExpiredError as error:
                out = {"error": type(error).__name__, "message": str(error)}
    elif scenario == "package":
        out = {"value": from_wheel(), **info(from_wheel)}
    elif scenario == "checkpoint":
        out = {"value": with_numpy(), **info(with_numpy)}
    elif scenario == "disable":
        out = {"value": cold(), **info(cold), "without": {"value": not_cold(), **info(not_cold)}}
    elif scenario == "big":
        data = bytes(range(256)) * (64 * 1024 * 1024 // 256)
        started = time.time()
        back = echo(data)
        out = {"same": back == data, "size": len(back), "seconds": round(time.time() - started, 3)}
    elif scenario == "long":
        print(json.dumps({"calling": True}), flush=True)
        out = {"value": sleeps(float(sys.argv[2]))}
    elif scenario == "oom":
        try:
            hog()
            out = {"error": None}
        except readie.ReadieError as error:
            out = {
                "error": type(error).__name__,
                "message": str(error),
                "budget": getattr(error, "memory_budget", None),
                "not_started": error.not_started,
            }
    elif scenario == "unauthenticated":
        try:
            add(1, 1)
            out = {"error": None}
        except readie.ReadieError as error:
            out = {"error": type(error).__name__, "message": str(error)}
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
