#!/usr/bin/env bash
# Regenerates python/readie/_proto/*_pb2.py from proto/readie/v1 (the client needs call, proxy,
# tenant, history and images).
# Use Debian's protoc 3.21 (`apt-get install protobuf-compiler`): its output matches the
# python3-protobuf 3.21 runtime. Run it as `npm run proto:python`; CI checks the result is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=readie/_proto
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

protoc -I ../proto --python_out="$work" ../proto/readie/v1/call.proto ../proto/readie/v1/proxy.proto \
  ../proto/readie/v1/tenant.proto ../proto/readie/v1/history.proto ../proto/readie/v1/images.proto
for file in "$work"/readie/v1/*_pb2.py; do
  # protoc writes `from readie.v1 import call_pb2`, which would resolve against this package's own
  # name (readie); the modules live flat in readie._proto, and their classes say so.
  sed -e 's/^from readie\.v1 import /from readie._proto import /' \
    -e "s/'readie\.v1\.\([a-z_]*_pb2\)'/'readie._proto.\1'/" \
    "$file" >"$out/$(basename "$file")"
done
