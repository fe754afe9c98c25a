#!/usr/bin/env bash
# Builds the two programs of the release image, both static, and installs them into OUT:
#   OUT/prestop-injector   the webhook and reaper (release profile)
#   OUT/prestop-clean      the cleaner program (scripts/build-cleaner.sh, release-cleaner)
#
#   scripts/build-binaries.sh OUT
#
# One recipe for the Dockerfile's builder stage and for scripts/build-image.sh (CI, no
# network), so both images carry the same binaries. Static glibc (`+crt-static` on the
# host's gnu triple; no musl target can be installed offline): pure Rust and ring link
# statically, and nothing here resolves names through NSS (the in-cluster client dials
# KUBERNETES_SERVICE_HOST, an IP). Fails when either result has an ELF interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:?usage: build-binaries.sh OUT}
triple=${CLEANER_TRIPLE:-$(rustc -vV | sed -n 's/^host: //p')}
target_dir=${CARGO_TARGET_DIR:-target}

# --target keeps RUSTFLAGS off build scripts and proc macros.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
  cargo build --locked --release --bin prestop-injector --target "$triple" >&2
CLEANER_TRIPLE="$triple" bash scripts/build-cleaner.sh >&2

mkdir -p "$out"
install -m 0555 "$target_dir/$triple/release/prestop-injector" "$out/prestop-injector"
install -m 0555 "$target_dir/$triple/release-cleaner/prestop-clean" "$out/prestop-clean"
# The release profile keeps line tables for backtraces in a debugger: ~60 MB of the
# webhook's 70; the image ships without them (symbols stay for panics' backtraces).
command -v strip >/dev/null && strip --strip-debug "$out/prestop-injector"
for bin in "$out/prestop-injector" "$out/prestop-clean"; do
  # An interpreter (ld-linux) would not exist in the image's empty root.
  if command -v readelf >/dev/null && readelf -lW "$bin" | grep -q 'Requesting program interpreter'; then
    echo "build-binaries: $bin has an ELF interpreter: not static" >&2
    exit 1
  fi
done
echo "build-binaries: $(stat -c '%n %s' "$out/prestop-injector" "$out/prestop-clean" | tr '\n' ' ')" >&2
