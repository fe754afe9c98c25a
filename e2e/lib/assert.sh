# The scenario machinery of both e2e suites: run kubectl keeping what it said, record
# expectations, print `ok - …` / `FAIL - …` per scenario and count them. Sourced, not run;
# needs WORK and k() (e2e/lib/cluster.sh). The suite prints `$PASSED passed, $FAILED failed`.

PASSED=0
FAILED=0
FAILS=()
OUT=
ERR=
STATUS=0

# Runs kubectl, keeping its stdout, stderr and exit status for the assertions.
kc() {
  k "$@" >"$WORK/out" 2>"$WORK/err"
  STATUS=$?
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# expect DESCRIPTION COMMAND...: records a failure when the command fails.
expect() {
  local what=$1
  shift
  "$@" || FAILS+=("$what")
}
has() { [[ "$1" == *"$2"* ]]; }
lacks() { [[ "$1" != *"$2"* ]]; }
jqt() { jq -e "$2" >/dev/null 2>&1 <<<"$1"; } # json, filter that must be true

# PRESTOP_E2E_ONLY=REGEX runs only the scenarios whose name matches (hunting one failure).
scenario() { # name function
  if [[ -n "${PRESTOP_E2E_ONLY:-}" ]] && ! [[ "$1" =~ $PRESTOP_E2E_ONLY ]]; then
    return 0
  fi
  FAILS=()
  OUT= ERR= STATUS=0
  local t0
  t0=$(date +%s)
  "$2"
  if ((${#FAILS[@]} == 0)); then
    echo "ok - $1 ($(($(date +%s) - t0)) s)"
    PASSED=$((PASSED + 1))
  else
    echo "FAIL - $1"
    local failure
    for failure in "${FAILS[@]}"; do echo "    expected: $failure"; done
    echo "    last kubectl exit status: $STATUS"
    echo "    last stdout: $(head -c 1500 <<<"$OUT")"
    echo "    last stderr: $(head -c 1500 <<<"$ERR")"
    FAILED=$((FAILED + 1))
  fi
}
skip() { echo "skip - $1 ($2)"; }
