#!/usr/bin/env bash
# Load test of `prestop-injector serve` on one core (see docs/BENCHMARKS.md).
#
# Builds the release binary, starts it pinned to CPU $SERVER_CPU with --dev, and loads it
# from CPU $CLIENT_CPU with wrk (HTTP/1.1 keep-alive over TLS, the API server's path)
# and h2load (HTTP/2). Traffic stays on 127.0.0.1; every run is bounded by $DURATION.
# SERVER_ARGS adds flags to the server (e.g. "--log-level warn"); SKIP_BUILD=1 reuses the
# binary. Needs: wrk, h2load (Debian: wrk, nghttp2-client), curl, taskset.
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
# examples/config.yaml allows the seed Job's /test-package: the measured answers clean it.
taskset -c "$SERVER_CPU" "$BIN" serve --dev --dev-ca-file "$WORK/ca.pem" --config examples/config.yaml \
  --listen "127.0.0.1:$PORT" --probe-listen "127.0.0.1:$PROBE_PORT" \
  --shutdown-delay 0s ${SERVER_ARGS:-} >"$WORK/server.out" 2>"$WORK/server.log" &
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
# Server CPU time (seconds) and answered requests, to report reviews per CPU-second: the
# cores are shared, so requests per wall-second alone understates a contended run.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' "/proc/$SERVER/stat"; }
answered() {
  curl -s "http://127.0.0.1:$PROBE_PORT/metrics" |
    awk '/^prestop_injector_request_duration_seconds_count/ {n += $2} END {printf "%d", n}'
}
measure() { # name, command...
  local name=$1; shift
  local cpu0 n0 t0 cpu1 n1 t1
  cpu0=$(cpu); n0=$(answered); t0=$(date +%s.%N)
  "$@"
  cpu1=$(cpu); n1=$(answered); t1=$(date +%s.%N)
  awk -v name="$name" -v n=$((n1 - n0)) -v c="$(echo "$cpu1 - $cpu0" | bc)" -v w="$(echo "$t1 - $t0" | bc)" \
    'BEGIN {printf "== %s: %d answers in %.2fs wall, server used %.2f CPU-s (%.0f%% of its core) => %.0f answers/wall-s, %.0f answers/CPU-s\n", name, n, w, c, 100*c/w, n/w, n/c}'
  echo "== rss: $(rss)"
}
echo "== rss idle: $(rss)"

H2_FILTER='^(progress|spawning|Warm-up|Main benchmark|Stopped|starting)'
run_wrk() { BENCH_BODY=$1 taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s bench/post.lua "$URL"; }
run_h2load() {
  taskset -c "$CLIENT_CPU" h2load -c"$CONNECTIONS" -m1 -t1 -D"$DURATION" \
    -H 'content-type: application/json' -d "$1" "$URL" | grep -vE "$H2_FILTER"
}

echo "== wrk: HTTP/1.1 keep-alive, TLS, $CONNECTIONS connections, ${DURATION}s, seed Job (patched)"
measure "wrk seed Job" run_wrk "$BODY"

echo "== h2load: HTTP/2, TLS, $CONNECTIONS connections x 1 stream, ${DURATION}s, seed Job (patched)"
measure "h2load seed Job" run_h2load "$BODY"

# The same Job without our annotation: allowed unchanged, so the transport dominates.
sed 's/prestop-injector.io\/cleanup/example.com\/cleanup/' "$BODY" >"$WORK/unchanged.json"
echo "== wrk: HTTP/1.1, out-of-scope Job (unchanged; transport ceiling)"
measure "wrk unchanged Job" run_wrk "$WORK/unchanged.json"

echo "== server metrics (excerpt)"
curl -s "http://127.0.0.1:$PROBE_PORT/metrics" |
  grep -E '^prestop_injector_(requests_total|rejected|patches_total|request_duration_seconds_(count|sum))' || true
echo "== server log lines during the run: $(wc -l <"$WORK/server.log")"
