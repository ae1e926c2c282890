"""fn.map and fn.spawn against a scripted ProxyService on loopback: retries of refusals, never of
calls that ran, the fallback concurrency, and the pure pieces (backoff, progress)."""

import collections
import random
import threading
import time
import unittest

import grpc

import readie
from readie import _map_engine, _map_options
from readie._progress import render, wants_progress
from readie._tenant import Room
from readie._retry import MAX_BACKOFF, backoff, may_retry_ran, waits_for_room
from readie.errors import error_for_status

import cloudpickle

from fake_proxy import FakeProxy, batch_answers, batch_parts, envelope_of, outcome_record, result_answers, run_locally, first_maps
from readie._proto import call_pb2, proxy_pb2


@readie.remote(stream_logs=False)
def double(x):
    return 2 * x


class Refusing:
    """A script that refuses the first ``refusals`` calls the way the router refuses for room,
    then runs calls here; counts how many run at once."""

    def __init__(self, refusals, *, code=grpc.StatusCode.RESOURCE_EXHAUSTED, not_started=True, retry_after_ms=None):
        self.refusals = refusals
        self.code = code
        self.not_started = not_started
        self.retry_after_ms = retry_after_ms
        self.lock = threading.Lock()
        self.seen = 0
        self.running = 0
        self.most_running = 0

    def __call__(self, received, requests, context):
        with self.lock:
            self.seen += 1
            refuse = self.seen <= self.refusals
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            received.read(requests)
            if refuse:
                trailers = []
                if self.not_started:
                    trailers.append(("readie-not-started", "1"))
                if self.retry_after_ms is not None:
                    trailers.append(("retry-after-ms", str(self.retry_after_ms)))
                context.set_trailing_metadata(tuple(trailers))
                context.abort(self.code, "no worker can accept this request (scripted)")
            time.sleep(0.02)
            if received.config.inputs > 0:
                yield from batch_answers(received)
                return
            fn, args, kwargs = cloudpickle.loads(received.payload)
            envelope, _ = envelope_of(fn, args, kwargs)
            yield from result_answers(received, cloudpickle.dumps(envelope))
        finally:
            with self.lock:
                self.running -= 1


class ProxyCase(unittest.TestCase):
    """A scripted server for the class; each test starts configured for it and ends closed."""

    @classmethod
    def setUpClass(cls):
        cls.proxy = FakeProxy()

    @classmethod
    def tearDownClass(cls):
        cls.proxy.stop()

    def setUp(self):
        readie.configure(self.proxy.address, insecure=True)
        first_maps(globals())

    def tearDown(self):
        self.proxy.script = run_locally
        readie.close_channels()
        readie.configure()


class MapTest(ProxyCase):

    def test_waits_out_refusals_for_room_honouring_the_retry_after_hint(self):
        script = Refusing(3, retry_after_ms=300)
        self.proxy.script = script
        started = time.monotonic()
        results = list(double.map(range(6), max_concurrency=1, chunk_size=1, progress=False))
        self.assertEqual(results, [0, 2, 4, 6, 8, 10])
        self.assertEqual(script.seen, 9)  # three refusals, then six batches of one input
        self.assertGreaterEqual(time.monotonic() - started, 0.9)  # three waits of at least 300 ms

    def test_never_retries_a_call_that_may_have_run_unless_asked(self):
        script = Refusing(1, code=grpc.StatusCode.UNAVAILABLE, not_started=False)
        self.proxy.script = script
        with self.assertRaises(readie.ClusterUnavailableError) as raised:
            list(double.map([5], progress=False))
        self.assertEqual(raised.exception.input_index, 0)
        self.assertTrue(str(raised.exception).startswith("input 0: "))
        self.assertEqual(script.seen, 1)

        script = Refusing(1, code=grpc.StatusCode.UNAVAILABLE, not_started=False)
        self.proxy.script = script
        self.assertEqual(list(double.map([5], retries=1, progress=False)), [10])
        self.assertEqual(script.seen, 2)

    def test_a_router_without_slots_gets_the_fallback_concurrency(self):
        # The scripted server has no TenantService: Slots is UNIMPLEMENTED, so 4 calls in flight.
        script = Refusing(0)
        self.proxy.script = script
        self.assertEqual(list(double.map(range(20), progress=False)), [2 * x for x in range(20)])
        self.assertLessEqual(script.most_running, 4)
        self.assertGreaterEqual(script.most_running, 2)

    def test_spawned_calls_wait_out_refusals_too(self):
        script = Refusing(2)
        self.proxy.script = script
        self.assertEqual(readie.gather(double.spawn(1), double.spawn(2)), [2, 4])

    def test_rejects_bad_options_at_once(self):
        with self.assertRaises(ValueError):
            double.map([1], max_concurrency=0)
        with self.assertRaises(ValueError):
            double.map([1], retries=-1)
        with self.assertRaises(TypeError):
            double.starmap([(1,)], [(2,)])


