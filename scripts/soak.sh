#!/usr/bin/env bash
# Soak test of `prestop-injector serve` (issue #6, results in docs/ROBUSTNESS.md).
#
#   scripts/soak.sh                   # 10 minutes (the recorded run)
#   scripts/soak.sh --duration 60s    # quick check
#
# Phase 1, for --duration: steady load from wrk (HTTP/1.1 keep-alive, the API server's
# path) and h2load (HTTP/2) posting the seed Job review, while the serving certificate is
# rotated every --rotate-every seconds by a Secret-style `..data` symlink swap (as the
# kubelet does) and a malformed-input client posts garbage, wrong content types, reviews
# without uid and oversized bodies. RSS is sampled every 10 s.
# Phase 2: SIGTERM under load, with slow uploads in flight: every request that reached the
# server must be answered, and the server must exit 0.
#
# Pass: 0 errors on well-formed requests, every malformed request a 4xx, every rotation
# served, RSS drift < 5 % after warm-up, 0 failed in-flight requests at SIGTERM.
# Everything stays on 127.0.0.1; every loop is bounded by time and count; the EXIT trap
# kills what this script started. Needs: wrk, h2load, curl, openssl, jq.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=600
ROTATE_EVERY=30
RATE_H1=${RATE_H1:-200}  # requests/s over HTTP/1.1
RATE_H2=${RATE_H2:-100}  # requests/s over HTTP/2
CONNECTIONS=${CONNECTIONS:-4}
PORT=${PORT:-28443}
PROBE_PORT=${PROBE_PORT:-28080}
BIN=${BIN:-target/release/prestop-injector}
BODY=${BODY:-examples/review-job-worker.json}
OUT=${OUT:-target/soak}

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
seconds() { # 600, 600s, 10m
  case $1 in
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}
while (( $# )); do
  case $1 in
    --duration) DURATION=$(seconds "$2"); shift 2 ;;
    --rotate-every) ROTATE_EVERY=$(seconds "$2"); shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "soak: unknown argument $1" >&2; usage 2 ;;
  esac
done
[[ $DURATION =~ ^[0-9]+$ && $DURATION -ge 20 ]] || { echo "soak: --duration must be at least 20s" >&2; exit 2; }

for tool in wrk h2load curl openssl jq; do
  command -v "$tool" >/dev/null || { echo "soak: $tool is not installed" >&2; exit 1; }
