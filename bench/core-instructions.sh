#!/usr/bin/env bash
# Instructions per seed review in the core (docs/BENCHMARKS.md, "The core, and what the
# optimisation bought"): callgrind runs examples/profile_core, which calls
# `admission::review` on examples/review-job-worker.json N times, for N = 100 and 600; the
# difference over 500 cancels start-up. Instructions, not time: the figure does not move
# with the machine's load, so two commits can be compared on a busy machine.
#
#   bench/core-instructions.sh                     build the example (release), print the figure
#   bench/core-instructions.sh parse_floor skip    the same for another example; N goes last
#   BUDGET=400000 bench/core-instructions.sh       also fail when the figure is above BUDGET
#   SKIP_BUILD=1                                   reuse the built example
#   WIRE=compact                                   the review as the API server sends it: without
#                                                  the fixture's indentation (needs jq)
#   BENCH_BODY=examples/review-pod-from-job.json   another review: this one is a Pod the Job
#                                                  controller makes from the seed's injected
#                                                  template, the review a cluster sends most
# Needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "core-instructions: valgrind is not installed" >&2; exit 1; }
example=${1:-profile_core}
args=("${@:2}")
if [[ ${SKIP_BUILD:-} != 1 ]]; then
  cargo build --locked --release --example "$example" >&2
fi
bin=${CARGO_TARGET_DIR:-target}/release/examples/$example
review=${BENCH_BODY:-examples/review-job-worker.json}
[[ -f $review ]] || { echo "core-instructions: no review $review" >&2; exit 1; }
if [[ ${WIRE:-} == compact ]]; then
  command -v jq >/dev/null || { echo "core-instructions: WIRE=compact needs jq" >&2; exit 1; }
  BENCH_BODY=$(mktemp)
  trap 'rm -f "$BENCH_BODY"' EXIT
  jq -c . "$review" >"$BENCH_BODY"
  export BENCH_BODY
fi
[[ -x $bin ]] || { echo "core-instructions: no $bin (run without SKIP_BUILD)" >&2; exit 1; }

# callgrind's summary line: "==PID== Collected : 213480006".
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "${args[@]}" "$1" 2>&1 >/dev/null |
    awk '/Collected :/ {print $NF}'
}
few=$(count 100)
many=$(count 600)
[[ $few =~ ^[0-9]+$ && $many =~ ^[0-9]+$ ]] || { echo "core-instructions: no count from callgrind" >&2; exit 1; }
per_review=$(((many - few) / 500))
echo "$per_review instructions per review of $(basename "$review")${WIRE:+ ($WIRE)}: $example${args[*]:+ ${args[*]}} ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
if [[ -n ${BUDGET:-} ]] && ((per_review > BUDGET)); then
  echo "core-instructions: above the budget of $BUDGET" >&2
  exit 1
fi
