"""A batch: one call carrying many inputs of one function (docs/executor-protocol.md, "Batches").

The inputs run one by one in the main thread, or up to `maxInputs` at once (threads for a sync
function, tasks on one event loop for an async one). Each input's outcome (its result envelope,
as a plain call's) goes back as OUTCOME records tagged with its index as soon as it finishes; a
failing input is its own error envelope and never fails its neighbours. Outcomes of fast inputs
are gathered for up to FLUSH_AFTER (10 ms) into one frame, so a thousand trivial inputs cost a few
writes, not a thousand. Lines an input writes go back as INPUT_LOG frames tagged with its index:
one at a time, everything written to fds 1 and 2 while it runs is its own; several at once, what
Python code prints through `sys.stdout` and `sys.stderr` is tagged by the input that printed it,
and output of native code or child processes goes untagged.
"""

import asyncio
import contextvars
import inspect
import io
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from . import calls, frames
from .capture import MAX_LINE

# Outcomes of fast inputs wait at most this long (seconds) to share a frame (the first goes at once).
FLUSH_AFTER = 0.01
# ... or until this many bytes of records wait.
FLUSH_BYTES = 256 * 1024

_LENGTH = struct.Struct(">I")
_current_input = contextvars.ContextVar("readie_batch_input", default=None)


def split_payload(payload, count):
    """A cloudpickle batch payload's parts: the function's bytes, then each input's.

    The layout: a u32 big-endian length and the function (`cloudpickle.dumps(fn)`), then for each
    input a u32 length and `cloudpickle.dumps((args, kwargs))`."""
    view = memoryview(payload)
    parts = []
    offset = 0
    while offset < len(view):
        if offset + _LENGTH.size > len(view):
            raise calls.CallError("the batch payload ends inside a length")
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        if offset + length > len(view):
            raise calls.CallError("the batch payload ends inside a part")
        parts.append(view[offset : offset + length])
        offset += length
    if not parts:
        raise calls.CallError("the batch payload holds no function")
    if len(parts) - 1 != count:
        raise calls.CallError(f"the batch payload holds {len(parts) - 1} inputs, not {count}")
    return parts[0], parts[1:]


class Batch:
    """A batch's function and how to read each of its inputs; a function that does not load
    fails every input with its error."""

    def __init__(self, fmt, count, payload, namespace):
        self.fmt = fmt
        self.count = count
        self.fn = None
        self.failure = None
        self._inputs = [None] * count
        self._kwargs = {}
        try:
            if fmt == calls.CLOUDPICKLE:
                import cloudpickle

                function, self._inputs = split_payload(payload, count)
                self.fn = calls.adopt(cloudpickle.loads(function), namespace)
            else:
                call = calls.json_call_of(payload)
                inputs, kwargs = call.get("inputs"), call.get("kwargs", {})
                if not isinstance(inputs, list) or len(inputs) != count:
                    raise calls.CallError(f'"inputs" must be a JSON array of {count} argument arrays')
                if not isinstance(kwargs, dict):
                    raise calls.CallError('"kwargs" must be a JSON object')
                self._inputs, self._kwargs = inputs, kwargs
                self.fn = calls.json_function(call, namespace)
        except BaseException as error:  # noqa: BLE001 - the user's payload: every input's error
            self.failure = error

    @property
    def is_async(self):
        return self.failure is None and inspect.iscoroutinefunction(self.fn)

    def arguments(self, index):
        """(args, kwargs) of input `index`; raises the input's own error when it does not load."""
        if self.failure is not None:
            raise self.failure
        entry = self._inputs[index]
        self._inputs[index] = None  # its bytes are not needed again
        if self.fmt == calls.CLOUDPICKLE:
            import pickle

            loaded = pickle.loads(entry)
            if not isinstance(loaded, tuple) or len(loaded) != 2:
                raise calls.CallError("an input of a batch must be an (args, kwargs) tuple")
            return tuple(loaded[0]), dict(loaded[1])
        if not isinstance(entry, list):
            raise calls.CallError(f"input {index} of the batch is not a JSON array of arguments")
        return entry, self._kwargs


def _too_large(size):
    return ValueError(
        f"the result of this input is {size} bytes: a batch input's result holds at most "
        f"{frames.MAX_OUTCOME_BYTES} bytes (a single call's is not bounded: use fn.spawn or a call)"
    )


def outcome(batch, index, envelope, error, micros):
    """The input's outcome records: its envelope encoded (or an error envelope when too large)."""
    ok, data = calls.encode(batch.fmt, envelope, error)
    if len(data) > frames.MAX_OUTCOME_BYTES:
        ok, data = calls.encode(batch.fmt, calls.error_envelope(_too_large(len(data))))
    return frames.outcome_records(index, ok, micros, data)


def run_input(batch, index):
    """Runs one input: (ok, records)."""
    started = time.perf_counter()
    error = None
    try:
        args, kwargs = batch.arguments(index)
        envelope = {"ok": True, "value": calls.invoke(batch.fn, args, kwargs)}
    except BaseException as raised:  # noqa: BLE001 - an input's exception is its outcome
        error = raised
        envelope = calls.error_envelope(raised)
    micros = (time.perf_counter() - started) * 1e6
    return error is None, micros, envelope, error


