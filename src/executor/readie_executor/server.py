"""The executor's accept loop: one connection at a time, each carrying installs and calls.

Per connection: the executor sends HELLO; then, as often as the worker likes, IMAGE (answered by
IMAGE_DONE), INSTALL (answered by LOG lines and INSTALL_DONE) or CALL, PAYLOAD pieces and
PAYLOAD_END (answered by LOG lines while the function runs, then RESULT pieces and RESULT_END; for
a batch, OUTCOME records and INPUT_LOG lines as its inputs run, then RESULT_END: see batches.py).
When the worker closes the connection, the executor accepts the next one. Module state persists
from call to call.
"""

import os
import platform
import socket
import time

from . import PROTOCOL_VERSION, batches, calls, frames, image, install
from .frames import ProtocolError


def dns_status(network="host"):
    """Whether name resolution is configured in this sandbox, and what was found.

    Without a network (`none`) only /etc/hosts can answer, which is what that mode means: it is
    reported as such, not as a broken resolver.
    """
    if network == "none":
        try:
            socket.getaddrinfo("localhost", None)
        except OSError as error:
            return {"ok": False, "detail": f"resolving localhost failed: {error}"}
        return {"ok": True, "detail": "no network (--network none): names resolve from /etc/hosts only"}
    try:
        with open("/etc/resolv.conf", encoding="utf-8", errors="replace") as conf:
            servers = [line.split()[1] for line in conf if line.startswith("nameserver") and len(line.split()) > 1]
    except OSError as error:
        return {"ok": False, "detail": f"/etc/resolv.conf is not readable: {error.strerror}"}
    try:
        socket.getaddrinfo("localhost", None)
    except OSError as error:
        return {"ok": False, "detail": f"resolving localhost failed: {error}"}
    if not servers:
        return {"ok": False, "detail": "/etc/resolv.conf names no nameserver"}
    return {"ok": True, "detail": "nameservers " + ", ".join(servers)}


# The most inputs a batch carries, and runs at once (the router and the worker check them first).
MAX_BATCH_INPUTS = 1024
MAX_INPUTS_AT_ONCE = 256


class Executor:
    """Serves calls on a listening unix socket, forever."""

    def __init__(self, listener, capture, identity):
        self._listener = listener
        self._capture = capture
        self._dns = dns_status(identity.get("network", "host"))
        self._hello = dict(
            identity,
            protocol=PROTOCOL_VERSION,
            python=platform.python_version(),
            pid=os.getpid(),
            dns=self._dns,
        )

    def serve_forever(self):
        while True:
            connection, _ = self._listener.accept()
            try:
                self._serve(connection)
            except (OSError, ProtocolError):
                # The worker went away or broke the protocol: this connection is over, the
                # container is not. The worker decides whether to keep it.
                pass
            finally:
                self._capture.end()
                connection.close()

    def _serve(self, connection):
        writer = frames.FrameWriter(connection)
        reader = connection.makefile("rb", buffering=1 << 16)
        writer.send(frames.encode_json(frames.HELLO, self._hello))
        while True:
            frame = frames.read_frame(reader)
            if frame is None:
                return
            kind, body = frame
            if kind == frames.INSTALL:
                self._install(writer, frames.decode_json(body))
            elif kind == frames.IMAGE:
                done = image.enter_image(frames.decode_json(body))
                writer.send(frames.encode_json(frames.IMAGE_DONE, done))
            elif kind == frames.CALL:
                self._call(writer, reader, frames.decode_json(body))
            else:
                name = frames.NAMES.get(kind, hex(kind))
                writer.send(frames.encode_json(frames.ERROR, {"message": f"unexpected {name}"}))
                return

    def _install(self, writer, request):
        def send_log(source, text):
            writer.send(frames.encode_log(source, text))

        done = install.install(request, send_log)
        writer.send(frames.encode_json(frames.INSTALL_DONE, done))

    def _call(self, writer, reader, header):
        fmt = header.get("format")
        if fmt not in calls.FORMATS:
            raise ProtocolError(f"unknown payload format {fmt!r}")
        inputs, max_inputs = header.get("inputs", 0), header.get("maxInputs", 0)
        for name, value, bound in (("inputs", inputs, MAX_BATCH_INPUTS), ("maxInputs", max_inputs, MAX_INPUTS_AT_ONCE)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= bound:
                raise ProtocolError(f"{name} must be an integer from 0 to {bound}")
        version = header.get("version")
        held = self._hello.get("checkpoint", "")
        if version is not None and version != held:
            # A pinned call is served by its version or not at all (the worker checks first).
            holds = f"version {held!r}" if held else "no version (it started cold)"
            writer.send(
                frames.encode_json(
                    frames.ERROR,
                    {"message": f"this container holds {holds}, not version {version!r}", "reason": "version"},
                )
            )
            raise ProtocolError("a call for another version")
        payload = bytearray()
        while True:
            frame = frames.read_frame(reader)
            if frame is None:
                raise ProtocolError("the stream ended before PAYLOAD_END")
            kind, body = frame
            if kind == frames.PAYLOAD_END:
                break
            if kind != frames.PAYLOAD:
                raise ProtocolError(f"expected PAYLOAD, got {frames.NAMES.get(kind, hex(kind))}")
            payload += body
        if not self._dns["ok"]:
            writer.send(frames.encode_log(frames.SYSTEM, "DNS is not usable in this sandbox: " + self._dns["detail"]))

        if inputs > 0:
            batches.run(writer, self._capture, fmt, inputs, max_inputs, payload)
            return

        def sink(source, text):
            try:
                writer.send(frames.encode_log(source, text))
            except OSError:
                pass

        started = time.perf_counter()
        self._capture.begin(sink)
        try:
            ok, envelope, raised = calls.execute(fmt, payload)
        finally:
            self._capture.drain()
            self._capture.end()
        elapsed_ms = (time.perf_counter() - started) * 1000
        view = memoryview(envelope)
        for start in range(0, len(view), frames.MAX_PIECE):
            writer.send(frames.encode(frames.RESULT, view[start : start + frames.MAX_PIECE].tobytes()))
        end = {"ok": ok, "ms": round(elapsed_ms, 3)}
        if raised is not None:
            end["raised"] = raised
        writer.send(frames.encode_json(frames.RESULT_END, end))
