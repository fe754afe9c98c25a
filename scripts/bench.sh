#!/usr/bin/env bash
# Load test of `prestop-injector serve` on one core (see docs/BENCHMARKS.md).
#
# Builds the release binary, starts it pinned to CPU $SERVER_CPU with --dev, and loads it
# from CPU $CLIENT_CPU with wrk (HTTP/1.1 keep-alive over TLS, the API server's path)
# and h2load (HTTP/2). Traffic stays on 127.0.0.1; every run is bounded by $DURATION.
# Needs: wrk, h2load (Debian: wrk, nghttp2-client), curl, taskset.
set -euo pipefail
cd "$(dirname "$0")/.."

SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-16}
PORT=${PORT:-18443}
PROBE_PORT=${PROBE_PORT:-18080}
BODY=${BODY:-examples/review-job-worker.json}
BIN=${BIN:-target/release/prestop-injector}
URL="https://127.0.0.1:$PORT/mutate?timeout=10s"
WORK=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$WORK"' EXIT

for tool in wrk h2load curl taskset; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is not installed" >&2; exit 1; }
done

[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --locked --bin prestop-injector

echo "== machine"
uname -srm
grep -m1 'model name' /proc/cpuinfo || true
echo "cpus: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server on cpu $SERVER_CPU, load generators on cpu $CLIENT_CPU"

start_ns=$(date +%s%N)
taskset -c "$SERVER_CPU" "$BIN" serve --dev --dev-ca-file "$WORK/ca.pem" \
  --listen "127.0.0.1:$PORT" --probe-listen "127.0.0.1:$PROBE_PORT" \
  --shutdown-delay 0s >"$WORK/server.out" 2>"$WORK/server.log" &
SERVER=$!
until curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" >/dev/null; do
  kill -0 "$SERVER" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 0.002
done
ready_ns=$(date +%s%N)
echo "== ready after $(( (ready_ns - start_ns) / 1000000 )) ms (includes curl start-up)"

echo "== sample answer"
curl -s --cacert "$WORK/ca.pem" -H 'Content-Type: application/json' --data @"$BODY" \
  "https://localhost:$PORT/mutate" | head -c 400; echo

rss() { awk '/VmRSS|VmHWM/ {printf "%s %d KiB  ", $1, $2} END {print ""}' "/proc/$SERVER/status"; }
echo "== rss idle: $(rss)"

echo "== wrk: HTTP/1.1 keep-alive, TLS, $CONNECTIONS connections, ${DURATION}s"
BENCH_BODY=$BODY taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" \
  --latency -s bench/post.lua "$URL"
echo "== rss after wrk: $(rss)"

echo "== h2load: HTTP/2, TLS, $CONNECTIONS connections, 1 stream each, ${DURATION}s"
taskset -c "$CLIENT_CPU" h2load -c"$CONNECTIONS" -m1 -t1 -D"$DURATION" \
  -H 'content-type: application/json' -d "$BODY" "$URL" |
  grep -vE '^(progress|spawning|Warm-up|Main benchmark|Stopped|starting)'
echo "== rss after h2load: $(rss)"

echo "== server metrics (excerpt)"
curl -s "http://127.0.0.1:$PROBE_PORT/metrics" |
  grep -E '^prestop_injector_(requests_total|rejected|patches_total|request_duration_seconds_(count|bucket\{le="0.001"))' || true
echo "== server log lines during the run: $(wc -l <"$WORK/server.log")"
