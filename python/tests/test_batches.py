"""A map's batches against a scripted ProxyService on loopback: many inputs per call, each
input's outcome its own, batch sizes that follow the inputs' time, what a batch's failure means
for its inputs, and Ctrl-C."""

import _thread
import io
import struct
import threading
import time
import unittest
from contextlib import redirect_stderr

import cloudpickle
import grpc

import readie
from readie._map_engine import BatchSizer, GROWTH, SAMPLES_TO_GROW, WARM_WAIT_SECONDS

from fake_proxy import FakeProxy, batch_parts, envelope_of, outcome_record, run_locally, wait_for_cancel, first_maps
from readie._proto import call_pb2, proxy_pb2


@readie.remote(stream_logs=False)
def triple(x):
    if x == 13:
        raise ValueError("thirteen")
    return 3 * x


@readie.remote(stream_logs=True)
def chatty(x):
    print(f"working on {x}")
    return x


@readie.remote(stream_logs=False, max_inputs=4)
def parallel(x):
    return x


class Unpicklable:
    def __reduce__(self):
        raise TypeError("this input does not pickle")


class FailsAfter:
    """Runs the first ``finish`` inputs of the first batch, then ends it like a worker whose
    container was OOM-killed; every later batch runs normally."""

    def __init__(self, finish, *, not_started=False):
        self.finish = finish
        self.not_started = not_started
        self.batches = 0
        self.lock = threading.Lock()

    def __call__(self, received, requests, context):
        received.read(requests)
        with self.lock:
            self.batches += 1
            first = self.batches == 1
        parts = batch_parts(received.payload)
        fn = cloudpickle.loads(parts[0])
        for index, part in enumerate(parts[1:]):
            if first and index >= self.finish:
                trailers = [("readie-not-started", "1")] if self.not_started else [("readie-killed", "out-of-memory"), ("readie-memory-budget", str(256 * 1024 * 1024))]
                context.set_trailing_metadata(tuple(trailers))
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "the call ran out of memory (scripted)")
            args, kwargs = cloudpickle.loads(part)
            envelope, _ = envelope_of(fn, args, kwargs)
            yield proxy_pb2.RequestExecutionResponse(ids=received.ids(), chunk=call_pb2.PayloadChunk(data=outcome_record(index, envelope["ok"], cloudpickle.dumps(envelope))))


class BatchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proxy = FakeProxy()

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()

    def setUp(self):
        readie.configure(self.proxy.address, insecure=True)
        self.proxy.calls.clear()
        first_maps(globals())

    def tearDown(self):
        self.proxy.script = run_locally
        readie.close_channels()
        readie.configure()

    def batch_sizes(self):
        return [call.config.inputs for call in self.proxy.calls if call.config is not None]

    def test_many_inputs_go_in_few_calls_and_come_back_in_order(self):
        results = list(triple.map(range(300), max_concurrency=4, return_exceptions=True, progress=False))
        self.assertEqual([r for i, r in enumerate(results) if i != 13], [3 * x for x in range(300) if x != 13])
        self.assertIsInstance(results[13], readie.RemoteExecutionError)
        self.assertEqual(results[13].input_index, 13)
        self.assertTrue(str(results[13]).startswith("input 13: ValueError: thirteen"))
        sizes = self.batch_sizes()
        self.assertEqual(sum(sizes), 300)
        self.assertLess(len(sizes), 60)
        # Fast inputs: the first batches are small, the next ones grow.
        self.assertEqual(sizes[:4], [1, 1, 1, 1])
        self.assertGreater(max(sizes), 1)

    def test_a_later_map_of_the_function_starts_from_the_inputs_times_the_last_one_measured(self):
        list(triple.map(range(300), max_concurrency=4, return_exceptions=True, progress=False))
        first = self.batch_sizes()
        self.proxy.calls.clear()
        list(triple.map(range(300), max_concurrency=4, return_exceptions=True, progress=False))
        later = self.batch_sizes()
        self.assertEqual(sum(later), 300)
        self.assertEqual(first[:4], [1, 1, 1, 1])
        # Its inputs are known fast: no batch of one to measure them first.
        self.assertGreater(min(later[:4]), 1, later)
        self.assertLess(len(later), len(first))

    def take_one_then_wait(self):
        """Maps 12 inputs in batches of 5 on one slot, takes one result, then none while the first
        two batches end: the window of 10 inputs drawn ahead of what was taken is full. A third
        call now could carry one input only; it must wait for results to be taken instead (the
        wait for it ends at 1 s, when none came, as it must not). Then takes the rest."""
        outputs = triple.map(range(12), chunk_size=5, max_concurrency=1, progress=False)
        try:
            results = [next(outputs)]
            deadline = time.monotonic() + 1.0
            while len(self.proxy.calls) < 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            self.assertEqual(len(self.proxy.calls), 2, "a third call while the window was full")
            results.extend(outputs)
        finally:
            outputs.close()  # a failed check leaves the map half taken: closing it cancels its calls
        self.assertEqual(results, [3 * x for x in range(12)])
        self.assertEqual(self.batch_sizes(), [5, 5, 2])

    def test_a_slow_consumer_keeps_the_chunk_size(self):
        self.take_one_then_wait()

    def test_results_count_as_taken_when_taken_not_when_they_arrive(self):
        # Each batch's five outcomes in one chunk: the caller's first results come as one list of
        # five, of which it takes one: one counts as taken, not five.
        def whole_batches(received, requests, context):
            answers = list(run_locally(received, requests, context))
            data = b"".join(answer.chunk.data for answer in answers)
            yield proxy_pb2.RequestExecutionResponse(ids=received.ids(), chunk=call_pb2.PayloadChunk(data=data))

        self.proxy.script = whole_batches
        self.take_one_then_wait()

    def test_the_first_failure_raises_naming_its_input(self):
        with self.assertRaises(readie.RemoteExecutionError) as raised:
            list(triple.map(range(20), chunk_size=8, progress=False))
        self.assertEqual(raised.exception.input_index, 13)

    def test_chunk_size_fixes_the_batch_size(self):
        self.assertEqual(list(triple.map(range(12), chunk_size=5, max_concurrency=1, progress=False)), [3 * x for x in range(12)])
        self.assertEqual(self.batch_sizes(), [5, 5, 2])
        # Each batch names its function, as a plain call does: the call history shows it.
        names = {call.config.function for call in self.proxy.calls if call.config is not None}
        self.assertEqual(names, {f"{triple.__module__}.triple"})
        with self.assertRaises(ValueError):
            triple.map([1], chunk_size=0)
        with self.assertRaises(ValueError):
            triple.map([1], chunk_size=1025)

    def test_an_input_that_does_not_pickle_fails_alone(self):
        results = list(triple.map([1, Unpicklable(), 3], chunk_size=3, return_exceptions=True, progress=False))
        self.assertEqual(results[0], 3)
        self.assertEqual(results[2], 9)
        self.assertIsInstance(results[1], TypeError)
        self.assertEqual(self.batch_sizes(), [2])

    def test_a_batch_killed_midway_fails_only_the_inputs_it_had_not_finished(self):
        self.proxy.script = FailsAfter(2)
        results = list(triple.map(range(5), chunk_size=5, return_exceptions=True, progress=False))
        self.assertEqual(results[:2], [0, 3])
        for index in (2, 3, 4):
            self.assertIsInstance(results[index], readie.RemoteOutOfMemoryError)
            self.assertEqual(results[index].input_index, index)
            self.assertTrue(str(results[index]).startswith(f"input {index}: "))
        # With retries, the unfinished inputs run again (in a batch of their own), and only they.
        self.proxy.calls.clear()
        self.proxy.script = FailsAfter(2)
        self.assertEqual(list(triple.map(range(5), chunk_size=5, retries=1, progress=False)), [0, 3, 6, 9, 12])
        self.assertEqual(self.batch_sizes(), [5, 3])

    def test_a_batch_refused_before_it_started_is_waited_out(self):
        self.proxy.script = FailsAfter(0, not_started=True)
        self.assertEqual(list(triple.map(range(4), chunk_size=4, progress=False)), [0, 3, 6, 9])
        self.assertEqual(self.batch_sizes(), [4, 4])

    def test_max_inputs_travels_and_sizes_batches_to_it(self):
        self.assertEqual(list(parallel.map(range(10), max_concurrency=1, progress=False)), list(range(10)))
        self.assertTrue(all(call.config.max_inputs == 4 for call in self.proxy.calls))
        self.assertEqual(self.batch_sizes()[0], 4)
        with self.assertRaises(ValueError):
            readie.remote(max_inputs=0)(len)
        with self.assertRaises(ValueError):
            readie.remote(max_inputs=257)(len)

    def test_each_inputs_lines_are_printed(self):
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertEqual(list(chatty.map(range(3), progress=False)), [0, 1, 2])
        self.assertEqual(sorted(err.getvalue().splitlines()), ["working on 0", "working on 1", "working on 2"])

    def test_map_aio_batches_too(self):
        import asyncio

        async def main():
            return [r async for r in triple.map.aio(range(40), chunk_size=10, return_exceptions=True, progress=False)]

        results = asyncio.run(main())
        self.assertEqual(results[:13], [3 * x for x in range(13)])
        self.assertEqual(self.batch_sizes(), [10, 10, 10, 10])

    def test_ctrl_c_cancels_every_batch_on_the_server(self):
        self.proxy.script = wait_for_cancel
        timer = threading.Timer(1.0, _thread.interrupt_main)
        timer.start()
        err = io.StringIO()
        try:
            with redirect_stderr(err), self.assertRaises(KeyboardInterrupt) as raised:
                list(triple.map(range(10), max_concurrency=3, progress=False))
        finally:
            timer.cancel()
        self.assertEqual(len(self.proxy.calls), 3)
        for call in self.proxy.calls:
            self.assertTrue(call.cancelled.wait(5), "every batch was cancelled on the server")
        self.assertEqual(str(raised.exception), "the map of triple was stopped: 0 of 10 inputs completed, 3 calls in flight cancelled")
        self.assertIn("[readie] the map of triple was stopped", err.getvalue())


