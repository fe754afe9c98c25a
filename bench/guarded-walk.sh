#!/usr/bin/env bash
# The hook's walk guarded by the node agent's lease (cleaner/src/hold.rs, lease.rs): how
# long it takes to empty N files on tmpfs when the agent answers every question after
# DELAY seconds. The agent is a stand-in (a Python Unix socket that answers `same` to
# every question after DELAY): the point is the walk's pace against the agent's, not the
# agent's own judgement (docs/BENCHMARKS.md, "The walk under the agent's lease").
#
#   bench/guarded-walk.sh OLD_BIN NEW_BIN        each binary is a prestop-clean
#   DELAY=0.08 N=100000 ROUNDS=3 bench/guarded-walk.sh OLD_BIN NEW_BIN
#   DEADLINE=20 ...      the hook's --deadline (a walk that never ends is cut off there)
# Needs: root (a tmpfs in /dev/shm), python3, bc.
set -euo pipefail
N=${N:-100000}
DELAY=${DELAY:-0}
ROUNDS=${ROUNDS:-3}
bins=("$@")
((${#bins[@]} > 0)) || { echo "usage: $0 PRESTOP_CLEAN..." >&2; exit 2; }
work=$(mktemp -d /dev/shm/prestop-guarded-walk.XXXXXX)
agent=$work/agent.sock
DELAY=$DELAY python3 - "$agent" <<'PY' &
import os, socket, sys, threading, time
path = sys.argv[1]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(64)
delay = float(os.environ["DELAY"])
def answer(conn):
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            break
        data += chunk
    time.sleep(delay)
    try:
        conn.sendall(b"same\n")
    finally:
        conn.close()
while True:
    conn, _ = server.accept()
    threading.Thread(target=answer, args=(conn,), daemon=True).start()
PY
stand_in=$!
trap 'kill $stand_in 2>/dev/null; rm -rf "$work"' EXIT
until [[ -S $agent ]]; do sleep 0.05; done
tree() {
  rm -rf "$work/t" # what a cut-off walk left
  mkdir -p "$work/t"
  for d in $(seq 0 $((N / 1000 - 1))); do
    mkdir "$work/t/d$d"
    (cd "$work/t/d$d" && seq 1 1000 | sed 's/^/f/' | xargs touch)
  done
}
for round in $(seq "$ROUNDS"); do
  for bin in "${bins[@]}"; do
    tree
    start=$(date +%s.%N)
    "$bin" hook ${DEADLINE:+--deadline "$DEADLINE"} --node-agent "$agent" --target "$work/t" --host "$work/t" --whole-filesystem \
      2>"$work/err" || true
    end=$(date +%s.%N)
    line=$(grep -v "did not record" "$work/err" | tail -1)
    printf '%s round %s, agent %s s: %.2f s: %s\n' "$bin" "$round" "$DELAY" \
      "$(echo "$end - $start" | bc)" "${line#prestop-clean: }"
  done
done
