#!/usr/bin/env bash
# Runs one fuzz target for a fixed time (docs/ROBUSTNESS.md):
#
#   fuzz/run.sh review_bytes 600     # 10 minutes
#   fuzz/run.sh pod_template 30      # the CI smoke
#
# The toolchain is stable (rust-toolchain.toml); cargo-fuzz's -Z flags are unlocked with
# RUSTC_BOOTSTRAP=1. No sanitizer by default: our crate is #![forbid(unsafe_code)], the
# fuzzer hunts panics and broken invariants, and ASan would cost over half the execs;
# FUZZ_SANITIZER=address turns it on. New inputs go to fuzz/corpus/<target>/ (ignored by
# git except seed-*), crashes to fuzz/artifacts/<target>/; libFuzzer's last status line
# (execs, coverage, features, corpus) goes to fuzz/last-<target>.txt, the whole log to
# fuzz/last-<target>.log.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh TARGET SECONDS}
seconds=${2:?usage: fuzz/run.sh TARGET SECONDS}
sanitizer=${FUZZ_SANITIZER:-none}
export RUSTC_BOOTSTRAP=1

dict=()
[[ -f dict/$target.dict ]] && dict=(-dict="dict/$target.dict")
[[ $target == review_bytes ]] && dict=(-dict=dict/review.dict)
mkdir -p "corpus/$target" "artifacts/$target"
log=last-$target.log
echo "fuzz: $target for ${seconds}s (sanitizer $sanitizer); libFuzzer output in fuzz/$log"
status=0
cargo fuzz run --sanitizer "$sanitizer" "$target" "corpus/$target" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 "${dict[@]}" >"$log" 2>&1 || status=$?
if (( status )); then
  grep -E -B2 -A30 'panicked|ERROR: libFuzzer|==[0-9]+==ERROR' "$log" | head -80 >&2 || tail -40 "$log" >&2
  echo "fuzz: $target FAILED (exit $status); reproduce with the artifact named above:" >&2
  echo "  RUSTC_BOOTSTRAP=1 cargo fuzz run -s $sanitizer $target fuzz/artifacts/$target/<file>" >&2
fi
{
  echo "target: $target, ${seconds}s, sanitizer $sanitizer, $(date -u +%FT%TZ)"
  grep -E '^#[0-9]+' "$log" | tail -1
  grep -E '^stat::' "$log"
} | tee "last-$target.txt"
exit "$status"