class SizerTest(unittest.TestCase):
    def test_unknown_inputs_start_one_per_input_run_at_once_and_a_new_slot_follows_the_estimate(self):
        self.assertEqual(BatchSizer(None, 1).next(0, None, 4), 1)
        self.assertEqual(BatchSizer(None, 8).next(0, None, 4), 8)
        known = BatchSizer(None, 8)
        for _ in range(SAMPLES_TO_GROW):
            known.observe(1e-5)
        self.assertEqual(known.next(0, None, 4), 8 * GROWTH, "at most GROWTH times one at once")
        self.assertEqual(known.next(8, None, 4), 8 * GROWTH)

    def test_one_fast_first_input_is_no_promise(self):
        sizer = BatchSizer(None, 8)
        sizer.observe(1e-6)
        # Before SAMPLES_TO_GROW inputs were measured, a batch holds at most that many rounds
        # of what runs at once (not GROWTH times, nor a share of the map).
        self.assertEqual(sizer.next(8, 10_000, 16), 8 * SAMPLES_TO_GROW)
        for _ in range(SAMPLES_TO_GROW - 1):
            sizer.observe(1e-6)
        self.assertEqual(sizer.next(8, 10_000, 16), 8 * GROWTH)

    def test_fast_inputs_grow_by_at_most_growth_to_the_bound(self):
        sizer = BatchSizer(None, 1)
        for _ in range(SAMPLES_TO_GROW):
            sizer.observe(1e-6)
        sizes, last = [], 1
        for _ in range(6):
            last = sizer.next(last, None, 4)
            sizes.append(last)
        self.assertEqual(sizes[:2], [GROWTH, GROWTH**2])
        self.assertEqual(sizes[-1], 1024)

    def test_a_slow_input_goes_alone_and_shares_shrink(self):
        sizer = BatchSizer(None, 1)
        sizer.observe(2.0)
        self.assertEqual(sizer.next(100, None, 4), 1)
        fast = BatchSizer(None, 1)
        for _ in range(SAMPLES_TO_GROW):
            fast.observe(1e-5)
        # 100 inputs left of 30 us: one batch holds them all (a share would be worth no call).
        self.assertEqual(fast.next(1024, 100, 4), 100)
        slow = BatchSizer(None, 1)
        for seconds in (0.004, 0.005, 0.006, 0.008):
            slow.observe(seconds)
        self.assertFalse(slow.uniform)
        # 100 inputs left of 6 ms (the median) among 4 slots: half an even share (13), above the
        # floor of 8 (50 ms of them); near the end the shares shrink to that floor.
        self.assertEqual(slow.next(1024, 100, 4), 13)
        self.assertEqual(slow.next(1024, 20, 4), 8)

    def test_a_share_counts_what_the_slots_hold_and_a_slot_holding_its_own_waits(self):
        sizer = BatchSizer(None, 1)
        for seconds in (0.04, 0.05, 0.06, 0.08):
            sizer.observe(seconds)
        # 96 inputs not given to any slot and 32 given, not finished, among 4 slots: half an even
        # share of the 128 is 16; a slot holding 10 of them takes 6 more.
        self.assertEqual(sizer.next(10, 96, 4, pending=32, own=0), 16)
        self.assertEqual(sizer.next(10, 96, 4, pending=32, own=10), 6)
        # Holding its share (or all but less than a batch worth its call: one input of 55 ms), a
        # slot's next batch waits (0) until it ran some; a slot holding none takes at least that.
        self.assertEqual(sizer.next(10, 96, 4, pending=32, own=16), 0)
        self.assertEqual(sizer.next(10, 0, 4, pending=4, own=0), 1)

    def test_inputs_of_the_same_time_take_their_whole_share_at_once(self):
        sizer = BatchSizer(None, 1)
        for seconds in (0.100, 0.101, 0.100, 0.102):
            sizer.observe(seconds)
        self.assertTrue(sizer.uniform)
        # 396 inputs of 100 ms among 16 slots: the whole even share (25), no half of it; a batch
        # still holds at most TARGET_BATCH_SECONDS of work (19 of 101 ms).
        self.assertEqual(sizer.next(1, 396, 16), 19)
        self.assertEqual(sizer.next(1, 377, 16, pending=19, own=19), 6)
        self.assertEqual(sizer.next(1, 371, 16, pending=25, own=25), 0)

    def test_an_earlier_maps_times_count_until_this_map_measured_one(self):
        earlier = BatchSizer(None, 2)
        for _ in range(64):
            earlier.observe(1e-5)
        sizer = BatchSizer(None, 2, earlier.times())
        self.assertEqual(sizer.estimate, 1e-5)
        self.assertEqual(sizer.slot_estimate, 1e-5, "the slots the work wants are known at once")
        # Its first batches hold 4 rounds of what runs at once, not GROWTH times.
        self.assertEqual(sizer.next(0, 10_000, 16), 2 * SAMPLES_TO_GROW)
        sizer.observe(0.5)
        self.assertEqual(sizer.estimate, 0.5, "only this map's own times count from its first")
        self.assertIsNone(sizer.slot_estimate)
        self.assertEqual(BatchSizer(None, 2, ((), ())).estimate, None)

    def test_inputs_run_several_at_once_take_the_whole_share_too(self):
        sizer = BatchSizer(None, 8)
        for seconds in (0.050, 0.051, 0.050, 0.052):
            sizer.observe(seconds)
        # 400 inputs among 16 slots, 8 at once in each: 25 each (four rounds, the last of one
        # input), not 24 and 16 left over for a call of their own after them.
        self.assertEqual(sizer.next(8, 400, 16), 25)
        self.assertEqual(sizer.next(8, 5, 16), 5)

    def test_slots_follow_warm_inputs_and_small_first_ones_wait_for_them(self):
        sizer = BatchSizer(None, 1)
        # Four first inputs of new containers, each paying a first call's warm-up (2 ms): too
        # small to open containers on, before any ran warm.
        for _ in range(4):
            sizer.observe(0.002, warm=False)
        self.assertIsNone(sizer.slot_estimate)
        self.assertEqual(sizer.estimate, 0.002, "batches are still sized by them")
        for seconds in (1e-5, 2e-5, 3e-5):
            sizer.observe(seconds)
        self.assertIsNone(sizer.slot_estimate, "three warm inputs are not yet enough")
        sizer.observe(4e-5)
        self.assertEqual(sizer.slot_estimate, 3e-5, "the median of the warm ones")
        # First inputs of at least WARM_WAIT_SECONDS each: waiting for warm ones would cost more
        # than a container, so slots follow them at once.
        slow = BatchSizer(None, 1)
        for seconds in (0.05, 0.06, 0.05, 0.07):
            slow.observe(seconds, warm=False)
        self.assertEqual(slow.slot_estimate, 0.06)
        self.assertGreaterEqual(0.05, WARM_WAIT_SECONDS)

    def test_a_fixed_size_stays(self):
        sizer = BatchSizer(7, 1)
        sizer.observe(5.0)
        self.assertEqual(sizer.next(1, None, 16), 7)
        # Never more than what is left.
        self.assertEqual(sizer.next(1, 3, 16), 3)


if __name__ == "__main__":
    unittest.main()
