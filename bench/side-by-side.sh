#!/usr/bin/env bash
# Side by side on one core (docs/BENCHMARKS.md, "Side by side with the kube-rs example"):
#   noop      bench/noop-server, a TLS server that answers every POST with a fixed 200 JSON
#   prestop   target/release/prestop-injector serve (or $PRESTOP_BIN), default logging
#   kube-rs   the kube-rs admission_controller example, if KUBE_EXAMPLE_BIN names its binary
# With SPLIT=1, two more that split our gap to the do-nothing server in two:
#   noop-ours      bench/noop-server answering prestop-injector's own answer, byte for byte:
#                  the transport's ceiling for a patched answer, with no work behind it
#   prestop-quiet  prestop-injector at RUST_LOG=warn: without the info line per patch
# Each server runs pinned to $SERVER_CPU; wrk (bench/post.lua, the seed Job's review) runs
# on $CLIENT_CPU. After a warm-up, the rounds are interleaved (noop, prestop, kube-rs,
# noop, …) so that load drifting on a shared machine hits all three alike.
#
# Environment:
#   ROUNDS=3 DURATION=8 WARMUP=3 CONNECTIONS=16   wrk rounds, seconds, connections
#   SERVER_CPU=0 CLIENT_CPU=1                     the two cores
#   MAX_LOAD=0.5 LOAD_WAIT=180                    refuse above this 1-min load average after
#                                                 waiting up to LOAD_WAIT s for it to fall;
#   FORCE=1                                       run anyway, the output says "LOADED"
#   KUBE_EXAMPLE_BIN=/path/admission_controller   the kube-rs example, built outside the
#   KUBE_EXAMPLE_LABEL="kube 4.2.0 (ac95b19)"     project (see docs/BENCHMARKS.md); unset: skipped
#   BENCH_CACHE=/var/cache/prestop-bench          the do-nothing server's target dir
#   SKIP_BUILD=1                                  reuse both binaries
#   PRESTOP_BIN=OUT/prestop-injector              measure another build of ours, not built here:
#                                                 the image's static one from
#                                                 scripts/build-binaries.sh OUT (its resident
#                                                 size is the one a deployment sees)
#   SPLIT=1                                       add noop-ours and prestop-quiet (above)
#   BENCH_NETNS=0                                 stay in the host network namespace
#   WIRE=compact                                  send the review as the API server does, without
#                                                 the fixture's indentation (2.9 kB, not 5.9 kB)
#   BENCH_BODY=examples/review-pod-from-job.json  post another review: this one is a Pod of the
#                                                 seed Job, which ours answers without a patch
# As root the measured phase runs in a fresh network namespace (loopback only): no port can
# clash with another engineer's server and nothing can leave the machine.
# Needs: wrk, curl, taskset, awk; as root also unshare and ip; jq for WIRE=compact.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$SELF")/.."
ROOT=$PWD

ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-8} WARMUP=${WARMUP:-3} CONNECTIONS=${CONNECTIONS:-16}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
MAX_LOAD=${MAX_LOAD:-0.5} LOAD_WAIT=${LOAD_WAIT:-180}
BENCH_CACHE=${BENCH_CACHE:-/var/cache/prestop-bench}
KUBE_EXAMPLE_BIN=${KUBE_EXAMPLE_BIN:-}
KUBE_EXAMPLE_LABEL=${KUBE_EXAMPLE_LABEL:-kube-rs admission_controller example}
BODY=$(realpath "${BENCH_BODY:-$ROOT/examples/review-job-worker.json}")
REVIEW_NAME=$(basename "$BODY")
PRESTOP_BIN=${PRESTOP_BIN:-}
BUILD_PRESTOP=$([[ -z $PRESTOP_BIN ]] && echo 1 || echo 0)
PRESTOP_BIN=$(realpath -m "${PRESTOP_BIN:-$ROOT/target/release/prestop-injector}")
NOOP_BIN=$BENCH_CACHE/noop-target/release/noop-server
# The kube-rs example binds $ADMISSION_PRIVATE_IP:8443; the others take free neighbours.
NOOP_PORT=18441 PRESTOP_PORT=18442 PRESTOP_PROBE=18081 KUBE_PORT=8443
NOOP_OURS_PORT=18443 QUIET_PORT=18444 QUIET_PROBE=18082
SNI=prestop-injector.prestop-system.svc # a name in the certificate `certs` writes

