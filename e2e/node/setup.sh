#!/usr/bin/env bash
# Installs and builds what the node suite needs, once per machine; idempotent (a second
# run only checks). Runs as root on Debian bookworm (CI's image), after e2e/setup.sh
# (whose kube-apiserver and source tarball it reuses).
#   - Debian packages: containerd 1.6, runc, containernetworking-plugins (bridge,
#     host-local, loopback), busybox-static and bash-static (image contents), gcc and
#     libc6-dev (the static pause and writer programs), iproute2, strace (the traffic check),
#     iptables, ipset, conntrack (kube-proxy, for e2e/install);
#   - kubelet, kube-controller-manager, kube-scheduler v1.20.2 (build-kube.sh, cached in
#     $PRESTOP_E2E_CACHE, default /var/cache/prestop-e2e).
# Nothing is started or enabled as a service.
set -euo pipefail
cd "$(dirname "$0")"

log() { echo "e2e/node/setup: $*" >&2; }

export DEBIAN_FRONTEND=noninteractive
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
  need+=(containernetworking-plugins)
[[ -x /bin/busybox ]] && /bin/busybox --list >/dev/null 2>&1 || need+=(busybox-static)
[[ -x /bin/bash-static ]] || need+=(bash-static)
command -v gcc >/dev/null || need+=(gcc)
[[ -f /usr/lib/x86_64-linux-gnu/libc.a ]] || need+=(libc6-dev)
command -v ip >/dev/null || need+=(iproute2)
command -v strace >/dev/null || need+=(strace)
command -v python3 >/dev/null || need+=(python3)
# kube-proxy (e2e/install): iptables; ipset and conntrack for its --cleanup and UDP flows.
command -v iptables >/dev/null || need+=(iptables)
command -v ipset >/dev/null || need+=(ipset)
command -v conntrack >/dev/null || need+=(conntrack)
if ((${#need[@]})); then
  log "installing ${need[*]}"
  apt-get update -qq
  # The suite runs its own containerd with its own config; the package's unit is not used.
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if file -L /bin/busybox 2>/dev/null | grep -q dynamically; then
  log "/bin/busybox is not static (install busybox-static)"
  exit 1
fi

# 1.20.2 from Debian's source package; any other version (PRESTOP_E2E_KUBE_VERSION,
# issue 41) from the Go module proxy, all five binaries at once (kube-apiserver too).
# shellcheck source=../lib/kube-version.sh
source ../lib/kube-version.sh
if [[ "$KUBE_VERSION" == "$KUBE_DEBIAN_VERSION" ]]; then
  bash ./build-kube.sh
else
  bash ../setup-latest.sh "$KUBE_VERSION" >/dev/null
fi