done
[[ ${SKIP_BUILD:-} == 1 ]] || cargo build --release --locked --bin prestop-injector
[[ -x $BIN ]] || { echo "soak: $BIN not found" >&2; exit 1; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.txt "$OUT"/*.tsv "$OUT"/*.log
WORK=$(mktemp -d)
PIDS=()
SERVER=
cleanup() {
  local pid
  for pid in "${PIDS[@]}" ${SERVER:+"$SERVER"}; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}" ${SERVER:+"$SERVER"}; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "[$(date +%T)] $*" | tee -a "$OUT/summary.txt"; }
: >"$OUT/summary.txt"
URL_BASE="https://127.0.0.1:$PORT"
URL="$URL_BASE/mutate?timeout=10s"

# --- certificates: one CA, a fresh serving key and certificate per rotation -------------
TLS=$WORK/tls
mkdir -p "$TLS"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=prestop-injector-soak-ca -keyout "$WORK/ca.key" -out "$WORK/ca.crt" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >"$WORK/ext.cnf"
GENERATION=0
# Writes a new pair into a timestamped directory and swaps `..data` to it atomically, as
# the kubelet's AtomicWriter does for Secret volumes; prints the new serial.
rotate() {
  GENERATION=$(( GENERATION + 1 ))
  local dir="..$(date +%Y_%m_%d_%H_%M_%S).$GENERATION" old serial
  mkdir "$TLS/$dir"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=prestop-injector-soak \
    -keyout "$TLS/$dir/tls.key" -out "$WORK/tls.csr" 2>/dev/null
  serial=$(printf '%016X%04X' "$(date +%s%N)" "$GENERATION")
  openssl x509 -req -in "$WORK/tls.csr" -CA "$WORK/ca.crt" -CAkey "$WORK/ca.key" -days 1 \
    -set_serial "0x$serial" -extfile "$WORK/ext.cnf" -out "$TLS/$dir/tls.crt" 2>/dev/null
  old=$(readlink "$TLS/..data" 2>/dev/null || true)
  ln -sfn "$dir" "$TLS/..data_tmp"
  mv -T "$TLS/..data_tmp" "$TLS/..data"
  [[ -e $TLS/tls.crt ]] || ln -s ..data/tls.crt "$TLS/tls.crt"
  [[ -e $TLS/tls.key ]] || ln -s ..data/tls.key "$TLS/tls.key"
  [[ -z $old ]] || rm -rf "${TLS:?}/$old"
  echo "$serial"
}
served_serial() {
  openssl s_client -connect "127.0.0.1:$PORT" -servername localhost </dev/null 2>/dev/null |
    openssl x509 -noout -serial 2>/dev/null | sed 's/^serial=//' || true
}
rotate >/dev/null

# --- server -------------------------------------------------------------------------------
start_server() {
  "$BIN" serve --listen "127.0.0.1:$PORT" --probe-listen "127.0.0.1:$PROBE_PORT" \
    --tls-cert "$TLS/tls.crt" --tls-key "$TLS/tls.key" --cert-poll-interval 2s \
    --shutdown-delay 2s --drain-timeout 20s --max-connection-age "${MAX_CONNECTION_AGE:-1h}" \
    --log-format json >"$OUT/server.log" 2>&1 &
  SERVER=$!
  local deadline=$(( $(date +%s) + 30 ))
  until curl -sf "http://127.0.0.1:$PROBE_PORT/readyz" >/dev/null; do
    kill -0 "$SERVER" 2>/dev/null || { tail "$OUT/server.log" >&2; echo "soak: server died" >&2; exit 1; }
    (( $(date +%s) < deadline )) || { echo "soak: server not ready after 30 s" >&2; exit 1; }
    sleep 0.1
  done
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$SERVER/status" 2>/dev/null || echo 0; }
metric() { # sum of a metric family's samples, optionally filtered by a label regex
  curl -s "http://127.0.0.1:$PROBE_PORT/metrics" |
    awk -v name="$1" -v filter="${2:-}" '$1 ~ "^"name"({|$)" && $1 ~ filter {n += $2} END {printf "%d", n}'
}

log "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
log "binary: $BIN ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
log "phase 1: ${DURATION}s, HTTP/1.1 ${RATE_H1}/s + HTTP/2 ${RATE_H2}/s over $CONNECTIONS connections each, rotation every ${ROTATE_EVERY}s"
start_server
log "server pid $SERVER ready, rss $(rss_kib) KiB"

END=$(( $(date +%s) + DURATION ))
# wrk: HTTP/1.1 keep-alive at a steady rate (post.lua paces each connection).
SOAK_BODY=$BODY SOAK_RATE=$RATE_H1 SOAK_CONNECTIONS=$CONNECTIONS \
  wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --timeout 10s -s scripts/soak/post.lua "$URL" \
  >"$OUT/wrk.txt" 2>&1 &
PIDS+=($!); WRK=$!
# h2load: HTTP/2 at a steady rate; one log line per request (status, microseconds).
h2load -c"$CONNECTIONS" -m1 -t1 --rps=$(( RATE_H2 / CONNECTIONS )) -D "$DURATION" \
  -H 'content-type: application/json' -d "$BODY" --log-file="$OUT/h2load-requests.tsv" "$URL" \
  >"$OUT/h2load.txt" 2>&1 &
PIDS+=($!); H2=$!
: >"$OUT/malformed.txt"
MALFORMED=
# SOAK_MALFORMED=0 leaves the malformed client out (to tell its effect on RSS apart).
if [[ ${SOAK_MALFORMED:-1} == 1 ]]; then
  scripts/soak/malformed.sh "$END" $(( DURATION * 10 )) "$OUT/malformed.txt" "$URL_BASE" "$WORK/ca.crt" "$WORK" &
  PIDS+=($!); MALFORMED=$!
fi

# Main loop: RSS every 10 s, rotation every ROTATE_EVERY s; verify each rotation is served.
echo "elapsed_s rss_kib" >"$OUT/rss.txt"
START=$(date +%s)
next_rss=$START next_rotation=$(( START + ROTATE_EVERY ))
rotations=0 rotations_served=0 worst_reload_ms=0
while (( $(date +%s) < END )); do
  now=$(date +%s)
  if (( now >= next_rss )); then
    echo "$(( now - START )) $(rss_kib)" >>"$OUT/rss.txt"
    next_rss=$(( next_rss + 10 ))
  fi
  if (( now >= next_rotation && now + 10 < END )); then
    t0=$(date +%s%N)
    serial=$(rotate)
    rotations=$(( rotations + 1 ))
    deadline=$(( $(date +%s) + 15 ))
    while [[ $(served_serial) != "$serial" ]] && (( $(date +%s) < deadline )); do sleep 0.2; done
    if [[ $(served_serial) == "$serial" ]]; then
      rotations_served=$(( rotations_served + 1 ))
      ms=$(( ($(date +%s%N) - t0) / 1000000 ))
      (( ms > worst_reload_ms )) && worst_reload_ms=$ms
    else
      log "rotation $rotations: serial $serial not served after 15 s"
    fi
    next_rotation=$(( next_rotation + ROTATE_EVERY ))
  fi
  sleep 1
done
wait "$WRK" || true
wait "$H2" || true
[[ -z $MALFORMED ]] || wait "$MALFORMED" || true
PIDS=()
echo "$(( $(date +%s) - START )) $(rss_kib)" >>"$OUT/rss.txt"

# --- phase 1 results ---------------------------------------------------------------------
fail=0
check() { # name condition-result(0/1) detail
  if [[ $2 == 0 ]]; then log "PASS $1: $3"; else log "FAIL $1: $3"; fail=1; fi
}
wrk_line=$(grep '^soak-wrk' "$OUT/wrk.txt" || echo "soak-wrk missing")
log "wrk (HTTP/1.1): $wrk_line"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$wrk_line"; }
wrk_errors=$(( $(field bad) + $(field read_errors) + $(field write_errors) + $(field timeouts) + $(field connect_errors) ))
check "HTTP/1.1 well-formed requests" "$(( wrk_errors == 0 && $(field ok) > 0 ? 0 : 1 ))" \
  "$(field ok) answered 200 allowed, $wrk_errors errors, p99 $(field p99_ms) ms"

h2_summary=$(grep -E '^requests:' "$OUT/h2load.txt" || echo "requests: missing")
h2_codes=$(grep -E '^status codes:' "$OUT/h2load.txt" || true)
log "h2load (HTTP/2): $h2_summary; $h2_codes"
# h2load's per-request log: start (µs since epoch), status, µs to the end of the response.
h2_total=$(wc -l <"$OUT/h2load-requests.tsv")
h2_ok=$(awk -F'\t' '$2 == 200' "$OUT/h2load-requests.tsv" | wc -l)
read -r h2_p50 h2_p99 h2_max < <(cut -f3 "$OUT/h2load-requests.tsv" | sort -n |
  awk '{a[NR] = $1 / 1000} END {if (NR == 0) {print "0 0 0"; exit}
       p50 = int(NR * 0.50) + 1; p99 = int(NR * 0.99) + 1; if (p50 > NR) p50 = NR; if (p99 > NR) p99 = NR
       printf "%.2f %.2f %.2f\n", a[p50], a[p99], a[NR]}')
h2_failed=$(sed -n 's/.* \([0-9]*\) failed, \([0-9]*\) errored, \([0-9]*\) timeout.*/\1 \2 \3/p' <<<"$h2_summary")
h2_errors=$(( h2_total - h2_ok ))
for n in $h2_failed; do h2_errors=$(( h2_errors + n )); done
check "HTTP/2 well-formed requests" "$(( h2_errors == 0 && h2_ok > 0 ? 0 : 1 ))" \
  "$h2_ok answered 200, $h2_errors errors, p50 $h2_p50 ms, p99 $h2_p99 ms, max $h2_max ms"

malformed_total=$(wc -l <"$OUT/malformed.txt")
malformed_4xx=$(awk '$2 ~ /^4/' "$OUT/malformed.txt" | wc -l)
log "malformed requests by case and code: $(sort "$OUT/malformed.txt" | uniq -c | awk '{printf "%s %s=%s; ", $2, $3, $1}')"
check "malformed requests refused with 4xx" "$(( (malformed_total > 0 || ${SOAK_MALFORMED:-1} == 0) && malformed_total == malformed_4xx ? 0 : 1 ))" \
  "$malformed_4xx of $malformed_total"

# Runs shorter than one rotation period + 10 s rotate nothing; that is not a failure.
check "certificate rotations served" "$(( rotations == rotations_served && (rotations > 0 || DURATION < ROTATE_EVERY + 10) ? 0 : 1 ))" \
  "$rotations_served of $rotations (worst time to serve the new certificate: ${worst_reload_ms} ms, poll interval 2 s)"
log "server tls reload metrics: $(curl -s "http://127.0.0.1:$PROBE_PORT/metrics" | grep -E '^prestop_injector_tls' | tr '\n' ' ')"

# RSS: warm-up is the first quarter (at most 60 s); drift compares the mean of the last
# three samples with the mean of the first three after warm-up.
warmup=$(( DURATION / 4 < 60 ? DURATION / 4 : 60 ))
read -r rss_first rss_last rss_max drift < <(awk -v w="$warmup" 'NR > 1 && $1 >= w {s[++n] = $2; if ($2 > max) max = $2}
  END {k = n < 3 ? n : 3; for (i = 1; i <= k; i++) {a += s[i]; b += s[n - k + i]}; a /= k; b /= k;
       printf "%d %d %d %.2f\n", a, b, max, 100 * (b - a) / a}' "$OUT/rss.txt")
check "RSS drift after ${warmup}s warm-up" "$(awk -v d="$drift" 'BEGIN {print (d < 5 && d > -5) ? 0 : 1}')" \
  "${rss_first} KiB -> ${rss_last} KiB (${drift} %), max ${rss_max} KiB; samples in rss.txt"

# --- phase 2: SIGTERM under load ----------------------------------------------------------
log "phase 2: SIGTERM under load (shutdown delay 2 s, drain timeout 20 s)"
SHUT_SECONDS=15
SOAK_BODY=$BODY SOAK_RATE=$RATE_H1 SOAK_CONNECTIONS=$CONNECTIONS \
  wrk -t1 -c"$CONNECTIONS" -d"${SHUT_SECONDS}s" --timeout 10s -s scripts/soak/post.lua "$URL" \
  >"$OUT/wrk-sigterm.txt" 2>&1 &
PIDS+=($!)
# Keep-alive clients that tell an idle close (noticed before reuse, as the API server's Go
# client does) from a request written and never answered (a failed webhook call).
python3 scripts/soak/keepalive_client.py --port "$PORT" --ca "$WORK/ca.crt" --body "$BODY" \
  --clients 8 --seconds "$SHUT_SECONDS" >"$OUT/keepalive-sigterm.txt" 2>&1 &
PIDS+=($!)
# Slow uploads: a ~1 MiB review sent at 256 KiB/s takes ~4 s, so each is in flight when
# SIGTERM arrives and must still be answered.
head -c 1000000 /dev/zero | tr '\0' x >"$WORK/pad.txt"
jq -c --rawfile pad "$WORK/pad.txt" '.request.object.metadata.annotations["example.com/pad"] = $pad' \
  "$BODY" >"$WORK/big.json"
: >"$OUT/sigterm-curl.txt"
for i in 1 2 3 4 5 6; do
  curl -s -o /dev/null -w "slow-$i %{http_code} %{time_appconnect} %{time_total} %{exitcode}\n" \
    --max-time 30 --limit-rate 256k --cacert "$WORK/ca.crt" -H 'Content-Type: application/json' \
    --data-binary @"$WORK/big.json" "$URL" >>"$OUT/sigterm-curl.txt" 2>/dev/null &
  PIDS+=($!)
done
# New connections every 100 ms until the listener closes (bounded: 200 tries).
(
  for i in $(seq 1 200); do
    curl -s -o /dev/null -w "fresh-$i %{http_code} %{time_appconnect} %{time_total} %{exitcode}\n" \
      --max-time 10 --cacert "$WORK/ca.crt" -H 'Content-Type: application/json' \
      --data-binary @"$BODY" "$URL" >>"$OUT/sigterm-curl.txt" 2>/dev/null || true
    kill -0 "$SERVER" 2>/dev/null || break
    sleep 0.1
  done
) &
PIDS+=($!)
sleep 1.5
log "SIGTERM at rss $(rss_kib) KiB, in flight: $(metric prestop_injector_in_flight_requests)"
term_ns=$(date +%s%N)
kill -TERM "$SERVER"
server_rc=0
wait "$SERVER" || server_rc=$?
exit_ms=$(( ($(date +%s%N) - term_ns) / 1000000 ))
SERVER=
for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
PIDS=()
check "server exit after SIGTERM" "$(( server_rc == 0 ? 0 : 1 ))" "exit code $server_rc after ${exit_ms} ms"
# A request failed in flight when its TLS handshake completed (time_appconnect > 0) but it
# got no 200; connection refused after the listener closed is not a failure.
inflight_failed=$(awk '$3 > 0 && $2 != 200' "$OUT/sigterm-curl.txt" | wc -l)
inflight_ok=$(awk '$2 == 200' "$OUT/sigterm-curl.txt" | wc -l)
slow_ok=$(awk '$1 ~ /^slow/ && $2 == 200' "$OUT/sigterm-curl.txt" | wc -l)
refused=$(awk '$3 == 0' "$OUT/sigterm-curl.txt" | wc -l)
wrk_line=$(grep '^soak-wrk' "$OUT/wrk-sigterm.txt" || echo "soak-wrk missing")
log "wrk during SIGTERM: $wrk_line"
wrk_bad=$(field bad)
keepalive=$(grep '^keepalive ok=' "$OUT/keepalive-sigterm.txt" || echo "keepalive missing")
log "keep-alive clients during SIGTERM: $keepalive"
ka() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" <<<"$keepalive"; }
check "fresh connections and slow uploads at SIGTERM" "$(( inflight_failed == 0 && slow_ok == 6 ? 0 : 1 ))" \
  "$inflight_failed failed in flight; $inflight_ok answered 200 (slow uploads: $slow_ok of 6), $refused refused after the listener closed"
check "keep-alive HTTP/1.1 requests at SIGTERM" "$(( $(ka failed_in_flight) + $(ka bad_status) + wrk_bad == 0 && $(ka ok) > 0 ? 0 : 1 ))" \
  "$(ka ok) answered, $(ka failed_in_flight) written but never answered, $(ka idle_closed) idle connections closed by the server (noticed before reuse); wrk: $wrk_bad non-200, $(field read_errors) read errors (wrk cannot tell idle closes from in-flight ones)"

if (( fail )); then log "SOAK FAILED (details in $OUT)"; exit 1; fi
log "SOAK PASSED (details in $OUT)"
