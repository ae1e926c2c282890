"""readie's executor: the small Python program that runs user functions inside a sandbox.

It speaks the length-prefixed frame protocol of docs/executor-protocol.md over a unix socket.
Stdlib and cloudpickle only.
"""

PROTOCOL_VERSION = 1