class Recording(Refusing):
    """Runs every call here (after ``delay`` seconds, which its inputs' outcomes say they took:
    the map sizes its slots by them), recording each call's session. Calls of one session take
    turns, as at the router: one runs, the others wait for it (``overlapped`` counts the calls
    that arrived while one of their session ran)."""

    def __init__(self, delay=0.02, per_input=False):
        super().__init__(0)
        self.delay = delay
        #: Whether each input takes ``delay`` and 1 ms more for each session seen before its own
        #: (its outcome sent as it ends), not the whole call.
        self.per_input = per_input
        self.sessions = []
        #: Each call's input count, beside its session.
        self.inputs = []
        self.turns = {}
        self.overlapped = 0

    def __call__(self, received, requests, context):
        received.read(requests)
        session = received.config.session_id
        with self.lock:
            turn = self.turns.setdefault(session, threading.Lock()) if session else threading.Lock()
            if turn.locked():
                self.overlapped += 1
        with turn:
            with self.lock:
                self.sessions.append(session)
                self.inputs.append(received.config.inputs)
                self.running += 1
                self.most_running = max(self.most_running, self.running)
                delay = self.delay + 0.001 * list(dict.fromkeys(self.sessions)).index(session)
            try:
                if not self.per_input:
                    time.sleep(self.delay)
                for answer in batch_answers(received, micros=int(self.delay * 1e6)):
                    if self.per_input and answer.HasField("chunk"):
                        time.sleep(delay)
                    yield answer
            finally:
                with self.lock:
                    self.running -= 1


class FirstOutcomesHeld(Recording):
    """Holds the outcomes of the first call until another call arrives (0.5 s at most), and
    records whether one did (``early``)."""

    def __init__(self):
        super().__init__(0.0)
        self.calls = 0
        self.arrived = threading.Event()
        self.early = False

    def __call__(self, received, requests, context):
        received.read(requests)
        with self.lock:
            self.calls += 1
            first = self.calls == 1
        if first:
            self.early = self.arrived.wait(0.5)
        else:
            self.arrived.set()
        yield from batch_answers(received)


