# The Kubernetes v1.20.2 source tree both e2e builds compile: e2e/setup.sh (kube-apiserver)
# and e2e/node/build-kube.sh (kubelet, kube-controller-manager, kube-scheduler). No
# registry reachable from CI ships these binaries, but Debian bookworm's `kubernetes`
# source package is the full upstream tree with vendor/, which Debian's Go builds
# offline. Sourced, not run; the caller defines log(). Root on Debian bookworm.
# shellcheck shell=bash

KUBE_REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
# The Go that builds the v1.20.2 tree: Debian's 1.19, never whatever `go` is on PATH (the
# polyglot machines carry Go 1.26, which the 2021 tree and its vendored modules predate).
KUBE_GO_1_20=/usr/lib/go-1.19/bin/go

# Downloads the source package into DIR unless its tarball is there: a deb-src entry for
# bookworm (and its security suite, which carries the deb12u1 revision) for this download
# only — every later `apt-get update` would fetch the Sources indexes again for nothing.
kube_source_fetch() { # dir
  local dir=$1 debsrc rc
  ls "$dir"/kubernetes_*.orig.tar.* >/dev/null 2>&1 && return 0
  mkdir -p "$dir"
  debsrc=/etc/apt/sources.list.d/prestop-e2e-deb-src-$$.sources
  cat >"$debsrc" <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  log "downloading the kubernetes source package"
  # An `if`, so that under `set -e` a failed download still removes the entry.
  if apt-get update -qq && (cd "$dir" && apt-get source --download-only -qq kubernetes >&2); then
    rc=0
  else
    rc=1
  fi
  rm -f "$debsrc"
  ((rc == 0)) || { log "downloading the kubernetes source package failed"; return 1; }
}

# Unpacks DIR's tarball as TREE (unless TREE is already a tree), then makes it build with
# Debian's Go: the vendored reflect2 v1.0.1 segfaults under Go >= 1.18, v1.0.2 (Debian's
# package) works.
kube_source_tree() { # dir tree
  local dir=$1 tree=$2 orig cmd unpack="$2.unpack"
  if [[ ! -f "$tree/cmd/kube-apiserver/apiserver.go" || ! -f "$tree/cmd/kubelet/kubelet.go" ]]; then
    rm -rf "$tree" "$unpack"
    mkdir -p "$unpack"
    orig=$(ls "$dir"/kubernetes_*.orig.tar.* | head -n1)
    log "unpacking $(basename "$orig")"
    tar -C "$unpack" -xf "$orig"
    cmd=$(find "$unpack" -maxdepth 3 -path '*/cmd/kubelet' -type d | head -n1)
    [[ -n "$cmd" ]] || { log "unexpected layout of $(basename "$orig"): no cmd/kubelet"; return 1; }
    mv "$(dirname "$(dirname "$cmd")")" "$tree"
    rm -rf "$unpack"
  fi
  rm -rf "$tree/vendor/github.com/modern-go/reflect2"
  mkdir -p "$tree/vendor/github.com/modern-go/reflect2"
  cp -r "$KUBE_REFLECT2_SRC"/. "$tree/vendor/github.com/modern-go/reflect2/"
  sed -i 's#^github.com/modern-go/reflect2 v1.0.1$#github.com/modern-go/reflect2 v1.0.2#' \
    "$tree/vendor/modules.txt" || true
}

# Without git metadata /version would say v0.0.0-master; the suites and the webhook's
# version awareness read it, so the build gets the release's version (KUBE_GIT_VERSION_FILE).
kube_version_file() { # file version (1.20.2)
  cat >"$1" <<VARS
KUBE_GIT_COMMIT='faecb196815e248d3ecfb03c680a4507229c2a56'
KUBE_GIT_TREE_STATE='clean'
KUBE_GIT_VERSION='v$2'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
VARS
}

# Builds the named commands in TREE (statically, offline, with the Go cache and version
# file given) and installs each as CACHE/<name>-v<version>, atomically (a temp name, then a
# rename), after it has answered --version.
kube_build() { # tree gocache version-file cache version name...
  local tree=$1 gocache=$2 version_file=$3 cache=$4 version=$5 name built what=()
  shift 5
  for name in "$@"; do what+=("cmd/$name"); done
  (
    cd "$tree"
    export CGO_ENABLED=0 GOTOOLCHAIN=local GOPROXY=off GOFLAGS=
    export PATH="$(dirname "$KUBE_GO_1_20"):$PATH" GOROOT="$(dirname "$(dirname "$KUBE_GO_1_20")")"
    export KUBE_GIT_VERSION_FILE="$version_file"
    # kubelet links cgo by default; the node suite runs it static, like the others.
    export KUBE_STATIC_OVERRIDES=kubelet
    export GOCACHE="$gocache"
    nice -n 10 make WHAT="${what[*]}" >&2
  ) || return 1
  for name in "$@"; do
    built="$tree/_output/local/bin/linux/amd64/$name"
    [[ -x "$built" ]] || built=$(find "$tree/_output" -name "$name" -type f -perm -u+x | head -n1)
    "$built" --version >&2 || return 1
    install -m 0755 "$built" "$cache/$name-v$version.tmp"
    mv "$cache/$name-v$version.tmp" "$cache/$name-v$version"
  done
}
