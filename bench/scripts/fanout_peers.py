"""Measures readie's map beside Python's own pools and dask.distributed for
`npm run bench -- fanout-peers`, on three workloads: trivial inputs (x * 2), small numpy inputs,
and inputs that sleep. Each round runs every contender on every workload, in turn (this machine's
speed drifts: alternating keeps the ratios honest). Usage: fanout_peers.py PLAN_JSON.

Around each readie phase it writes `MARK name` on stdout and waits for a line on stdin, so the
benchmark can read the router's and the workers' CPU there; the last line of stdout is one JSON
object with every figure.
"""

import json
import multiprocessing
import os
import resource
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

import readie

PLAN = json.loads(sys.argv[1])
SLEEP = PLAN["sleepSeconds"]


def double(x):
    return x * 2


def norm(a):
    return float(np.sqrt(a).sum())


def nap(x):
    time.sleep(SLEEP)
    return x


def numpy_inputs(count):
    return [np.full(64, float(i)) for i in range(count)]


WORKLOADS = {
    "trivial": (double, lambda n: list(range(n)), lambda inputs: [x * 2 for x in inputs]),
    "numpy": (norm, numpy_inputs, lambda inputs: [norm(a) for a in inputs]),
    "sleep": (nap, lambda n: list(range(n)), lambda inputs: list(inputs)),
}


def remote_of(fn, **options):
    return readie.remote(memory="256MiB", stream_logs=False, **options)(fn)


def mark(name):
    """Lets the benchmark read the cluster's CPU here."""
    sys.stdout.write(f"MARK {name}\n")
    sys.stdout.flush()
    sys.stdin.readline()


def own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_readie(fn, inputs, expected, phase):
    """One readie map: seconds, time to the first result, wrong results, client CPU seconds."""
    mark(f"{phase}:start")
    cpu = own_cpu()
    started = time.perf_counter()
    first = None
    results = []
    for result in fn.map(inputs, return_exceptions=True, progress=False):
        if first is None:
            first = time.perf_counter() - started
        results.append(result)
    seconds = time.perf_counter() - started
    client_cpu = own_cpu() - cpu
    mark(f"{phase}:end")
    wrong = sum(1 for got, want in zip(results, expected) if got != want) + abs(len(results) - len(expected))
    return {"seconds": seconds, "first": first, "wrong": wrong, "clientCpu": client_cpu}


def timed(run, inputs, expected):
    started = time.perf_counter()
    results = list(run(inputs))
    seconds = time.perf_counter() - started
    wrong = sum(1 for got, want in zip(results, expected) if got != want) + abs(len(results) - len(expected))
    return {"seconds": seconds, "wrong": wrong}


def with_dask(threads):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=threads, processes=True, dashboard_address=None, silence_logs=50
    )
    return cluster, Client(cluster)


def plain_vs_session(fn, count):
    """p50 of one call at a time outside any session (a fresh container each) and in one session."""
    plain, session = [], []
    for x in range(count):
        started = time.perf_counter()
        fn(x)
        plain.append(time.perf_counter() - started)
    with readie.Session():
        fn(-1)  # the session's container exists before the clock starts
        for x in range(count):
            started = time.perf_counter()
            fn(x)
            session.append(time.perf_counter() - started)
    return plain, session


def main():
    warnings.simplefilter("ignore")
    rounds = PLAN["rounds"]
    sizes = {"trivial": PLAN["trivial"], "numpy": PLAN["numpy"], "sleep": PLAN["sleep"]}
    results = {}  # workload -> contender -> list of rounds

    def record(workload, contender, figure):
        results.setdefault(workload, {}).setdefault(contender, []).append(figure)

    prepared = {}
    for workload, (fn, make, expect) in WORKLOADS.items():
        inputs = make(sizes[workload])
        prepared[workload] = (fn, inputs, expect(inputs))

    remote = {name: remote_of(fn) for name, (fn, _, _) in WORKLOADS.items()}
    try:
        parallel = remote_of(nap, max_inputs=8)
    except TypeError:
        parallel = None  # a client without max_inputs
    # Warm the channel and one container of each kind before any clock starts.
    remote["trivial"](0)
    remote["numpy"](np.zeros(4))

    cpus = os.cpu_count() or 2
    pools = {
        "cpu": (multiprocessing.Pool(cpus), ProcessPoolExecutor(cpus)),
        "sleep": (multiprocessing.Pool(PLAN["slots"]), ProcessPoolExecutor(PLAN["slots"])),
    }
    for pool, executor in pools.values():
        pool.map(double, range(100))
        list(executor.map(double, range(100)))
    dask = {"cpu": with_dask(1), "sleep": with_dask(max(1, PLAN["slots"] // 2))}
    for _, client in dask.values():
        client.gather(client.map(double, range(10)))
    # As the pools' 16 processes are started before the clock, readie's workers see the demand
    # for 16 containers once first (they keep standbys for the demand they saw), and each
    # sleeping function is mapped once (a later map starts from the inputs' times the last one
    # measured): one map of each, measured apart (the first on a new cluster, and the first of
    # max_inputs=8).
    _, sleep_inputs, sleep_expected = prepared["sleep"]
    first_sleep = timed_readie(remote["sleep"], sleep_inputs, sleep_expected, "readie-sleep-first")
    first_sleep8 = None
    if parallel is not None:
        first_sleep8 = timed_readie(parallel, sleep_inputs, sleep_expected, "readie-sleep8-first")

    plain_times, session_times = [], []
    for round_number in range(rounds):
        for workload, (fn, inputs, expected) in prepared.items():
            kind = "sleep" if workload == "sleep" else "cpu"
            pool, executor = pools[kind]
            _, client = dask[kind]
            # Contenders in turn, readie's maps apart (as maps of a program usually are): a map's
            # containers are refilled as standbys between them, not in the next map's time.
            record(workload, "poolMap", timed(lambda xs: pool.map(fn, xs), inputs, expected))
            record(workload, "processPoolDefault", timed(lambda xs: executor.map(fn, xs), inputs, expected))
            record(workload, "readie", timed_readie(remote[workload], inputs, expected, f"readie-{workload}"))
            record(
                workload,
                "processPoolChunk100",
                timed(lambda xs: executor.map(fn, xs, chunksize=100), inputs, expected),
            )
            record(
                workload,
                "dask",
                timed(lambda xs: client.gather(client.map(fn, xs, pure=False)), inputs, expected),
            )
            if workload == "sleep" and parallel is not None:
                record(workload, "readieMaxInputs8", timed_readie(parallel, inputs, expected, "readie-sleep8"))
            print(f"round {round_number + 1}: {workload} done", file=sys.stderr, flush=True)
        plain, session = plain_vs_session(remote["trivial"], PLAN["plainCalls"])
        plain_times += plain
        session_times += session

    for pool, executor in pools.values():
        pool.terminate()
        executor.shutdown()
    for cluster, client in dask.values():
        client.close()
        cluster.close()

    summary = {"sizes": sizes, "rounds": results, "firstSleepMap": first_sleep, "firstSleepMapMaxInputs8": first_sleep8}
    summary["plainP50Ms"] = statistics.median(plain_times) * 1000
    summary["sessionP50Ms"] = statistics.median(session_times) * 1000
    summary["plainCalls"] = len(plain_times)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