class DyingSession(Recording):
    """Like :class:`Recording`, but the first session's container dies in a call from its 8th on
    (which fails: it ran), the first whose turn comes while another call of that session waits its
    turn behind it; that call is then refused before it starts (NOT_FOUND), as the router refuses
    a call of a session whose container is gone.

    The victim is chosen by what waits, not by its turn alone: this stand-in's threads can take a
    session's two calls that arrived together in either order (the router takes them in order),
    and then the slot, waiting for the older one to end before it sends the next, has nothing
    waiting behind the 8th turn."""

    #: How long a call that could die waits for another call of its session to wait behind it.
    VICTIM_WAIT = 1.0

    def __init__(self):
        super().__init__(delay=0.03)
        self.first = None
        self.first_turns = 0
        self.died = False
        self.failed = []
        # Calls of each session not done (running, or waiting their turn), and of those the ones
        # still waiting their turn; told when either changes.
        self.arrived = {}
        self.waiting = {}
        self.arrival = threading.Condition(self.lock)

    def __call__(self, received, requests, context):
        received.read(requests)
        session = received.config.session_id
        with self.lock:
            if self.first is None:
                self.first = session
            turn = self.turns.setdefault(session, threading.Lock())
            self.arrived[session] = self.arrived.get(session, 0) + 1
            self.waiting[session] = self.waiting.get(session, 0) + 1
            self.arrival.notify_all()
        try:
            yield from self._in_turn(turn, session, received, context)
        finally:
            with self.lock:
                self.arrived[session] -= 1
                self.arrival.notify_all()

    def settled(self):
        """Waits (at most 5 s) until no call of the first session is still being handled: the map
        can end (its inputs run again in a new session) while the call that waited its turn
        behind the dying one is still being refused here."""
        with self.arrival:
            self.arrival.wait_for(lambda: self.arrived.get(self.first, 0) == 0, timeout=5)

    def _in_turn(self, turn, session, received, context):
        with turn:
            with self.arrival:
                self.waiting[session] -= 1
                self.arrival.notify_all()
                first = session == self.first
                if first:
                    self.first_turns += 1
                gone = first and self.died
                # From the 8th turn on, a call dies once another call of its session waits its
                # turn behind it (the slot's next batch, sent while this one runs): at most
                # VICTIM_WAIT, else it runs and a later one dies. Waiting, not arrived: the call
                # before it, its turn over, can still be finishing here.
                dies = (
                    first
                    and not self.died
                    and self.first_turns >= 8
                    and self.arrival.wait_for(lambda: self.waiting[session] >= 1, timeout=self.VICTIM_WAIT)
                )
                if dies:
                    self.died = True
                    self.failed.append("died")
                elif gone:
                    self.failed.append("gone")
                else:
                    self.sessions.append(session)
            if dies:
                context.abort(grpc.StatusCode.UNAVAILABLE, "the session's container died during the call")
            if gone:
                context.set_trailing_metadata((("readie-not-started", "1"),))
                context.abort(grpc.StatusCode.NOT_FOUND, "the session has expired")
            time.sleep(self.delay)
            yield from batch_answers(received, micros=int(self.delay * 1e6))


class WarmingUp(Recording):
    """Like :class:`Recording`, but a session's first input takes 2 ms (a function's first call in
    a new container, warming up), every other 10 us."""

    def __init__(self):
        super().__init__(delay=0.0)
        self.seen = set()

    def __call__(self, received, requests, context):
        received.read(requests)
        session = received.config.session_id
        with self.lock:
            fresh = session not in self.seen
            self.seen.add(session)
            self.sessions.append(session)
        parts = batch_parts(received.payload)
        fn = cloudpickle.loads(parts[0])
        for index, part in enumerate(parts[1:]):
            args, kwargs = cloudpickle.loads(part)
            envelope, _ = envelope_of(fn, args, kwargs)
            micros = 2000 if fresh and index == 0 else 10
            record = outcome_record(index, envelope["ok"], cloudpickle.dumps(envelope), micros)
            yield proxy_pb2.RequestExecutionResponse(ids=received.ids(), chunk=call_pb2.PayloadChunk(data=record))


