#!/usr/bin/env bash
# Robustness checks for CI (issue #6; docs/ROBUSTNESS.md): dependency hygiene with
# cargo-deny and a short smoke run of every fuzz target. Called by .ci/run after the tests.
#
#   .ci/robustness.sh                     # installs the tools when missing
#   FUZZ_SMOKE_SECONDS=60 .ci/robustness.sh
#
# Measured on the 2-core development machine (other builds running): installing
# cargo-fuzz ~40 s, cargo-deny ~5 min (cached afterwards in ~/.cargo/bin); building the
# fuzz targets from cold ~4 min; the smoke 2 x 30 s. The long runs (10 minutes per
# target) and the soak are not for CI: see docs/ROBUSTNESS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
CARGO_DENY_VERSION=0.20.2
SMOKE=${FUZZ_SMOKE_SECONDS:-30}
export CARGO_TERM_COLOR=never

step() { echo "== $* ($(date +%T))"; }
install() { # binary crate version
  if ! command -v "$1" >/dev/null || ! "$1" --version 2>/dev/null | grep -q "$3"; then
    step "install $2 $3"
    local t0=$SECONDS
    cargo install --locked "$2" --version "$3"
    echo "   installed $2 in $(( SECONDS - t0 )) s"
  fi
}
install cargo-deny cargo-deny "$CARGO_DENY_VERSION"
install cargo-fuzz cargo-fuzz "$CARGO_FUZZ_VERSION"

step "cargo deny: licenses, bans, sources (blocking)"
cargo deny --locked check licenses bans sources
step "cargo deny: advisories (reported, not blocking)"
if ! cargo deny --locked check advisories; then
  echo "::warning::cargo deny found advisories (or could not fetch the advisory database); not blocking"
fi

step "fuzz: build the targets (stable toolchain, RUSTC_BOOTSTRAP=1 for cargo-fuzz's -Z flags)"
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none)
for target in $(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list); do
  step "fuzz: $target for ${SMOKE}s"
  fuzz/run.sh "$target" "$SMOKE"
done
step "robustness checks passed"
