#!/usr/bin/env bash
# The cleaner side by side with the fastest rm (issue 28; docs/BENCHMARKS.md, "The cleaner
# side by side with rm and rmz"): on the same generated trees, one after the other,
#   rm          GNU rm -rf
#   rmz         rmz (crates.io, parallel), installed with `cargo install --locked` into
#               $BENCH_CACHE/rmz-$RMZ_VERSION, outside the clone, reused when present
#   prestop     our release prestop-clean, as a hook runs it, identity check included:
#               on the disk `hook --target T --host T` in a private mount namespace where
#               T is bind-mounted onto itself (its mount's root is its whole host path);
#               on tmpfs the bench's tmpfs, which holds only the tree, is the target as a
#               whole filesystem (`--whole-filesystem`, like an emptyDir in memory)
# Trees (1-byte files, a tenth of them dot-files): tree = directories of 1,000 files;
# flat = every file in one directory; deep = a chain of directories with 100 files each
# (1,000 levels for 100k files). Before each run the page cache is dropped
# (`sync; echo 3 > /proc/sys/vm/drop_caches`); medians of $RUNS runs, peak RSS
# (/usr/bin/time %M), files/s, and the ratios of the median times.
#
# Usage (as root): bench/rm-side-by-side.sh          the full set (hours on a slow disk)
#                  SMOKE=1 bench/rm-side-by-side.sh  10,000 files, tmpfs, one run: seconds
#                  (CI runs it with CONTENDERS="rm prestop" and the release binary: the
#                  bench is not in CI, but it must keep working)
# Environment:
#   CELLS="tmpfs:tree:100000 disk:flat:100000 …"   what to run (fs:shape:files); default:
#        tree at 100k and 1M, flat and deep at 100k and 1M, on tmpfs and on the disk
#   RUNS=3                 runs per contender and cell (rounds interleave the contenders)
#   CONTENDERS="rm rmz prestop"
#   DISK_DIR=/var/tmp/prestop-bench   where the disk cells' trees go (the root disk here)
#   BENCH_CACHE=/var/cache/prestop-bench  rmz's install; RMZ_VERSION=3.2.1
#   PRESTOP_CLEAN=path     our binary (default: built with cargo build --release)
#   PRESTOP_CLEAN_JOBS     passed through to our program (default: its own default)
#   OUT=file               also write the table there
# Needs: root, python3, unshare, mount, /usr/bin/time (Debian `time`), cargo for rmz.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-3}
CONTENDERS=${CONTENDERS:-rm rmz prestop}
RMZ_VERSION=${RMZ_VERSION:-3.2.1}
BENCH_CACHE=${BENCH_CACHE:-/var/cache/prestop-bench}
DISK_DIR=${DISK_DIR:-/var/tmp/prestop-bench}
if [ "${SMOKE:-0}" = 1 ]; then
  CELLS=${CELLS:-"tmpfs:tree:10000 tmpfs:flat:10000 tmpfs:deep:10000"}
  RUNS=${RUNS_SMOKE:-1}