say() { printf '%s\n' "$*" >&2; }
die() { say "side-by-side: $*"; exit 1; }
load1() { cut -d' ' -f1 /proc/loadavg; }
above() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a > b)}'; }

if [[ -z ${BENCH_IN_NETNS:-} ]]; then
  for tool in wrk curl taskset awk nice; do
    command -v "$tool" >/dev/null || die "$tool is not installed (Debian: apt-get install wrk curl util-linux)"
  done
  [[ $(nproc) -ge 2 ]] || die "needs 2 CPUs (server and client on separate cores)"
  [[ -z $KUBE_EXAMPLE_BIN || -x $KUBE_EXAMPLE_BIN ]] || die "KUBE_EXAMPLE_BIN=$KUBE_EXAMPLE_BIN is not an executable"
  say "== load average before the builds: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [[ ${SKIP_BUILD:-} != 1 ]]; then
    say "== building (nice 19): $( ((BUILD_PRESTOP)) && echo 'prestop-injector, ')noop-server"
    if ((BUILD_PRESTOP)); then
      nice -n 19 cargo build --release --locked --bin prestop-injector
    fi
    CARGO_TARGET_DIR=$BENCH_CACHE/noop-target nice -n 19 \
      cargo build --release --locked --manifest-path bench/noop-server/Cargo.toml
  fi
  [[ -x $PRESTOP_BIN && -x $NOOP_BIN ]] || die "missing $PRESTOP_BIN or $NOOP_BIN (run without SKIP_BUILD)"

  # The 1-min average lags: give our own build (or a neighbour's) a bounded time to fade.
  deadline=$((SECONDS + LOAD_WAIT))
  while above "$(load1)" "$MAX_LOAD" && ((SECONDS < deadline)) && [[ ${FORCE:-} != 1 ]]; do
    sleep 10
  done
  if above "$(load1)" "$MAX_LOAD"; then
    [[ ${FORCE:-} == 1 ]] || die "load average $(load1) > $MAX_LOAD: other work would spoil the numbers (FORCE=1 runs anyway, labelled LOADED)"
    say "== WARNING: load average $(load1) > $MAX_LOAD; the figures are from a LOADED machine"
  fi
  if [[ ${BENCH_NETNS:-1} == 1 && $(id -u) == 0 ]] && command -v unshare >/dev/null && command -v ip >/dev/null; then
    exec env BENCH_IN_NETNS=1 unshare --net -- "$SELF" "$@"
  fi
  say "== running in the host network namespace: ports $NOOP_PORT $PRESTOP_PORT $PRESTOP_PROBE $KUBE_PORT must be free"
else
  ip link set lo up
fi

# ---- measured phase: everything below is bounded and torn down at exit ----
WORK=$(mktemp -d)
declare -A PID=() READY_MS=() URL=() LOG=() ANSWER=()
declare -A RPS=() P99=() PER_CPU=() ERRORS=()
cleanup() {
  local name
  for name in "${!PID[@]}"; do kill -TERM "${PID[$name]}" 2>/dev/null || true; done
  for name in "${!PID[@]}"; do
    for _ in $(seq 30); do kill -0 "${PID[$name]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${PID[$name]}" 2>/dev/null || true
    wait "${PID[$name]}" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ ${WIRE:-} == compact ]]; then
  command -v jq >/dev/null || die "WIRE=compact needs jq (Debian: apt-get install jq)"
  jq -c . "$BODY" >"$WORK/review.json"
  BODY=$WORK/review.json
fi

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
"$PRESTOP_BIN" certs --out "$WORK/certs" >/dev/null
CERT=$WORK/certs/tls.crt KEY=$WORK/certs/tls.key CA=$WORK/certs/ca.crt

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, all threads

