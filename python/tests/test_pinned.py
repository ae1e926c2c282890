"""Pinned calls against a real gRPC server on loopback: the flag on the wire, the served version
and routing revision in ``last_call``, a shed's typed error with its hint (from ``retry-after-ms``
or a ``google.rpc.RetryInfo``), and the automatic retry with ``retry_of`` within the deadline."""

import asyncio
import time
import unittest

import cloudpickle
import grpc

import readie
from fake_proxy import FakeProxy, envelope_of, result_answers
from readie._status_details import RETRY_INFO_TYPE_URL, retry_after, retry_info_delay
from test_streaming import ProxyTestCase


@readie.remote(pinned=True, stream_logs=False, shed_retries=2)
def judge(text):
    return len(text)


@readie.remote(pinned=True, stream_logs=False, shed_retries=5, timeout=1.0)
def judge_briefly(text):
    return len(text)


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number, payload):
    if isinstance(payload, int):
        return _varint(number << 3) + _varint(payload)
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def retry_status(seconds, nanos=0):
    """A google.rpc.Status holding a RetryInfo, encoded by hand (as any gRPC server sends it)."""
    duration = _field(1, seconds) + (_field(2, nanos) if nanos else b"")
    retry = _field(1, duration)
    detail = _field(1, RETRY_INFO_TYPE_URL.encode()) + _field(2, retry)
    return _field(1, 8) + _field(2, b"shed") + _field(3, detail)


def served(version="screen-v1", revision=4):
    """A script that runs the call and answers with the version and revision in its IDs."""

    def script(received, requests, context):
        received.read(requests)
        fn, args, kwargs = cloudpickle.loads(received.payload)
        envelope, _ = envelope_of(fn, args, kwargs)
        yield from result_answers(received, cloudpickle.dumps(envelope), version=version, routing_revision=revision)

    return script


def shedding(times, *, hint_ms="50", details_bin=None, then=None):
    """Sheds the first `times` calls (RESOURCE_EXHAUSTED with a hint), then runs `then`."""
    state = {"sheds": 0}

    def script(received, requests, context):
        if state["sheds"] < times:
            state["sheds"] += 1
            received.read(requests)
            trailers = [("readie-version", "screen-v1"), ("readie-routing-revision", "4")]
            if hint_ms is not None:
                trailers.append(("retry-after-ms", hint_ms))
            if details_bin is not None:
                trailers.append(("grpc-status-details-bin", details_bin))
            context.set_trailing_metadata(trailers)
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "version loading: retry in 2s")
        yield from (then or served())(received, requests, context)

    return script


class PinnedTest(ProxyTestCase):
    def test_the_flag_travels_and_last_call_names_the_served_version(self):
        self.proxy.script = served()
        self.assertEqual(judge("abc"), 3)
        (received,) = self.proxy.calls
        self.assertTrue(received.config.pinned)
        self.assertEqual(received.config.retry_of, "")
        self.assertEqual((judge.last_call.served_version, judge.last_call.routing_revision), ("screen-v1", 4))

    def test_a_shed_is_retried_after_its_hint_with_retry_of_naming_the_first_try(self):
        self.proxy.script = shedding(2)
        started = time.monotonic()
        self.assertEqual(judge("abcd"), 4)
        self.assertGreaterEqual(time.monotonic() - started, 0.1)
        first, second, third = (call.config for call in self.proxy.calls)
        self.assertEqual(second.retry_of, first.request_id)
        self.assertEqual(third.retry_of, first.request_id)
        self.assertEqual(len({first.request_id, second.request_id, third.request_id}), 3)
        self.assertTrue(third.pinned)
        self.assertEqual(judge.last_call.retry_of, first.request_id)
        self.assertEqual(judge.last_call.served_version, "screen-v1")

    def test_past_its_tries_a_shed_raises_ShedError_with_retry_after_and_the_resolution(self):
        self.proxy.script = shedding(10)
        with self.assertRaises(readie.ShedError) as caught:
            judge("x")
        error = caught.exception
        self.assertIsInstance(error, readie.ResourceExhaustedError)
        self.assertEqual(error.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertAlmostEqual(error.retry_after, 0.05)
        self.assertEqual((error.call.served_version, error.call.routing_revision), ("screen-v1", 4))
        self.assertIn("retry after 50ms", str(error))
        self.assertEqual(len(self.proxy.calls), 3)

    def test_the_hint_is_read_from_a_RetryInfo_when_there_is_no_trailer(self):
        self.proxy.script = shedding(10, hint_ms=None, details_bin=retry_status(0, 20_000_000))
        with self.assertRaises(readie.ShedError) as caught:
            judge("x")
        self.assertAlmostEqual(caught.exception.retry_after, 0.02)

    def test_no_retry_past_the_deadline(self):
        self.proxy.script = shedding(10, hint_ms="5000")
        started = time.monotonic()
        with self.assertRaises(readie.ShedError):
            judge_briefly("x")
        self.assertLess(time.monotonic() - started, 1.0)
        self.assertEqual(len(self.proxy.calls), 1)

    def test_a_plain_resource_exhausted_is_no_shed_and_is_not_retried(self):
        self.proxy.script = shedding(10, hint_ms=None)
        with self.assertRaises(readie.ResourceExhaustedError) as caught:
            judge("x")
        self.assertNotIsInstance(caught.exception, readie.ShedError)
        self.assertEqual(len(self.proxy.calls), 1)

    def test_asyncio_retries_the_same_way(self):
        self.proxy.script = shedding(1)

        async def main():
            try:
                return await judge.aio("abcde")
            finally:
                await readie.aclose_channels()

        self.assertEqual(asyncio.run(main()), 5)
        first, second = (call.config for call in self.proxy.calls)
        self.assertEqual(second.retry_of, first.request_id)

    def test_options_are_checked_at_definition(self):
        with self.assertRaisesRegex(ValueError, "shed_retries"):
            readie.remote(shed_retries=-1)
        with self.assertRaisesRegex(ValueError, "timeout"):
            readie.remote(timeout=0)
        with self.assertRaisesRegex(ValueError, "contradicts"):
            readie.remote(pinned=True, disable_optimized_execution=True)


class StatusDetailsTest(unittest.TestCase):
    def test_reads_retry_info_and_ignores_other_details(self):
        self.assertAlmostEqual(retry_info_delay(retry_status(2, 500_000_000)), 2.5)
        other = _field(1, 8) + _field(3, _field(1, b"type.googleapis.com/google.rpc.DebugInfo") + _field(2, b"x"))
        self.assertIsNone(retry_info_delay(other))
        self.assertIsNone(retry_info_delay(b"\xff\xff"))
        self.assertEqual(retry_after([("retry-after-ms", "1500")]), 1.5)
        self.assertIsNone(retry_after([("retry-after-ms", "soon")]))


if __name__ == "__main__":
    unittest.main()
