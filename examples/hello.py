"""A first remote call, a session, and a traceback from the other side.

Start a local cluster with `npm start`, paste the `export` lines it prints, then run:

    /usr/bin/python3 examples/hello.py
"""
import platform

import readie


@readie.remote(memory="512MiB")
def add(a, b):
    return a + b


@readie.remote
def where():
    import os
    import socket

    return f"{socket.gethostname()} pid {os.getpid()} python {platform.python_version()}"


@readie.remote
def count():
    global calls
    calls = globals().get("calls", 0) + 1
    return calls


@readie.remote
def divide(a, b):
    return a / b


def main():
    print("add(2, 3) =", add(2, 3))
    print("ran at:", where(), "| checkpoint:", where.last_call.checkpoint_id or "(cold start)")
    with readie.Session():
        print("a session keeps its Python state:", [count() for _ in range(3)])
    try:
        divide(1, 0)
    except readie.RemoteExecutionError as error:
        print("remote error:", error.remote_type, "-", error.remote_message)


if __name__ == "__main__":
    main()
