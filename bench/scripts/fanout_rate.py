"""Measures fan-out for `npm run bench -- fanout`: trivial calls through fn.map, one at a time on
one warm session, and as an asyncio fan-out of independent calls with 4 in flight, in rounds that
alternate the three. Usage: fanout_rate.py '{"calls": 2000, "rounds": 2}'; prints one JSON object."""
import asyncio
import json
import sys
import time

import readie


@readie.remote(memory="256MiB", stream_logs=False)
def trivial(x):
    return x


def through_map(count):
    started = time.perf_counter()
    results = list(trivial.map(range(count), return_exceptions=True, progress=False))
    seconds = time.perf_counter() - started
    failed = sum(1 for r in results if isinstance(r, BaseException))
    wrong = sum(1 for i, r in enumerate(results) if not isinstance(r, BaseException) and r != i)
    return seconds, failed + wrong


def warm_up():
    # Right after a map the workers may still be giving its containers back: wait for room.
    for _ in range(100):
        try:
            return trivial(-1)
        except readie.ResourceExhaustedError as error:
            if not error.not_started:
                raise
            time.sleep(0.1)
    raise RuntimeError("no room for the warm-up call after 10 s")


def one_session(count):
    failed = 0
    with readie.Session():
        warm_up()  # the session's container exists before the clock starts
        started = time.perf_counter()
        for x in range(count):
            try:
                if trivial(x) != x:
                    failed += 1
            except readie.ReadieError:
                failed += 1
        seconds = time.perf_counter() - started
    return seconds, failed


def independent(count, in_flight=4):
    async def main():
        gate = asyncio.Semaphore(in_flight)
        failures = 0

        async def one(x):
            nonlocal failures
            async with gate:
                try:
                    if await trivial.aio(x) != x:
                        failures += 1
                except readie.ReadieError:
                    failures += 1

        started = time.perf_counter()
        await asyncio.gather(*(one(x) for x in range(count)))
        return time.perf_counter() - started, failures

    return asyncio.run(main())


def main():
    plan = json.loads(sys.argv[1])
    per_round = plan["calls"] // plan["rounds"]
    modes = {"map": through_map, "session": one_session, "independent": independent}
    totals = {name: {"calls": 0, "seconds": 0.0, "failed": 0, "rounds": []} for name in modes}
    trivial(0)  # the first call pays for channel setup
    for _ in range(plan["rounds"]):
        for name, measure in modes.items():
            seconds, failed = measure(per_round)
            total = totals[name]
            total["calls"] += per_round
            total["seconds"] += seconds
            total["failed"] += failed
            total["rounds"].append(round(per_round / seconds, 1))
            print(f"{name}: {per_round} calls in {seconds:.2f} s", file=sys.stderr, flush=True)
    print(json.dumps(totals))


if __name__ == "__main__":
    main()
