# What the two suites on the real node share around their scenarios (e2e/node/run.sh and
# e2e/install/run.sh): the EXIT trap that always tears the node and control plane down,
# and the checked teardown that ends a run. Sourced after lib/node.sh and
# e2e/lib/cluster.sh; uses their HOST, WORK, PASSED and FAILED.
#
# A suite may define suite_before_stop (run before the node stops, e.g. deleting the
# controllers that would recreate pods) and suite_after_stop (after it, e.g. removing a
# bridge it made); both are optional.

TEARDOWN_CHECKED=0

suite_cleanup() {
  local m
  declare -F suite_before_stop >/dev/null && suite_before_stop
  node_stop
  # A run that stopped early (a failed start, ^C) still checks what the node left.
  if ((!TEARDOWN_CHECKED)) && ((${#NODE_SYSCTLS_SAVED[@]})); then
    TEARDOWN_CHECKED=1
    node_teardown_check >&2
  fi
  declare -F suite_after_stop >/dev/null && suite_after_stop
  # Mounts a scenario planted (and did not get to remove).
  for m in $(node_mounts_below "$HOST"); do umount "$m" 2>/dev/null || umount -l "$m"; done
  cluster_stop
  remove_work "$WORK" "$HOST"
}

suite_finish() {
  local rc=$?
  suite_cleanup
  exit "$rc"
}

# Installs the traps: teardown on every exit, ^C and TERM included.
suite_traps() {
  trap suite_finish EXIT
  trap 'exit 130' INT TERM
}

# The end of a run: the node stopped and its teardown checked, counted as one more test.
suite_teardown_checked() {
  node_stop
  TEARDOWN_CHECKED=1
  if node_teardown_check; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
}