# start NAME PORT DIR COMMAND...: exec pinned, then poll with the seed review until a 200;
# READY_MS is exec to first 200, curl's own start-up included (measured below as a floor).
start() {
  local name=$1 port=$2 dir=$3; shift 3
  port_free "$port" || die "port $port on 127.0.0.1 is taken: cannot start $name"
  LOG[$name]=$WORK/$name.log
  URL[$name]="https://127.0.0.1:$port/mutate?timeout=10s"
  local t0 t1 code
  t0=$(date +%s%N)
  (cd "$dir" && exec taskset -c "$SERVER_CPU" "$@") >"${LOG[$name]}" 2>&1 &
  PID[$name]=$!
  for _ in $(seq 2000); do # ≤ 2000 tries, each bounded by --max-time
    code=$(curl -s -o "$WORK/$name.answer" -w '%{http_code}' --max-time 2 \
      --cacert "$CA" --resolve "$SNI:$port:127.0.0.1" -H 'Content-Type: application/json' \
      --data-binary @"$BODY" "https://$SNI:$port/mutate?timeout=10s" || true)
    [[ $code == 200 ]] && break
    kill -0 "${PID[$name]}" 2>/dev/null || { cat "${LOG[$name]}" >&2; die "$name exited before answering"; }
    sleep 0.005
  done
  [[ $code == 200 ]] || die "$name did not answer 200 within the tries"
  t1=$(date +%s%N)
  READY_MS[$name]=$(( (t1 - t0) / 1000000 ))
  local answer=$WORK/$name.answer
  grep -q '"allowed": *true' "$answer" || die "$name answered without allowed: true: $(head -c 300 "$answer")"
  ANSWER[$name]="$(wc -c <"$answer") B, $(grep -q '"patch"' "$answer" && echo patch || echo 'no patch')"
  say "== $name ready after ${READY_MS[$name]} ms (pid ${PID[$name]}): ${ANSWER[$name]}"
}

# prestop-injector runs in its image's environment, as deployed: the Dockerfile's ENV lines
# (one NAME=value each).
mapfile -t IMAGE_ENV < <(sed -n 's/^ENV //p' "$ROOT/Dockerfile")
SERVERS=(noop prestop)
start noop "$NOOP_PORT" "$WORK" "$NOOP_BIN" "127.0.0.1:$NOOP_PORT" "$CERT" "$KEY"
# prestop-injector with the quick start's config (its allow-list names the seed Job's
# /test-package): without an allow-list nothing that deletes is injected, and the review
# would measure a warning, not the mutation. Default logging: no log flags, no RUST_LOG
# unless given. No kubeconfig and no in-cluster variables, so the version lookup fails at
# once (the server then assumes the oldest supported release).
start_prestop() { # name port probe-port [NAME=value…]
  local name=$1 port=$2 probe=$3
  shift 3
  start "$name" "$port" "$WORK" env -u RUST_LOG -u KUBERNETES_SERVICE_HOST \
    -u KUBERNETES_SERVICE_PORT "${IMAGE_ENV[@]}" "$@" KUBECONFIG=/nonexistent "$PRESTOP_BIN" serve \
    --tls-cert "$CERT" --tls-key "$KEY" --config "$ROOT/examples/config.yaml" \
    --listen "127.0.0.1:$port" --probe-listen "127.0.0.1:$probe"
}
start_prestop prestop "$PRESTOP_PORT" "$PRESTOP_PROBE"
# The seed must be patched, or the run would measure a warning, not the mutation; another
# review (BENCH_BODY) is answered as the core decides it.
[[ -n ${BENCH_BODY:-} || ${ANSWER[prestop]} == *", patch" ]] ||
  die "prestop-injector answered without a patch: it would not measure the mutation"
if [[ ${SPLIT:-} == 1 ]]; then
  cp "$WORK/prestop.answer" "$WORK/ours.answer" # start() overwrites $WORK/NAME.answer
  start noop-ours "$NOOP_OURS_PORT" "$WORK" "$NOOP_BIN" "127.0.0.1:$NOOP_OURS_PORT" "$CERT" "$KEY" \
    "$WORK/ours.answer"
  cmp -s "$WORK/ours.answer" "$WORK/noop-ours.answer" || die "noop-ours did not answer prestop-injector's bytes"
  start_prestop prestop-quiet "$QUIET_PORT" "$QUIET_PROBE" RUST_LOG=warn
  SERVERS+=(noop-ours prestop-quiet)
