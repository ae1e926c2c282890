"""Latency of trivial calls through the whole path (client, nginx, router, worker), for
`npm run bench -- e2e`. Prints one JSON object: for each mode, every call's latency in ms.

Modes: warm (a session's container), checkpoint (a new container restored from a checkpoint),
cold (disable_optimized_execution: a new container started cold), and echo: a bare gRPC stream
through the same hops to a scripted echo worker, with no Python on the far side (the baseline).
"""
import json
import os
import sys
import time
import uuid

import grpc

import readie
from readie import _connection
from readie._proto import call_pb2, proxy_pb2


def trivial():
    return 1


warm_call = readie.remote(trivial)
checkpoint_call = readie.remote(trivial)
cold_call = readie.remote(disable_optimized_execution=True)(trivial)


def timed(fn, count):
    out = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def echo_stream():
    settings = _connection.current_settings()
    channel = _connection.channel_for(settings)
    rpc = channel.stream_stream(
        "/readie.v1.ProxyService/RequestExecution",
        request_serializer=proxy_pb2.RequestExecutionRequest.SerializeToString,
        response_deserializer=proxy_pb2.RequestExecutionResponse.FromString,
    )
    payload = b"echo\n" + b"x" * 64

    def once():
        config = proxy_pb2.CallConfig(
            request_id="req-" + uuid.uuid4().hex,
            gpu=True,
            format=call_pb2.PAYLOAD_FORMAT_CLOUDPICKLE,
        )
        messages = iter(
            [
                proxy_pb2.RequestExecutionRequest(config=config),
                proxy_pb2.RequestExecutionRequest(chunk=call_pb2.PayloadChunk(data=payload)),
            ]
        )
        got = b"".join(answer.chunk.data for answer in rpc(messages, metadata=settings.metadata()))
        if got != payload:
            raise SystemExit(f"echo answered {got[:20]!r}")

    return once


def main():
    counts = json.loads(sys.argv[1])
    results = {}
    echo = echo_stream()
    for fn in (echo, checkpoint_call, cold_call):  # warm-up: connections, code paths
        fn()
    results["echo"] = timed(echo, counts["echo"])
    with readie.Session():
        warm_call()
        results["warm"] = timed(warm_call, counts["warm"])
    results["checkpoint"] = timed(checkpoint_call, counts["checkpoint"])
    results["cold"] = timed(cold_call, counts["cold"])
    results["checkpointUsed"] = checkpoint_call.last_call.checkpoint_id
    results["coldCheckpoint"] = cold_call.last_call.checkpoint_id
    print(json.dumps(results))


if __name__ == "__main__":
    main()
