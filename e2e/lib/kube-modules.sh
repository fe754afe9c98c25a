# Builds Kubernetes binaries of a release the Go module proxy serves (1.37.2 today) from
# the `k8s.io/kubernetes` module, with the machine's Go (/usr/local/go, 1.26). Sourced, not
# run; the caller defines log(). Root on Debian bookworm.
#
# The module's go.mod replaces its staging modules (k8s.io/api, k8s.io/kubelet, …) with
# ./staging/src/k8s.io/X, folders a module zip does not carry; the build tree is a
# writable copy of the module whose replaces point at the published v0.<minor>.<patch>
# modules of the same release instead (and without its go.work, which names the same
# folders). Everything is fetched through `go`, nothing else.
# shellcheck shell=bash

KUBE_MODULES_GO=${PRESTOP_E2E_GO:-/usr/local/go/bin/go}

# The staging modules' version for a release: 1.37.2 -> v0.37.2.
kube_modules_staging_version() { # version (1.37.2)
  echo "v0.${1#*.}"
}

# The Go environment of one version's build, all below DIR: its module cache and build
# cache, kept between runs so a rebuild (or a newer binary of the same release) reuses them.
kube_modules_env() { # dir
  export GOMODCACHE="$1/mod" GOCACHE="$1/gocache" GOPATH="$1/gopath"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
}

# Downloads k8s.io/kubernetes@vVERSION into DIR's module cache and makes DIR/tree a
# writable copy of it whose go.mod points the staging modules at the published ones.
kube_modules_tree() { # dir version
  local dir=$1 version=$2 staging mod tree=$1/tree
  staging=$(kube_modules_staging_version "$version")
  if [[ -f "$tree/.prestop-tree-v$version" ]]; then
    return 0
  fi
  log "downloading k8s.io/kubernetes@v$version"
  mod=$("$KUBE_MODULES_GO" mod download -json "k8s.io/kubernetes@v$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$mod" && -f "$mod/go.mod" ]] || { log "k8s.io/kubernetes@v$version: no module directory"; return 1; }
  rm -rf "$tree" "$tree.tmp"
  cp -r "$mod" "$tree.tmp"
  chmod -R u+w "$tree.tmp"
  rm -f "$tree.tmp/go.work" "$tree.tmp/go.work.sum"
  # `k8s.io/X => ./staging/src/k8s.io/X` -> `k8s.io/X => k8s.io/X v0.37.2`; a staging
  # module the main module does not require (sample-controller, …, which the proxy does
  # not serve) loses its line, so `go` never asks for it.
  local m line
  while read -r m; do
    if grep -Eq "^[[:space:]]+$m v0\.0\.0\$" "$tree.tmp/go.mod"; then
      line="$m => $m $staging"
    else
      line=""
    fi
    sed -i "s#^\([[:space:]]*\)$m => ./staging/src/$m\$#\1$line#" "$tree.tmp/go.mod"
  done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$tree.tmp/go.mod")
  if grep -q '=> ./staging' "$tree.tmp/go.mod"; then
    log "go.mod still names ./staging:"; grep '=> ./staging' "$tree.tmp/go.mod" >&2; return 1
  fi
  # The published modules' sums go into go.sum (-mod=mod; checked against the checksum
  # database).
  (cd "$tree.tmp" && "$KUBE_MODULES_GO" list -deps ./cmd/kubelet >/dev/null) || {
    log "the rewritten module does not resolve"; return 1
  }
  touch "$tree.tmp/.prestop-tree-v$version"
  mv "$tree.tmp" "$tree"
}

# The -ldflags hack/lib/version.sh gives a release build, so `--version` and /version say
# vVERSION (without git metadata they would say v0.0.0-master).
kube_modules_ldflags() { # version
  local version=$1 major minor key val flags="-s -w"
  major=${version%%.*}
  minor=${version#*.}
  minor=${minor%%.*}
  for kv in "gitVersion=v$version" "gitMajor=$major" "gitMinor=$minor" \
    "gitTreeState=clean" "gitCommit=module-k8s.io/kubernetes@v$version" \
    "buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; do
    key=${kv%%=*} val=${kv#*=}
    flags+=" -X k8s.io/client-go/pkg/version.$key=$val -X k8s.io/component-base/version.$key=$val"
  done
  echo "$flags"
}

# Builds the named commands (cmd/<name>) in DIR/tree, statically, and installs each as
# CACHE/<name>-vVERSION, atomically (a temp name, then a rename) after it has answered
# `--version` with `Kubernetes vVERSION`.
kube_modules_build() { # dir cache version name...
  local dir=$1 cache=$2 version=$3 name ldflags tmp
  shift 3
  ldflags=$(kube_modules_ldflags "$version")
  for name in "$@"; do
    tmp="$cache/$name-v$version.tmp.$$"
    log "go build cmd/$name v$version"
    (cd "$dir/tree" && nice -n 10 "$KUBE_MODULES_GO" build -trimpath \
      -tags selinux,notest,grpcnotrace -ldflags "$ldflags" -o "$tmp" "./cmd/$name") || {
      rm -f "$tmp"; return 1
    }
    if ! "$tmp" --version 2>/dev/null | grep -qx "Kubernetes v$version"; then
      log "$name: --version says $("$tmp" --version 2>&1 | head -n1), not Kubernetes v$version"
      rm -f "$tmp"
      return 1
    fi
    mv "$tmp" "$cache/$name-v$version"
  done
}