fi
if [[ -n $KUBE_EXAMPLE_BIN ]]; then
  # The example reads admission-controller-tls.{crt,key} from its working directory.
  mkdir "$WORK/kube" && cp "$CERT" "$WORK/kube/admission-controller-tls.crt" &&
    cp "$KEY" "$WORK/kube/admission-controller-tls.key"
  start kube-rs "$KUBE_PORT" "$WORK/kube" env -u RUST_LOG ADMISSION_PRIVATE_IP=127.0.0.1 \
    "$KUBE_EXAMPLE_BIN"
  SERVERS+=(kube-rs)
else
  say "== KUBE_EXAMPLE_BIN is not set: the kube-rs example is skipped"
fi

# What curl's start-up and handshake alone cost, against a warm server: subtract it from
# "ready" by eye.
t0=$(date +%s%N)
curl -s -o /dev/null --max-time 2 --cacert "$CA" --resolve "$SNI:$NOOP_PORT:127.0.0.1" \
  --data-binary @"$BODY" "https://$SNI:$NOOP_PORT/" || true
CURL_FLOOR_MS=$(( ($(date +%s%N) - t0) / 1000000 ))

run_wrk() { # name seconds out-file
  BENCH_BODY=$BODY timeout $(($2 + 30)) taskset -c "$CLIENT_CPU" \
    wrk -t1 -c"$CONNECTIONS" -d"$2s" --latency -s "$ROOT/bench/post.lua" "${URL[$1]}" >"$3"
}
for name in "${SERVERS[@]}"; do
  say "== warm-up $name, ${WARMUP}s"
  run_wrk "$name" "$WARMUP" "$WORK/$name.warmup"
done

# wrk's figures: requests/s, p99 in ms, requests, non-2xx + socket errors.
parse() {
  awk '
    /Requests\/sec:/ {rps = $2}
    / requests in / {n = $1}
    /^ +99%/ {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
              p99 = v * (u == "us" ? 0.001 : u == "s" ? 1000 : u == "m" ? 60000 : 1)}
    /Non-2xx/ {err += $NF}
    /Socket errors:/ {for (i = 3; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) err += $i}
    END {printf "%s %.3f %d %d\n", rps, p99, n, err}' "$1"
}
HZ=$(getconf CLK_TCK)
for round in $(seq "$ROUNDS"); do
  for name in "${SERVERS[@]}"; do
    c0=$(cpu_ticks "${PID[$name]}")
    run_wrk "$name" "$DURATION" "$WORK/$name.$round"
    c1=$(cpu_ticks "${PID[$name]}")
    read -r rps p99 n err < <(parse "$WORK/$name.$round")
    per_cpu=$(awk -v n="$n" -v t=$((c1 - c0)) -v hz="$HZ" 'BEGIN {printf "%.0f", t ? n * hz / t : 0}')
    say "== round $round $name: $rps req/s, p99 $p99 ms, $per_cpu req per server CPU-s, errors $err"
    RPS[$name]+="$rps " P99[$name]+="$p99 " PER_CPU[$name]+="$per_cpu "
    ERRORS[$name]=$(( ${ERRORS[$name]:-0} + err ))
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

median() { tr ' ' '\n' <<<"$1" | awk 'NF' | sort -g | awk '{v[NR] = $1} END {printf "%s", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
kib() { awk '/^'"$1"':/ {printf "%.1f", $2 / 1024}' "/proc/$2/status"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b ? a / b : 0}'; }
verdict() { awk -v r="$1" -v g="$2" 'BEGIN {print (r >= g ? "met" : "not met")}'; }
label() {
  case $1 in
    noop) echo "do-nothing TLS server (bench/noop-server)" ;;
    noop-ours) echo "do-nothing TLS server answering our answer's bytes" ;;
    prestop-quiet) echo "prestop-injector serve, RUST_LOG=warn (no info line)" ;;
    prestop) echo "prestop-injector serve $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- src Cargo.toml Cargo.lock || echo -dirty)$( ((BUILD_PRESTOP)) || echo " checkout, binary $PRESTOP_BIN")" ;;
    kube-rs) echo "$KUBE_EXAMPLE_LABEL" ;;
  esac
}

LOADED=""
above "${LOAD_BEFORE%% *}" "$MAX_LOAD" && LOADED=" — **LOADED machine (load ${LOAD_BEFORE%% *} > $MAX_LOAD): noisy, do not compare with goals**"
cat <<EOF

