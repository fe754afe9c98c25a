#!/usr/bin/env bash
# The reaper with 1,000 injected pods on its node (not run by CI; figures in
# docs/BENCHMARKS.md, "Node reaper"). The cluster, webhook and reaper of
# e2e/reaper/run.sh (--delay 2s, debug binary), then:
#   1. 1,000 pods (each its own hostPath /scratch/p-N, injected by the webhook) created
#      with `kubectl create` of Lists of 100: the wall time, the reaper's CPU time
#      (utime+stime, /proc/PID/stat) until it has recorded all 1,000, and its VmRSS/VmHWM
#      (/proc/PID/status) before and after;
#   2. the reaper restarted: the time to /readyz with the 1,000 pods present, its memory;
#   3. 100 of the pods (100 small files each) force-deleted at once (10 kubectl calls): the time until all
#      100 directories are empty (from the first kubectl call, and the reaper's own
#      first-to-last span from its log);
#   4. watch_restarts stays 0 throughout.
#
#   bash e2e/reaper/scale.sh            # PODS=200 DELETE=50 FILES=100 for a smaller run
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
SUITE=e2e-reaper-scale
PODS=${PODS:-1000}
DELETE=${DELETE:-100}
FILES=${FILES:-100}
# shellcheck source=boot.sh
source "$ROOT/e2e/reaper/boot.sh"

memory() { awk '/^VmRSS|^VmHWM/ { printf "%s %s kB  ", $1, $2 }' "/proc/$REAPER_PID/status"; }
cpu_ms() { awk '{ print ($14 + $15) * 10 }' "/proc/$REAPER_PID/stat"; } # clock ticks of 10 ms
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }
report() { echo "scale: $*"; }
failed=0
check() { # what command...
  local what=$1
  shift
  "$@" || { report "FAILED: $what"; failed=1; }
}

report "reaper pid $REAPER_PID, ready after ${REAPER_READY_SECONDS} s with 0 pods; $(memory)"

# Host directories: the first DELETE get FILES small files each.
for ((i = 1; i <= PODS; i++)); do mkdir -p "$HOST/scratch/p-$i"; done
for ((i = 1; i <= DELETE; i++)); do
  for ((f = 1; f <= FILES; f++)); do echo "$i $f" >"$HOST/scratch/p-$i/f-$f"; done
done

chunk() { # first last: one YAML stream of these pods
  local i
  for ((i = $1; i <= $2; i++)); do
    pod "p-$i" "/scratch/p-$i"
    echo ---
  done
}
for ((c = 1; c <= PODS; c += 100)); do chunk "$c" $((c + 99 > PODS ? PODS : c + 99)) >"$WORK/pods-$c.yaml"; done

cpu0=$(cpu_ms)
t0=$(date +%s.%N)
for ((c = 1; c <= PODS; c += 100)); do
  k create -f "$WORK/pods-$c.yaml" >/dev/null || { report "FAILED: creating pods $c.."; failed=1; }
done
created=$(seconds_since "$t0")
check "the reaper knows all $PODS pods" wait_for 300 rmetric_is "${P}pods" "$PODS"
check "and recorded all $PODS directories" wait_for 60 rmetric_is "${P}recorded_directories" "$PODS"
recorded=$(seconds_since "$t0")
cpu1=$(cpu_ms)
injected=$(k get pods -n e2e -o json | jq '[.items[] | select(.metadata.annotations | has("prestop-injector.io/status"))] | length')
report "$PODS pods created in $created s ($injected injected); the reaper had recorded all after $recorded s"
report "reaper CPU over the creation: $((cpu1 - cpu0)) ms (utime+stime); $(memory)"
report "watch_restarts: $(rmetric "${P}watch_restarts_total")"
check "watch_restarts 0" rmetric_is "${P}watch_restarts_total" 0

stop_reaper
start_reaper || exit 1
report "restarted with $PODS pods present: /readyz after ${REAPER_READY_SECONDS} s; $(memory)"
check "all $PODS pods known after the restart" rmetric_is "${P}pods" "$PODS"

names=()
for ((i = 1; i <= DELETE; i++)); do names+=("p-$i"); done
all_empty() {
  local i
  for ((i = 1; i <= DELETE; i++)); do [[ -z "$(ls -A "$HOST/scratch/p-$i")" ]] || return 1; done
}
cpu0=$(cpu_ms)
t0=$(date +%s.%N)
# Ten kubectl calls of ten pods each at once (one kubectl deletes its pods one by one).
printf '%s\n' "${names[@]}" | xargs -P 10 -n $(((DELETE + 9) / 10)) bash -c 'kubectl --request-timeout=30s delete pod -n e2e "$@" --grace-period=0 --force --wait=false >/dev/null 2>&1' _
deleted=$(seconds_since "$t0")
check "$DELETE directories emptied" wait_for 120 all_empty
emptied=$(seconds_since "$t0")
cpu1=$(cpu_ms)
report "$DELETE pods force-deleted by 10 parallel kubectl calls in $deleted s; all $DELETE directories ($FILES files each) empty $emptied s after the first call (the delay is 2 s)"
# The reaper's own timestamps: its first and last "emptied" line of this batch.
span=$(grep -E 'INFO emptied .*/scratch/p-[0-9]+:' "$REAPER_LOG" | awk '{ print $1 }' | sed -E 's/.*T([0-9:.]+)Z/\1/' |
  awk -F: '{ t = $1 * 3600 + $2 * 60 + $3; if (NR == 1) first = t; last = t } END { printf "%.3f", last - first }')
report "the reaper's walks: first to last directory emptied in $span s (log timestamps)"
report "directories_emptied $(rmetric "${P}directories_emptied_total"), entries_removed $(rmetric "${P}entries_removed_total"); reaper CPU $((cpu1 - cpu0)) ms; $(memory)"
check "directories_emptied = $DELETE" rmetric_is "${P}directories_emptied_total" "$DELETE"
check "entries_removed = $((DELETE * FILES))" rmetric_is "${P}entries_removed_total" $((DELETE * FILES))
check "the others untouched: $((PODS - DELETE)) pods still known" rmetric_is "${P}pods" $((PODS - DELETE))
report "watch_restarts: $(rmetric "${P}watch_restarts_total")"
check "watch_restarts 0" rmetric_is "${P}watch_restarts_total" 0
report "took $(($(date +%s) - started)) s"
exit "$failed"
