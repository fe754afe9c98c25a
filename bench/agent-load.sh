#!/usr/bin/env bash
# The node agent under load (issue 31: "measure its CPU and memory on a node";
# docs/BENCHMARKS.md, "The node agent"). Starts the release `prestop-clean node-agent` on
# a node tree of its own (a directory of this machine standing in for the node's /),
# then $CLIENTS client processes ask it $REQUESTS times each, as cleaners do (one
# connection per request, the opened directory passed over SCM_RIGHTS), and prints:
# requests/s, the answer latency (p50, p99, max) seen by the clients, the agent's CPU
# time per 1,000 requests and its peak RSS (VmHWM), and its idle RSS before the load.
#
# Since issue 31 every `same` also reads the mountinfo of every process on the node ("does
# another container use it?"): CONTAINERS=N first starts N processes, each in a mount
# namespace of its own chrooted into a tmpfs (as a container's), so that the node has
# N more mount tables to read; with root and unshare only.
#
# HOSTILE_MOUNTS=M HOSTILE_PROCESSES=P adds the pod of issue 38 (finding 5): one container
# (a mount namespace chrooted into a tmpfs) whose one directory is bind-mounted M times at
# long paths (about 1 KiB a line, as an emptyDir mounted that often by a pod's spec: some
# 1 MB of mountinfo at 1,000) and that runs P idle processes. Its tables are large and
# all alike: the agent should read one of them per judgement, not P. Answers other than
# `same` (`refused` when a judgement misses the agent's 3 s deadline) are counted, not
# fatal, so that the cost of an agent that reads every process can be shown too.
#
# The agent the installs run is `prestop-injector node-agent` (the same agent, which can
# also ask the API server whether a pod is ending): pass that binary to measure it; it is
# given a node name and a kubeconfig that names no reachable server (these questions do
# not ask whether a pod is ending, so it never connects).
#
# Usage: bench/agent-load.sh [PRESTOP_CLEAN]   (default: target/release/prestop-clean)
#        bench/agent-load.sh target/release/prestop-injector
#        CLIENTS=8 REQUESTS=2000 CONTAINERS=200 bench/agent-load.sh
#        CLIENTS=1 REQUESTS=200 HOSTILE_MOUNTS=1000 HOSTILE_PROCESSES=400 bench/agent-load.sh
#        PODS=2 CLIENTS=16 ... bench/agent-load.sh   the clients in 2 cgroups named as the
#                                                    kubelet names pods' (cgroup v2, root), so
#                                                    that they hold all 16 judging turns (one
#                                                    pod holds at most 8 places)
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-${PRESTOP_CLEAN:-target/release/prestop-clean}}
CLIENTS=${CLIENTS:-4}
CONTAINERS=${CONTAINERS:-0}
REQUESTS=${REQUESTS:-2000}
HOSTILE_MOUNTS=${HOSTILE_MOUNTS:-0}
HOSTILE_PROCESSES=${HOSTILE_PROCESSES:-0}
PODS=${PODS:-0}
[[ -x "$BIN" ]] || { echo "no $BIN: cargo build --release -p prestop-clean, or pass its path" >&2; exit 2; }

