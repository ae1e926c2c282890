"""A tenant's screening client: judges texts on the version its tenant pinned.

    READIE_ADDRESS=... READIE_AUTH_TOKEN=<the tenant's token> \
        /usr/bin/python3 examples/screening/judge.py "some text" "more text" [--parallel 4]

Prints one JSON line per text: the verdict, the version that judged it (as the model itself
says, and as readie's answer names it: `served_version`, `routing_revision`), and, for a call
that was shed while its version loaded and retried, the request it retried (`retry_of`).
"""

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import readie


@readie.remote(pinned=True, stream_logs=False, memory="256MiB", shed_retries=10, timeout=120)
def judge(text):
    import readie_checkpoint  # what the version's setup loaded: its weights and its judge()

    return readie_checkpoint.judge(text)


def judged(text):
    try:
        verdict = judge(text)
    except readie.ReadieError as error:
        info = error.call
        return {
            "text": text,
            "error": type(error).__name__,
            "code": error.code.name if error.code else None,
            "details": error.details,
            "served_version": info.served_version if info else "",
            "request_id": info.request_id if info else "",
        }
    info = readie.last_call()  # this thread's call (judge.last_call is shared by the threads)
    return {
        "text": text,
        **verdict,
        "served_version": info.served_version,
        "routing_revision": info.routing_revision,
        "request_id": info.request_id,
        "retry_of": info.retry_of,
        "worker_id": info.worker_id,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("texts", nargs="+")
    parser.add_argument("--parallel", type=int, default=1)
    args = parser.parse_args()
    # Calls run in threads; each reads its own readie.last_call().
    with ThreadPoolExecutor(max_workers=args.parallel) as pool:
        for line in pool.map(judged, args.texts):
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