class MapRoomTest(ProxyCase):
    """How much a map uses of what the router says (``TenantService.Slots``, scripted here: the
    scripted server has no TenantService)."""

    def setUp(self):
        super().setUp()
        self.saved = (
            _map_options.map_room,
            _map_engine.map_room_async,
            _map_engine.ROOM_REFRESH,
            _map_engine.ROOM_REFRESH_WANTING,
        )
        _map_engine.ROOM_REFRESH = _map_engine.ROOM_REFRESH_WANTING = 0.01

    def tearDown(self):
        (
            _map_options.map_room,
            _map_engine.map_room_async,
            _map_engine.ROOM_REFRESH,
            _map_engine.ROOM_REFRESH_WANTING,
        ) = self.saved
        super().tearDown()

    def room(self, first, later=None):
        _map_options.map_room = lambda settings, demand: first

        async def refreshed(settings, demand):
            return later or first

        _map_engine.map_room_async = refreshed

    def test_sessions_stay_within_the_free_slots_even_when_the_router_queues(self):
        # Asked again, the router counts the map's own containers as held: none is free.
        self.room(Room(slots=2, queued=2000), Room(slots=0, queued=2000))
        script = self.proxy.script = Recording()
        self.assertEqual(list(double.map(range(30), chunk_size=1, progress=False)), [2 * x for x in range(30)])
        self.assertEqual(script.most_running, 2)
        # Each slot keeps its session (its container) from batch to batch.
        self.assertEqual(len(set(script.sessions)), 2)

    def test_a_slot_sends_its_next_batch_while_one_runs(self):
        # The next batch waits for its session's turn where it is (the router), not a round trip
        # away in the client: the container starts it the moment the one before ends.
        self.room(Room(slots=1), Room(slots=0))
        script = self.proxy.script = Recording(delay=0.05)
        self.assertEqual(list(double.map(range(12), chunk_size=1, progress=False)), [2 * x for x in range(12)])
        self.assertEqual(len(set(script.sessions)), 1)
        self.assertEqual(script.most_running, 1)
        # Once four inputs were measured (the map then knows how many slots its work wants),
        # every batch after the next can arrive while the one before it runs: 7 of the 12 (0
        # without; a loaded machine may send one late, so at least 3 are asked).
        self.assertGreaterEqual(script.overlapped, 3)

    def test_a_later_maps_slot_sends_its_next_batch_once_the_map_measured_its_first_inputs(self):
        # A later map's first batches hold 4 inputs (its earlier times are no promise): about 200
        # ms here. Once 4 of its inputs were measured (each slot's first one, about 50 ms in),
        # every slot's next batch (the rest of its share) goes while its first runs, where none
        # did when a slot waited for its first batch to end (a loaded machine may send one late:
        # 2 are asked). Asked again (a loaded machine may run the map past ROOM_REFRESH), the
        # router counts the map's own eight containers as held: no slot is free. Inputs of 50 ms,
        # not 20: beside three CPU hogs, 20 ms inputs gave uneven shares 2 runs in 10 (the
        # scheduler's delays then weigh in the running inputs' progress); 50 ms ones gave none in
        # 12, and without that progress the shares are uneven every time.
        self.room(Room(slots=8), Room(slots=0))
        self.proxy.script = Recording(delay=0.05, per_input=True)
        list(double.map(range(80), progress=False))
        script = self.proxy.script = Recording(delay=0.05, per_input=True)
        self.assertEqual(list(double.map(range(80), progress=False)), [2 * x for x in range(80)])
        self.assertEqual(script.inputs[:8], [4] * 8)
        # The same share for every slot (10): what a slot's first batch ran so far counts, so a
        # slot whose input ended a moment before it took its next batch takes no more.
        inputs = collections.Counter()
        for session, count in zip(script.sessions, script.inputs):
            inputs[session] += count
        self.assertEqual(len(set(inputs.values())), 1, inputs)
        self.assertGreaterEqual(script.overlapped, 2)

    def test_both_batches_of_a_slot_failing_on_its_dead_session_move_it_to_one_new_session(self):
        self.room(Room(slots=1), Room(slots=0))
        script = self.proxy.script = DyingSession()
        got = list(double.map(range(13), chunk_size=1, retries=1, progress=False))
        self.assertEqual(got, [2 * x for x in range(13)])
        script.settled()
        # Both batches under way met the dead session (one at a time would prove nothing).
        self.assertEqual(script.failed, ["died", "gone"])
        # Each moved the slot on only if it was still on the session that failed: one new session
        # (renewing twice would leave the two batches run again in two sessions, two containers).
        self.assertEqual(len(set(script.sessions)), 2, script.sessions)

    def test_no_next_batch_waits_while_other_tenants_calls_do(self):
        # Other tenants' calls waiting: each batch gives its container back, and none waits.
        self.room(Room(slots=1, others_waiting=True), Room(slots=0, others_waiting=True))
        script = self.proxy.script = Recording(delay=0.02)
        self.assertEqual(list(double.map(range(8), chunk_size=1, progress=False)), [2 * x for x in range(8)])
        self.assertEqual(script.overlapped, 0)

    def test_a_first_call_warming_up_in_each_new_container_opens_no_containers_the_work_does_not_need(self):
        # 2,000 inputs of 10 us are 20 ms of work: the four first slots are plenty. Their first
        # inputs took 2 ms each (4 s of work, by them): slots follow the inputs that ran warm.
        self.room(Room(slots=16))
        script = self.proxy.script = WarmingUp()
        self.assertEqual(list(double.map(range(2000), progress=False)), [2 * x for x in range(2000)])
        self.assertLessEqual(len(set(script.sessions)), 4)

    def test_isolated_inputs_may_fill_the_queue_too(self):
        self.room(Room(slots=2, queued=2000), Room(slots=0, queued=2000))
        script = self.proxy.script = Recording(delay=0.2)
        self.assertEqual(list(double.map(range(12), isolate_inputs=True, progress=False)), [2 * x for x in range(12)])
        self.assertGreater(script.most_running, 2)

    def most_running(self, first, later, delay=0.02):
        """The most calls at once of a map of 40 inputs, one a call, each taking ``delay``, when
        the router answers ``first`` at its start and ``later`` when asked again."""
        self.room(first, later)
        script = self.proxy.script = Recording(delay=delay)
        self.assertEqual(list(double.map(range(40), chunk_size=1, progress=False)), [2 * x for x in range(40)])
        return script.most_running

    def test_room_freed_later_opens_more_slots(self):
        self.assertGreater(self.most_running(Room(slots=1), Room(slots=3)), 1)

    def test_inputs_measured_slow_ask_for_room_at_once(self):
        # The room is asked again ROOM_REFRESH after the map's start while the work wants no more
        # slots than it has; once its first inputs are measured slow, it wants more, and asks then
        # (ROOM_REFRESH_WANTING), not after the long wait it began before it knew.
        _map_engine.ROOM_REFRESH = 60.0
        self.assertGreater(self.most_running(Room(slots=4), Room(slots=8), delay=0.05), 4)

    def test_a_map_starting_from_earlier_times_sends_no_second_batch_before_its_first_outcomes(self):
        # Room for 64 calls: the window of inputs drawn ahead (twice the room times the largest
        # batch) would let the second batch go at once.
        self.room(Room(slots=64))
        list(double.map(range(300), progress=False))
        # The second map knows its inputs' time (a slot's second batch may go while its first
        # runs), but not until its own first outcomes came: the second batch would hold 32 times
        # the first's inputs, and delay its first result.
        script = self.proxy.script = FirstOutcomesHeld()
        self.assertEqual(list(double.map(range(3000), progress=False)), [2 * x for x in range(3000)])
        self.assertGreater(script.calls, 1)
        self.assertFalse(script.early)

    def test_a_later_map_of_slower_inputs_is_not_held_to_the_earlier_maps_times(self):
        self.room(Room(slots=8))
        list(double.map(range(100), progress=False))
        # Inputs of 5 us before, of 100 ms now: the earlier times open one slot and would size its
        # first batch for all 32 inputs (3.2 s in a row). Its first batch holds 4 at most, and once
        # its first outcome came only this map's own times count: more slots open.
        self.proxy.calls.clear()
        script = self.proxy.script = Recording(delay=0.1)
        self.assertEqual(list(double.map(range(32), progress=False)), [2 * x for x in range(32)])
        sizes = [call.config.inputs for call in self.proxy.calls if call.config is not None]
        self.assertLessEqual(sizes[0], 4, sizes)
        self.assertGreater(len(set(script.sessions)), 2, sizes)

    def test_other_tenants_waiting_make_each_batch_give_its_container_back(self):
        # The router says so from the map's start: every batch runs in a session of its own.
        self.room(Room(slots=1, others_waiting=True), Room(slots=0, others_waiting=True))
        script = self.proxy.script = Recording()
        list(double.map(range(20), chunk_size=1, progress=False))
        self.assertEqual(len(set(script.sessions)), 20)

        self.room(Room(slots=1), Room(slots=0, others_waiting=False))
        script = self.proxy.script = Recording()
        list(double.map(range(20), chunk_size=1, progress=False))
        self.assertEqual(len(set(script.sessions)), 1)