DIR=$(mktemp -d /tmp/prestop-agent-load.XXXXXX)
AGENT=""
SLEEPERS=()
cleanup() {
  [[ -n "$AGENT" ]] && kill "$AGENT" 2>/dev/null
  ((${#SLEEPERS[@]})) && kill "${SLEEPERS[@]}" 2>/dev/null
  # The hostile pod's processes, by the pids its shell wrote.
  [[ -s "$DIR/out/hostile.pids" ]] && kill -KILL $(cat "$DIR/out/hostile.pids") 2>/dev/null
  wait 2>/dev/null || true
  [[ -n "${POD_CGROUPS:-}" ]] && rmdir "$POD_CGROUPS"/kubepods/besteffort/pod* "$POD_CGROUPS"/kubepods/besteffort "$POD_CGROUPS"/kubepods "$POD_CGROUPS" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT
mkdir -p "$DIR/node/mnt/scratch/job"
busybox=$(command -v busybox || true)
for i in $(seq "$CONTAINERS"); do
  [[ -n "$busybox" ]] || { echo "CONTAINERS needs a static busybox" >&2; exit 2; }
  mkdir -p "$DIR/roots/$i"
  unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs rootfs "$1" &&
    mkdir "$1/bin" && cp "$2" "$1/bin/busybox" && exec chroot "$1" /bin/busybox sleep 3600' \
    sh "$DIR/roots/$i" "$busybox" &
  SLEEPERS+=("$!")
done
if ((HOSTILE_PROCESSES > 0)); then
  [[ -n "$busybox" ]] || { echo "HOSTILE_PROCESSES needs a static busybox" >&2; exit 2; }
  mkdir -p "$DIR/hostile" "$DIR/out"
  # One namespace, entered as runtimes do: pivot_root into the container's root and the
  # node's mounts detached, so that its tables hold its own mounts only. $DIR/out (beside
  # the node tree: no use of it) is bound at /out for the pids.
  unshare -m sh -c '
    set -e
    r=$1 busybox=$2 mounts=$3 processes=$4 out=$5
    mount --make-rprivate /
    mount -t tmpfs hostile "$r"
    mkdir -p "$r/bin" "$r/out" "$r/.old" "$r/dev"; cp "$busybox" "$r/bin/busybox"
    mount --bind "$out" "$r/out"
    # sh gives its background jobs /dev/null for stdin.
    touch "$r/dev/null"; mount --bind /dev/null "$r/dev/null"
    long=$(printf "%0200d" 0 | tr 0 v)/$(printf "%0150d" 0 | tr 0 w)
    mkdir -p "$r/var/lib/kubelet/pods/volumes/kubernetes.io~empty-dir/$long"
    i=0
    while [ "$i" -lt "$mounts" ]; do
      point="$r/data/$long/$(printf "%0100d" 0 | tr 0 m)-$i"
      mkdir -p "$point"
      mount --bind "$r/var/lib/kubelet/pods/volumes/kubernetes.io~empty-dir/$long" "$point"
      i=$((i + 1))
    done
    cd "$r"
    pivot_root . .old
    exec /bin/busybox sh -c "
      set -e
      /bin/busybox umount -l /.old
      i=0
      while [ \$i -lt $processes ]; do
        /bin/busybox sleep 3600 &
        echo \$! >> /out/hostile.pids
        i=\$((i + 1))
      done
      echo ready > /out/hostile.ready
      wait"' sh "$DIR/hostile" "$busybox" "$HOSTILE_MOUNTS" "$HOSTILE_PROCESSES" "$DIR/out" &
  SLEEPERS+=("$!")
  for _ in $(seq 600); do [[ -e "$DIR/out/hostile.ready" ]] && break; sleep 0.1; done
  [[ -e "$DIR/out/hostile.ready" ]] || { echo "the hostile pod did not start" >&2; exit 1; }
fi
sleep 1
AGENT_ARGS=()
if [[ "$(basename "$BIN")" == prestop-injector ]]; then
  printf '%s\n' 'apiVersion: v1' 'kind: Config' \
    'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]' \
    'users: [{name: u, user: {token: unused}}]' \
    'contexts: [{name: c, context: {cluster: c, user: u}}]' 'current-context: c' >"$DIR/kubeconfig"
  AGENT_ARGS=(--node-name bench)
  export KUBECONFIG="$DIR/kubeconfig"
fi
"$BIN" node-agent "${AGENT_ARGS[@]}" --host-root "$DIR/node" --socket "$DIR/agent.sock" --allow /mnt/scratch \
  2>"$DIR/agent.log" &
AGENT=$!
for _ in $(seq 100); do grep -q serving "$DIR/agent.log" 2>/dev/null && break; sleep 0.05; done
grep -q serving "$DIR/agent.log" || { cat "$DIR/agent.log" >&2; exit 1; }

status() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$AGENT/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$AGENT/stat"; }
idle_rss=$(status VmRSS)
ticks_before=$(cpu_ticks)

# PODS=N: N cgroups named as the kubelet names a pod's (…/kubepods/besteffort/pod<uid>),
# the clients spread over them: the agent gives each pod at most 8 of its 16 turns.
pod_cgroups=()
if ((PODS > 0)); then
  # cgroup v2, or v2's hierarchy on a hybrid host, or v1's pids (as e2e/reaper does).
  for base in /sys/fs/cgroup/unified /sys/fs/cgroup/pids /sys/fs/cgroup; do
    [[ -f "$base/cgroup.procs" ]] && mkdir "$base/prestop-bench-$$" 2>/dev/null &&
      POD_CGROUPS="$base/prestop-bench-$$" && break
  done
  [[ -n "${POD_CGROUPS:-}" ]] || { echo "PODS needs a writable cgroup hierarchy (root)" >&2; exit 2; }
  for i in $(seq "$PODS"); do
    cg="$POD_CGROUPS/kubepods/besteffort/pod$(cat /proc/sys/kernel/random/uuid)"
    mkdir -p "$cg" || { echo "cannot make $cg" >&2; exit 2; }
    pod_cgroups+=("$cg")
  done
fi

python3 - "$DIR" "$CLIENTS" "$REQUESTS" "${pod_cgroups[@]}" <<'PY'
import os, socket, statistics, sys, time
from multiprocessing import Pool

d, clients, requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pods = sys.argv[4:]
host = b"/mnt/scratch/job"
line = b"prestop-identity 1 %d %s\n" % (len(host), host)

def client(n):
    if pods:
        with open(f"{pods[n % len(pods)]}/cgroup.procs", "w") as procs:
            procs.write(str(os.getpid()))
    job = os.open(f"{d}/node/mnt/scratch/job", os.O_RDONLY | os.O_DIRECTORY)
    latencies, busy, other = [], 0, 0
    for _ in range(requests):
        start = time.monotonic()
        s = socket.socket(socket.AF_UNIX)
        s.connect(f"{d}/agent.sock")
        socket.send_fds(s, [line], [job])
        answer = s.recv(4096)
        s.close()
        latencies.append(time.monotonic() - start)
        if answer == b"busy\n":
            busy += 1
        elif answer != b"same\n":
            other += 1
            if not answer.startswith(b"refused"):
                # Not SystemExit: a pool worker that exits hangs the pool.
                raise RuntimeError(f"unexpected answer {answer!r}")
    return latencies, busy, other

start = time.monotonic()
with Pool(clients) as pool:
    results = pool.map(client, range(clients))
elapsed = time.monotonic() - start
latencies = sorted(l for ls, _, _ in results for l in ls)
busy = sum(b for _, b, _ in results)
refused = sum(r for _, _, r in results)
total = len(latencies)
q = lambda p: latencies[min(total - 1, int(p * total))] * 1e3
print(f"requests: {total} from {clients} clients in {elapsed:.2f} s: {total / elapsed:.0f}/s, busy {busy}, refused {refused}")
print(f"latency ms: p50 {q(0.50):.2f}  p99 {q(0.99):.2f}  max {latencies[-1] * 1e3:.2f}")
with open(f"{d}/requests", "w") as f:
    f.write(str(total))
PY

ticks=$(( $(cpu_ticks) - ticks_before ))
hz=$(getconf CLK_TCK)
total=$(cat "$DIR/requests")
awk -v t="$ticks" -v hz="$hz" -v n="$total" \
  'BEGIN { printf "agent CPU: %.1f ms per 1,000 requests (%.2f s in all)\n", t / hz * 1000 / n * 1000, t / hz }'
echo "agent RSS: idle ${idle_rss} kB, peak $(status VmHWM) kB"
echo "processes on the machine: $(find /proc -maxdepth 1 -name '[0-9]*' | wc -l) ($CONTAINERS containers started)"
if ((HOSTILE_PROCESSES > 0)); then
  echo "hostile pod: $HOSTILE_PROCESSES processes x $HOSTILE_MOUNTS mounts, $(wc -c < "/proc/$(head -1 "$DIR/out/hostile.pids")/mountinfo") bytes of mountinfo each"
fi
