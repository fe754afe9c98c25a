#!/usr/bin/env bash
# The agent's and the cleaner's suites, ROUNDS times in a row, with a mount-namespace churn
# and a release build beside them (issue 38: "tests that do not depend on the machine").
# As root (unshare, mounts). Prints one line per round; exits non-zero if any failed.
#
#   scripts/stability-rounds.sh            5 rounds
#   ROUNDS=20 scripts/stability-rounds.sh
#
# The churn: 4 processes at a time entering new mount namespaces, each with a tmpfs bound
# 8 times into itself, for 0.5 s, again and again (what the agent's scan meets on a busy
# node). The build: `cargo build --release -p prestop-clean` of the crate alone, again and
# again, in a target directory of its own.
set -uo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
LOGS=$(mktemp -d /tmp/prestop-stability.XXXXXX)
BUILD_TARGET="$LOGS/release-target"

churn() {
  while true; do
    for _ in 1 2 3 4; do
      unshare -m sh -c 'mount --make-rprivate / 2>/dev/null; d=$(mktemp -d)
        mount -t tmpfs churn "$d"
        for j in 1 2 3 4 5 6 7 8; do mkdir -p "$d/$j"; mount --bind "$d" "$d/$j"; done
        sleep 0.5; umount -R "$d" 2>/dev/null; rmdir "$d"' &
    done
    wait
  done
}
build() {
  while true; do
    CARGO_TARGET_DIR="$BUILD_TARGET" cargo build --release --locked -p prestop-clean >/dev/null 2>&1
    rm -rf "$BUILD_TARGET"/release/.fingerprint/prestop-clean-*
  done
}
churn & CHURN=$!
build & BUILD=$!
trap 'kill $CHURN $BUILD 2>/dev/null; pkill -P $CHURN 2>/dev/null; wait 2>/dev/null' EXIT

failed=0
for round in $(seq "$ROUNDS"); do
  log="$LOGS/round-$round.log"
  PRESTOP_REQUIRE_SHELLS=1 PRESTOP_REQUIRE_CLEANER=1 CARGO_INCREMENTAL=0 \
    cargo test --locked --no-fail-fast -p prestop-clean >"$log" 2>&1
  cleaner=$?
  CARGO_INCREMENTAL=0 cargo test --locked --no-fail-fast --test node_agent_others \
    --test core_node_agent --test reaper_pods_reach --test reaper_busy_node >>"$log" 2>&1
  others=$?
  echo "round $round: prestop-clean $([[ $cleaner == 0 ]] && echo passed || echo FAILED), agent and reaper $([[ $others == 0 ]] && echo passed || echo FAILED); $(grep -c '^test result' "$log") test binaries; failed: $(grep -E '^test .* FAILED' "$log" | tr '\n' ' ')"
  ((cleaner == 0 && others == 0)) || failed=$((failed + 1))
done
echo "$((ROUNDS - failed)) of $ROUNDS rounds passed (logs: $LOGS)"
((failed == 0))