else
  CELLS=${CELLS:-"tmpfs:tree:100000 disk:tree:100000 tmpfs:tree:1000000 disk:tree:1000000
    tmpfs:flat:100000 disk:flat:100000 tmpfs:deep:100000 disk:deep:100000
    tmpfs:flat:1000000 tmpfs:deep:1000000"}
fi

[ "$(id -u)" = 0 ] || { echo "run as root (drop_caches, mount namespaces)" >&2; exit 2; }
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null

# Everything below runs in a private mount namespace: the tmpfs goes with it.
if [ "${_PRESTOP_BENCH_NS:-}" != 1 ]; then
  export _PRESTOP_BENCH_NS=1
  exec unshare -m --propagation private "$0" "$@"
fi

RMZ=$BENCH_CACHE/rmz-$RMZ_VERSION/bin/rmz
if [[ " $CONTENDERS " == *" rmz "* ]] && ! [ -x "$RMZ" ]; then
  echo "installing rmz $RMZ_VERSION into $BENCH_CACHE/rmz-$RMZ_VERSION" >&2
  nice cargo install --quiet --locked "rmz@$RMZ_VERSION" --root "$BENCH_CACHE/rmz-$RMZ_VERSION"
fi
if [ -z "${PRESTOP_CLEAN:-}" ]; then
  (cd "$ROOT" && nice cargo build --quiet --release -p prestop-clean)
  PRESTOP_CLEAN=${CARGO_TARGET_DIR:-$ROOT/target}/release/prestop-clean
fi

WORK=$(mktemp -d /tmp/prestop-rm-bench.XXXXXX)
mkdir -p "$WORK/tmpfs" "$DISK_DIR"
mount -t tmpfs -o size=80% tmpfs "$WORK/tmpfs"
RESULTS=$WORK/results.tsv
# The node agent, as the reaper DaemonSet runs it (docs/INSTALL.md, "The node agent"):
# the tmpfs target is a filesystem of its own, which the cleaner empties only on the
# node's word. Its one check per run is in the time measured.
AGENT_SOCKET=$WORK/agent.sock
"$PRESTOP_CLEAN" node-agent --host-root / --socket "$AGENT_SOCKET" 2>"$WORK/agent.log" &
AGENT_PID=$!
# TIMED OUT ARGV…: runs ARGV, writes "seconds peak-RSS-KiB" to OUT. The seconds from a
# monotonic clock (GNU time's %e has 10 ms steps, 5 % of a 0.2 s cell), the peak RSS
# from GNU time (%M): its child starts from a small process, where Python's would
# inherit Python's high-water mark through the fork.
TIMED=$WORK/timed.py
cat >"$TIMED" <<'EOF'
import subprocess, sys, time
out = sys.argv[1]
start = time.monotonic()
status = subprocess.call(["/usr/bin/time", "-o", out + ".rss", "-f", "%M"] + sys.argv[2:])
seconds = time.monotonic() - start
with open(out, "w") as f:
    f.write(f"{seconds:.4f} {open(out + '.rss').read().split()[-1]}\n")
sys.exit(status)
EOF
trap 'kill "$AGENT_PID" 2>/dev/null; rm -rf "$DISK_DIR/tree" 2>/dev/null; umount "$WORK/tmpfs"; rm -rf "$WORK"' EXIT
for _ in $(seq 50); do [ -S "$AGENT_SOCKET" ] && break; sleep 0.1; done
[ -S "$AGENT_SOCKET" ] || { cat "$WORK/agent.log" >&2; echo "the node agent did not start" >&2; exit 1; }

# make_tree DIR FILES SHAPE
make_tree() {
  python3 - "$@" <<'EOF'
import os, sys
root, files, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.mkdir(root)
W = os.O_WRONLY | os.O_CREAT | os.O_EXCL

def fill(dfd, start, n):
    for i in range(start, start + n):
        fd = os.open((".f%d" if i % 10 == 0 else "f%d") % i, W, 0o644, dir_fd=dfd)
        os.write(fd, b"x")
        os.close(fd)

top = os.open(root, os.O_DIRECTORY)
if shape == "flat":
    fill(top, 0, files)
elif shape == "tree":
    for d in range((files + 999) // 1000):
        os.mkdir("d%d" % d, dir_fd=top)
        sub = os.open("d%d" % d, os.O_DIRECTORY, dir_fd=top)
        fill(sub, d * 1000, min(1000, files - d * 1000))
        os.close(sub)
elif shape == "deep":
    # By descriptor: the path outgrows PATH_MAX.
    fd = top
    for d in range((files + 99) // 100):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_DIRECTORY, dir_fd=fd)
        if fd != top:
            os.close(fd)
        fd = sub
        fill(fd, d * 100, min(100, files - d * 100))
else:
    sys.exit("unknown shape " + shape)
EOF
}

# run_one CONTENDER TREE → "seconds kib" on stdout (exits the script on a failure)
run_one() {
  local who=$1 tree=$2 out
  out=$WORK/time.out
  sync
  echo 3 > /proc/sys/vm/drop_caches
  case $who in
    rm) python3 "$TIMED" "$out" rm -rf "$tree" ;;
    rmz) python3 "$TIMED" "$out" "$RMZ" --force "$tree" ;;
    prestop)
      # The identity check as in a pod. On the disk: the target is a bind mount whose
      # root is its own whole host path (the root filesystem is mounted at /). On tmpfs:
      # the bench's tmpfs holds nothing but the tree, and is the target as a whole
      # filesystem (--whole-filesystem, as an emptyDir of medium Memory), so the tree
      # directory itself is one more entry removed. Timed: the program alone.
      if [ "$tree" = "$WORK/tmpfs/tree" ]; then
        set -- "$WORK/tmpfs" --whole-filesystem
      else
        set -- "$tree"
      fi
      unshare -m --propagation private sh -c '
        t=$1 out=$2 bin=$3 agent=$4 timed=$5; shift 5
        [ "$#" = 0 ] || [ "$1" != --whole-filesystem ] && mount --bind "$t" "$t"
        exec python3 "$timed" "$out" "$bin" hook --node-agent "$agent" --target "$t" --host "$t" "$@"
      ' sh "$1" "$out" "$PRESTOP_CLEAN" "$AGENT_SOCKET" "$TIMED" "${@:2}" >"$WORK/prestop.err" 2>&1 || {
        cat "$WORK/prestop.err" >&2
        exit 1
      }
      [ "$1" != "$tree" ] || rmdir "$tree" ;;
  esac
  if [ -e "$tree" ]; then
    echo "$who left $tree behind" >&2
    exit 1
  fi
  cat "$out"
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
: >"$RESULTS"
for cell in $CELLS; do
  IFS=: read -r fs shape files <<<"$cell"
  case $fs in
    tmpfs) base=$WORK/tmpfs ;;
    disk) base=$DISK_DIR ;;
    *) echo "unknown filesystem $fs" >&2; exit 2 ;;
  esac
  for run in $(seq "$RUNS"); do
    for who in $CONTENDERS; do
      tree=$base/tree
      rm -rf "$tree"
      make_tree "$tree" "$files" "$shape"
      load=$(cut -d' ' -f1 /proc/loadavg)
      run_one "$who" "$tree" >"$WORK/one"
      read -r seconds kib <"$WORK/one"
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$fs" "$shape" "$files" "$who" "$seconds" "$kib" "$load" | tee -a "$RESULTS" >&2
    done
  done
