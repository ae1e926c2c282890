"""Fan-out scenarios (fn.map, fn.starmap, fn.spawn) run by test/e2e/fanout.test.ts against a real
cluster. Usage: /usr/bin/python3 fanout.py SCENARIO [ARG...]; prints one JSON object on stdout
(the last line)."""
import asyncio
import json
import sys
import threading
import time

import readie


@readie.remote(memory="256MiB", stream_logs=False)
def square(x):
    return x * x


@readie.remote(memory="256MiB", stream_logs=False)
def where(x):
    # A token per container: module-level state of the container's Python, set by its first call.
    import uuid

    token = globals().setdefault("container_token", uuid.uuid4().hex)
    return [x, token]


@readie.remote(memory="256MiB", stream_logs=False)
def fails_at(x, bad):
    if x == bad:
        raise ValueError(f"input {x} is bad")
    return x


@readie.remote(memory="256MiB", stream_logs=False)
def nap(seconds):
    import time as remote_time

    remote_time.sleep(seconds)
    return seconds


def ordered(count):
    results = list(square.map(range(count), progress=False))
    return {"ok": results == [x * x for x in range(count)], "count": len(results)}


def crowded(count, seconds):
    # Two maps at once, each sized to every free slot: together they ask for twice the room.
    outcomes = {}

    def one(name):
        started = time.monotonic()
        results = list(nap.map([seconds] * count, return_exceptions=True, progress=False))
        errors = [repr(r) for r in results if isinstance(r, BaseException)]
        outcomes[name] = {"count": len(results), "errors": errors, "seconds": time.monotonic() - started}

    threads = [threading.Thread(target=one, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def exceptions(count, bad):
    kept = list(fails_at.map(range(count), kwargs={"bad": bad}, return_exceptions=True, progress=False))
    failed = [(i, type(r).__name__, r.input_index, r.remote_type) for i, r in enumerate(kept) if isinstance(r, BaseException)]
    try:
        list(fails_at.map(range(count), kwargs={"bad": bad}, progress=False))
        raised = None
    except readie.RemoteExecutionError as error:
        raised = {"index": error.input_index, "message": str(error).splitlines()[0]}
    return {"values": [r if not isinstance(r, BaseException) else None for r in kept], "failed": failed, "raised": raised}


def lazy(take, concurrency):
    drawn = []

    def inputs():
        for x in range(1_000_000):
            drawn.append(x)
            yield x

    results = []
    mapped = square.map(inputs(), max_concurrency=concurrency, progress=False)
    for result in mapped:
        results.append(result)
        if len(results) == take:
            break
    mapped.close()
    return {"results": results, "drawn": len(drawn)}


def reuse(count, concurrency):
    first = list(where.map(range(count), max_concurrency=concurrency, progress=False))
    second = list(where.map(range(count), max_concurrency=concurrency, progress=False))
    isolated = list(where.map(range(10), max_concurrency=concurrency, isolate_inputs=True, progress=False))
    tokens = lambda rows: sorted({row[1] for row in rows})  # noqa: E731
    return {
        "inOrder": [row[0] for row in first] == list(range(count)),
        "first": tokens(first),
        "second": tokens(second),
        "isolated": tokens(isolated),
    }


def spawned():
    quick = square.spawn(7)
    slow = nap.spawn(60)
    time.sleep(1.0)
    cancelled = slow.cancel()
    try:
        slow.get(timeout=30)
        after = "returned"
    except readie.CallCancelledError:
        after = "CallCancelledError"
    try:
        nap.spawn(5).get(timeout=0.2)
        timeout = "returned"
    except TimeoutError:
        timeout = "TimeoutError"
    many = readie.gather(*[square.spawn(x) for x in range(20)])
    return {"quick": quick.get(), "quickDone": quick.done(), "cancelled": cancelled, "afterCancel": after,
            "slowDone": slow.done(), "timeout": timeout, "gathered": many}


def room_for(fn, calls, within=60.0):
    """Waits until ``calls`` calls of ``fn`` fit now, as a map starting sees the room (it opens no
    more calls than that, for its whole run): an earlier test's containers may still be going."""
    from readie._connection import current_settings
    from readie._tenant import map_room

    deadline = time.monotonic() + within
    while map_room(current_settings(), fn.options.demand).slots < calls:
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for room for {calls} calls")
        time.sleep(0.1)


def say_when_back_in_the_map():
    """Prints "back in the map" once the main thread runs inside the blocking map again (waiting
    for its next result), not in this script's loop body: a Ctrl-C raised in the loop body is the
    caller's bare KeyboardInterrupt, one raised inside the map is the map's to word. A thread
    watches, since the main thread is the one that waits."""
    main = threading.main_thread().ident

    def inside():
        frame = sys._current_frames().get(main)
        while frame is not None:
            if frame.f_code.co_name == "run_map":
                return True
            frame = frame.f_back
        return False

    def watch():
        while not inside():
            time.sleep(0.005)
        print("back in the map", flush=True)

    threading.Thread(target=watch, daemon=True).start()


def interrupted(count, seconds, concurrency, chunk=None):
    room_for(nap, concurrency)
    print("mapping", flush=True)
    try:
        for index, _ in enumerate(nap.map([seconds] * count, max_concurrency=concurrency, chunk_size=chunk, progress=False)):
            if index == 0:
                print("first result", flush=True)
                say_when_back_in_the_map()
        return {"interrupted": False}
    except KeyboardInterrupt as error:
        return {"interrupted": True, "message": str(error)}


@readie.remote(memory="256MiB", stream_logs=False)
def hog_at(x, bad):
    if x == bad:
        blocks = []
        while True:
            blocks.append(b"x" * (16 * 1024 * 1024))
    return x


def many(count, bad):
    started = time.monotonic()
    results = list(fails_at.map(range(count), kwargs={"bad": bad}, return_exceptions=True, progress=False))
    seconds = time.monotonic() - started
    failed = [(i, type(r).__name__, r.input_index, r.remote_type) for i, r in enumerate(results) if isinstance(r, BaseException)]
    intact = all(r == i for i, r in enumerate(results) if i != bad)
    return {"count": len(results), "failed": failed, "intact": intact, "seconds": round(seconds, 1)}


def oom(count, bad, chunk):
    results = list(hog_at.map(range(count), kwargs={"bad": bad}, chunk_size=chunk, max_concurrency=1, return_exceptions=True, progress=False))
    failed = [(i, type(r).__name__, r.input_index) for i, r in enumerate(results) if isinstance(r, BaseException)]
    values = [r if not isinstance(r, BaseException) else None for r in results]
    return {"failed": failed, "values": values}


def asynchronous(count):
    async def main():
        results = [r async for r in square.map.aio(range(count), progress=False)]
        unordered = sorted([r async for r in square.map.aio(range(count), order_outputs=False, progress=False)])
        return results, unordered

    results, unordered = asyncio.run(main())
    expected = [x * x for x in range(count)]
    return {"ordered": results == expected, "unordered": unordered == sorted(expected)}


def closed_session():
    with readie.Session() as session:
        first = where(1)[1]
        second = where(2)[1]
    try:
        with readie.Session(session.id):
            where(3)
        after = "ran"
    except readie.SessionExpiredError:
        after = "SessionExpiredError"
    return {"same": first == second, "after": after, "session": session.id}


SCENARIOS = {
    "ordered": lambda args: ordered(int(args[0])),
    "crowded": lambda args: crowded(int(args[0]), float(args[1])),
    "exceptions": lambda args: exceptions(int(args[0]), int(args[1])),
    "lazy": lambda args: lazy(int(args[0]), int(args[1])),
    "reuse": lambda args: reuse(int(args[0]), int(args[1])),
    "spawn": lambda args: spawned(),
    "interrupted": lambda args: interrupted(int(args[0]), float(args[1]), int(args[2]), int(args[3]) if len(args) > 3 else None),
    "many": lambda args: many(int(args[0]), int(args[1])),
    "oom": lambda args: oom(int(args[0]), int(args[1]), int(args[2])),
    "aio": lambda args: asynchronous(int(args[0])),
    "session": lambda args: closed_session(),
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]](sys.argv[2:])))