class OutcomeSender:
    """Sends records in OUTCOME frames: at once when the last frame went out FLUSH_AFTER ago or
    more, else after at most FLUSH_AFTER (a helper thread sends what waits), so a slow input
    never holds back the outcomes of the fast ones before it. Thread-safe."""

    def __init__(self, writer):
        self._writer = writer
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._pending = []
        self._size = 0
        self._last = 0.0
        self._closed = False
        self._thread = None
        self._failure = None

    def add(self, records):
        with self._lock:
            if self._failure is not None:
                raise self._failure
            for record in records:
                if self._size + len(record) > frames.MAX_PIECE:
                    self._flush()
                self._pending.append(record)
                self._size += len(record)
            if time.perf_counter() - self._last >= FLUSH_AFTER or self._size >= FLUSH_BYTES:
                self._flush()
            elif self._thread is None:
                self._thread = threading.Thread(target=self._run, name="readie-outcomes", daemon=True)
                self._thread.start()
            else:
                self._wake.notify()

    def _flush(self):
        if not self._pending:
            return
        body = b"".join(self._pending)
        self._pending = []
        self._size = 0
        self._writer.send(frames.encode(frames.OUTCOME, body))
        self._last = time.perf_counter()

    def _run(self):
        with self._lock:
            while not self._closed:
                if not self._pending:
                    self._wake.wait()
                    continue
                due = self._last + FLUSH_AFTER - time.perf_counter()
                if due > 0:
                    self._wake.wait(due)
                    continue
                try:
                    self._flush()
                except OSError as error:
                    self._failure = error
                    return

    def close(self):
        """Sends what waits; raises if a send failed."""
        with self._lock:
            self._closed = True
            self._wake.notify()
            if self._failure is not None:
                raise self._failure
            self._flush()


class _RoutedStream(io.TextIOBase):
    """`sys.stdout` or `sys.stderr` while several inputs run at once: a line goes back tagged with
    the input whose thread or task printed it; anything else to the stream it replaces."""

    def __init__(self, fallback, source, send):
        super().__init__()
        self._fallback = fallback
        self._source = source
        self._send = send
        self._partial = {}
        self._lock = threading.Lock()

    def write(self, text):
        index = _current_input.get()
        if index is None:
            return self._fallback.write(text)
        with self._lock:
            lines = (self._partial.pop(index, "") + text).split("\n")
            rest = lines.pop()
            while len(rest) > MAX_LINE:
                lines.append(rest[:MAX_LINE])
                rest = rest[MAX_LINE:]
            if rest:
                self._partial[index] = rest
        for line in lines:
            self._send(index, self._source, line)
        return len(text)

    def end_input(self, index):
        with self._lock:
            rest = self._partial.pop(index, None)
        if rest:
            self._send(index, self._source, rest)

    def flush(self):
        self._fallback.flush()

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        return self._fallback.fileno()

    @property
    def encoding(self):
        return self._fallback.encoding

    @property
    def buffer(self):
        return self._fallback.buffer


def run(writer, capture, fmt, count, max_inputs, payload, namespace=None):
    """Runs a batch's inputs and sends their outcomes, then RESULT_END; raises OSError when the
    worker's connection breaks."""
    if namespace is None:
        namespace = calls.session_namespace()
    started = time.perf_counter()
    batch = Batch(fmt, count, payload, namespace)
    del payload
    sender = OutcomeSender(writer)

    def send_line(index, source, text):
        try:
            writer.send(frames.encode_input_log(index, source, text))
        except OSError:
            pass

    parallel = max(1, max_inputs) > 1 or batch.is_async
    if parallel:
        results = _run_parallel(batch, max(1, max_inputs), sender, send_line)
    else:
        results = _run_in_turn(batch, capture, sender, send_line)
    sender.close()
    elapsed_ms = (time.perf_counter() - started) * 1000
    writer.send(frames.encode_json(frames.RESULT_END, {"ok": all(results), "ms": round(elapsed_ms, 3)}))


def _run_in_turn(batch, capture, sender, send_line):
    """One input at a time: every line written to fds 1 and 2 while it runs is its own."""
    current = [None]

    def sink(source, text):
        index = current[0]
        if index is None:
            return
        send_line(index, source, text)

    results = []
    capture.begin(sink)
    try:
        for index in range(batch.count):
            current[0] = index
            ok, micros, envelope, error = run_input(batch, index)
            capture.drain()
            current[0] = None
            results.append(ok)
            sender.add(outcome(batch, index, envelope, error, micros))
    finally:
        capture.end()
    return results


def _run_parallel(batch, limit, sender, send_line):
    """Up to `limit` inputs at once: threads for a sync function, tasks for an async one."""
    import sys

    streams = (sys.stdout, sys.stderr)
    routed = (
        _RoutedStream(sys.stdout, frames.STDOUT, send_line),
        _RoutedStream(sys.stderr, frames.STDERR, send_line),
    )
    results = [False] * batch.count

    def finish(index, ok, micros, envelope, error):
        for stream in routed:
            stream.end_input(index)
        results[index] = ok
        sender.add(outcome(batch, index, envelope, error, micros))

    sys.stdout, sys.stderr = routed
    try:
        if batch.is_async:
            asyncio.run(_run_tasks(batch, limit, finish))
        else:

            def one(index):
                _current_input.set(index)
                finish(index, *run_input(batch, index))

            with ThreadPoolExecutor(max_workers=min(limit, batch.count), thread_name_prefix="readie-input") as pool:
                for future in [pool.submit(one, index) for index in range(batch.count)]:
                    future.result()
    finally:
        sys.stdout, sys.stderr = streams
    return results


async def _run_tasks(batch, limit, finish):
    gate = asyncio.Semaphore(limit)

    async def one(index):
        async with gate:
            _current_input.set(index)
            started = time.perf_counter()
            error = None
            try:
                args, kwargs = batch.arguments(index)
                envelope = {"ok": True, "value": await batch.fn(*args, **kwargs)}
            except BaseException as raised:  # noqa: BLE001 - an input's exception is its outcome
                error = raised
                envelope = calls.error_envelope(raised)
            finish(index, error is None, (time.perf_counter() - started) * 1e6, envelope, error)

    await asyncio.gather(*(one(index) for index in range(batch.count)))