class PureTest(unittest.TestCase):
    def test_which_refusals_are_waited_out(self):
        def error(code, not_started):
            return error_for_status(code, "x", trailers={"readie-not-started": "1"} if not_started else {})

        self.assertTrue(waits_for_room(error(grpc.StatusCode.RESOURCE_EXHAUSTED, True)))
        self.assertFalse(waits_for_room(error(grpc.StatusCode.RESOURCE_EXHAUSTED, False)))
        self.assertTrue(waits_for_room(error(grpc.StatusCode.UNAVAILABLE, True)))
        self.assertFalse(waits_for_room(error(grpc.StatusCode.UNAVAILABLE, True), unavailable_retries=20))
        self.assertFalse(waits_for_room(error(grpc.StatusCode.PERMISSION_DENIED, True)))
        self.assertFalse(waits_for_room(ValueError("not readie")))

    def test_a_call_that_never_fits_is_final(self):
        never = error_for_status(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "no worker can ever accept this request: the largest worker offers 10.80GiB of memory; ...",
            trailers={"readie-not-started": "1", "readie-never-fits": "1"},
        )
        self.assertIsInstance(never, readie.NeverFitsError)
        self.assertIsInstance(never, readie.ResourceExhaustedError)
        self.assertTrue(never.not_started)
        self.assertFalse(waits_for_room(never))
        self.assertFalse(may_retry_ran(never))
        self.assertIn("the client does not retry it", str(never))

    def test_a_call_that_waited_queue_timeout_is_final(self):
        waited = error_for_status(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "queued for 10m: no worker can accept this request (...) (QUEUE_TIMEOUT)",
            trailers={"readie-not-started": "1", "readie-queued": "1"},
        )
        self.assertTrue(waited.not_started)
        self.assertTrue(waited.queue_timed_out)
        self.assertFalse(waits_for_room(waited))
        # A router that does not queue refuses "no room" at once: waited out and retried.
        refused = error_for_status(
            grpc.StatusCode.RESOURCE_EXHAUSTED, "no worker can accept this request (...)", trailers={"readie-not-started": "1"}
        )
        self.assertFalse(refused.queue_timed_out)
        self.assertTrue(waits_for_room(refused))

    def test_backoff_grows_to_its_cap_and_honours_a_longer_hint(self):
        rng = random.Random(1)
        waits = [backoff(attempt, rng=rng) for attempt in range(12)]
        self.assertTrue(0.025 <= waits[0] <= 0.05)
        self.assertTrue(all(wait <= MAX_BACKOFF for wait in waits))
        self.assertGreater(waits[8], waits[0])
        self.assertEqual(backoff(0, hint=5.0, rng=rng), 5.0)

    def test_a_shed_is_waited_out_for_at_least_its_hint(self):
        shed = error_for_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "shed", retry_after=2.0)
        self.assertIsInstance(shed, readie.ShedError)
        self.assertTrue(waits_for_room(shed))
        self.assertGreaterEqual(backoff(0, hint=shed.retry_after), 2.0)
        self.assertIsNone(error_for_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "x").retry_after)

    def test_progress_line(self):
        self.assertEqual(render("readie map f", 37, 100, 2, 10.0), "readie map f 37/100 [########................] 3.7/s 2 errors 0:10")
        self.assertEqual(render("m", 5, None, 1, 65.0), "m 5 0.1/s 1 error 1:05")
        self.assertEqual(render("m", 5, None, 1, 65.0, queued=3), "m 5 0.1/s 1 error 3 queued 1:05")
        with open("/dev/null", "w") as sink:
            self.assertFalse(wants_progress(None, stream=sink))
        self.assertTrue(wants_progress(True))


if __name__ == "__main__":
    unittest.main()