### Side by side, $(date -u +%Y-%m-%d)$LOADED

**Machine:** nproc $(nproc); $(lscpu 2>/dev/null | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'); $(uname -srm);
$(rustc --version 2>/dev/null || echo rustc ?); $(wrk -v 2>&1 | head -1 | awk '{print $1, $2}').
**Load average** (1, 5, 15 min) before the run: $LOAD_BEFORE; after: $LOAD_AFTER.
**Method:** each server alone on CPU $SERVER_CPU (\`taskset -c $SERVER_CPU\`), wrk on CPU $CLIENT_CPU:
\`wrk -t1 -c$CONNECTIONS -d${DURATION}s --latency -s bench/post.lua\` (HTTP/1.1 keep-alive over TLS,
$REVIEW_NAME, $(wc -c <"$BODY") bytes${WIRE:+ as $WIRE JSON}), ${WARMUP} s warm-up each, then $ROUNDS rounds interleaved across the servers;
default logging; the same certificate for all.

| server | req/s (median of $ROUNDS × ${DURATION} s) | rounds | p99 (median) | req per server CPU-s | VmRSS / VmHWM after | ready after exec | log lines | answer | errors |
|---|---|---|---|---|---|---|---|---|---|
EOF
for name in "${SERVERS[@]}"; do
  printf '| %s | **%.0f** | %s | %.2f ms | %s | %s / %s MiB | %s ms | %s | %s | %s |\n' \
    "$(label "$name")" "$(median "${RPS[$name]}")" "$(printf '%.0f ' ${RPS[$name]} | sed 's/ $//')" \
    "$(median "${P99[$name]}")" "$(median "${PER_CPU[$name]}")" \
    "$(kib VmRSS "${PID[$name]}")" "$(kib VmHWM "${PID[$name]}")" "${READY_MS[$name]}" \
    "$(wc -l <"${LOG[$name]}")" "${ANSWER[$name]}" "${ERRORS[$name]}"
done
cat <<EOF

"ready after exec" includes curl's start-up and TLS handshake: ${CURL_FLOOR_MS} ms against a warm server.

| ratio | req/s | req per server CPU-s | goal | |
|---|---|---|---|---|
EOF
row() { # label other goal
  local r
  r=$(ratio "$(median "${RPS[prestop]}")" "$(median "${RPS[$2]}")")
  printf '| %s | **%s×** | %s× | ≥ %s× | %s |\n' "$1" "$r" \
    "$(ratio "$(median "${PER_CPU[prestop]}")" "$(median "${PER_CPU[$2]}")")" "$3" "$(verdict "$r" "$3")"
}
[[ -n ${PID[kube-rs]:-} ]] && row "prestop-injector / kube-rs example" kube-rs 1.5
row "prestop-injector / do-nothing" noop 0.5
# Issue 40's "peak RSS under that load ≤ 12 MB", in decimal megabytes (/proc counts KiB).
hwm_kib=$(awk '/^VmHWM:/ {print $2}' "/proc/${PID[prestop]}/status")
printf '| prestop-injector VmHWM after the rounds | %.1f MiB = **%.1f MB** | | ≤ 12 MB | %s |\n' \
  "$(awk -v k="$hwm_kib" 'BEGIN {print k / 1024}')" "$(awk -v k="$hwm_kib" 'BEGIN {print k * 1.024 / 1000}')" \
  "$(awk -v k="$hwm_kib" 'BEGIN {print (k * 1024 <= 12e6 ? "met" : "not met")}')"
if [[ ${SPLIT:-} == 1 ]]; then
  split_row() { # label numerator denominator
    printf '| %s | %s× | %s× | | (split) |\n' "$1" \
      "$(ratio "$(median "${RPS[$2]}")" "$(median "${RPS[$3]}")")" \
      "$(ratio "$(median "${PER_CPU[$2]}")" "$(median "${PER_CPU[$3]}")")"
  }
  split_row "do-nothing answering our bytes / do-nothing" noop-ours noop
  split_row "prestop-injector / do-nothing answering our bytes" prestop noop-ours
  split_row "prestop-injector / prestop-injector without the info line" prestop prestop-quiet
fi
