"""Latency of trivial calls through the whole path (client, nginx, router, worker), for
`npm run bench -- e2e`. Prints one JSON object: for each mode, every call's latency in ms, and
what the calls of each mode ran on (containers, checkpoints), having checked that each mode ran as
it claims: checkpoint calls each restored a checkpoint into a new container, cold calls never named
a checkpoint, warm calls all shared the session's one container.

Modes: warm (a session's container), checkpoint (a new container restored from a checkpoint),
cold (disable_optimized_execution: a new container started cold), and echo: a bare gRPC stream
through the same hops to a scripted echo worker, with no Python on the far side (the baseline).
"""
import json
import sys
import time
import uuid

import readie
from readie import _call, _connection, _wire
from readie._proto import call_pb2, proxy_pb2


def trivial():
    return 1


warm_call = readie.remote(trivial)
checkpoint_call = readie.remote(trivial)
cold_call = readie.remote(disable_optimized_execution=True)(trivial)


def timed(fn, count, ran_on=None):
    """Latencies of ``count`` calls of ``fn``; each call's (container, checkpoint) into ``ran_on``."""
    out = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
        if ran_on is not None:
            ran_on.append((fn.last_call.container_id, fn.last_call.checkpoint_id))
    return out


def echo_stream():
    settings = _connection.current_settings()
    rpc = _call._rpc(_connection.channel_for(settings))
    payload = b"echo\n" + b"x" * 64

    def once():
        config = proxy_pb2.CallConfig(
            request_id="req-" + uuid.uuid4().hex,
            gpu=True,
            format=call_pb2.PAYLOAD_FORMAT_CLOUDPICKLE,
        )
        answers = rpc(_wire.request_messages(config, payload), metadata=settings.metadata())
        got = b"".join(answer.chunk.data for answer in answers)
        if got != payload:
            raise SystemExit(f"echo answered {got[:20]!r}")

    return once


def check_modes(ran_on):
    """Fails unless each mode ran as it claims; returns what each ran on, as counts."""
    problems = []
    checkpoint, cold, warm = ran_on["checkpoint"], ran_on["cold"], ran_on["warm"]
    if any(not ckpt for _, ckpt in checkpoint):
        problems.append("a checkpoint-mode call named no checkpoint")
    if len({container for container, _ in checkpoint}) != len(checkpoint):
        problems.append("checkpoint-mode calls shared a container")
    if any(ckpt for _, ckpt in cold):
        problems.append("a cold call named a checkpoint")
    if len({container for container, _ in warm}) != 1:
        problems.append("warm calls ran in more than one container")
    if problems:
        raise SystemExit("; ".join(problems) + ": " + json.dumps(ran_on))
    return {
        mode: {
            "calls": len(calls),
            "containers": len({container for container, _ in calls}),
            "checkpoints": sorted({ckpt for _, ckpt in calls if ckpt}),
        }
        for mode, calls in ran_on.items()
    }


def main():
    counts = json.loads(sys.argv[1])
    results = {}
    ran_on = {"warm": [], "checkpoint": [], "cold": []}
    echo = echo_stream()
    for fn in (echo, checkpoint_call, cold_call):  # warm-up: connections, code paths
        fn()
    results["echo"] = timed(echo, counts["echo"])
    with readie.Session():
        warm_call()
        results["warm"] = timed(warm_call, counts["warm"], ran_on["warm"])
    results["checkpoint"] = timed(checkpoint_call, counts["checkpoint"], ran_on["checkpoint"])
    results["cold"] = timed(cold_call, counts["cold"], ran_on["cold"])
    results["ranOn"] = check_modes(ran_on)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