done

python3 - "$RESULTS" "$CONTENDERS" <<'EOF' | tee "${OUT:-/dev/null}"
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
who_order = sys.argv[2].split()
cells = {}
for fs, shape, files, who, secs, kib, load in rows:
    cells.setdefault((fs, shape, int(files)), {}).setdefault(who, []).append((float(secs), int(kib), float(load)))
print("| filesystem | shape | files | " + " | ".join(f"{w} median s (files/s, peak RSS)" for w in who_order)
      + " | prestop vs rmz | prestop vs rm | load |")
print("|---|---|---|" + "---|" * len(who_order) + "---|---|---|")
for (fs, shape, files), by in cells.items():
    med = {w: statistics.median(s for s, _, _ in v) for w, v in by.items()}
    cols = []
    for w in who_order:
        if w not in by:
            cols.append("–")
            continue
        rss = max(k for _, k, _ in by[w]) / 1024
        cols.append(f"{med[w]:.3f} s ({files / max(med[w], 1e-3):,.0f}/s, {rss:.1f} MiB)")
    def ratio(other):
        if "prestop" in med and other in med:
            return f"{med[other] / max(med['prestop'], 1e-3):.2f}×"
        return "–"
    loads = [l for v in by.values() for _, _, l in v]
    print(f"| {fs} | {shape} | {files:,} | " + " | ".join(cols)
          + f" | {ratio('rmz')} | {ratio('rm')} | {min(loads):.1f}–{max(loads):.1f} |")
EOF
