#!/usr/bin/env bash
# Builds the static cleaner program that the hooks and the sidecar run (issue 10):
#   scripts/build-cleaner.sh            -> target/x86_64-unknown-linux-gnu/release-cleaner/prestop-clean
# glibc, linked statically with +crt-static (no musl target can be installed here), with
# the size-tuned [profile.release-cleaner] of the root Cargo.toml. Extra arguments go to
# cargo. Fails when the result has an ELF interpreter (i.e. is not static).
set -euo pipefail
cd "$(dirname "$0")/.."

triple=${CLEANER_TRIPLE:-x86_64-unknown-linux-gnu}
profile=release-cleaner
# --target keeps RUSTFLAGS off build scripts and proc macros, and the output apart from
# the host build's.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  cargo build --locked --profile "$profile" -p prestop-clean --target "$triple" "$@"

bin=${CARGO_TARGET_DIR:-target}/$triple/$profile/prestop-clean
if command -v readelf >/dev/null && readelf -lW "$bin" | grep -q 'Requesting program interpreter'; then
  echo "build-cleaner: $bin has an ELF interpreter: not static" >&2
  exit 1
fi
echo "$bin: $(stat -c %s "$bin") bytes, static"
