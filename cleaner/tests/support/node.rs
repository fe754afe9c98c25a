//! A "node" whose mount table tells the truth: a private mount namespace (`unshare -m`,
//! root) chrooted into a fresh tmpfs, which is then the node's root filesystem, so that a
//! bind mount of `/mnt/scratch/x` shows root `/mnt/scratch/x` exactly as on a real node.
//! The test machine's `/usr`, `/lib*`, `/bin`, `/sbin` and `/dev` are bind-mounted in for
//! the shell and the tools; the binary is at `/prestop-clean`.
//!
//! The script runs as `sh -eu` on that node with these helpers:
//! - `plant DIR`: a canary (files, a dot-file, a subdirectory); `intact DIR...`: prints
//!   `TOUCHED <file>` for each canary file that changed;
//! - `node_fs DIR`: mounts a tmpfs at `DIR` (a scratch disk of the node) and remembers it;
//! - `pod CMD...`: runs `CMD` as in a pod: in a nested mount namespace where the node's
//!   own filesystems (`node_fs`) are unmounted, so only the volumes remain, and the
//!   kubelet's `etc-hosts` of pod `$POD_UID` ([`super::POD_UID`]) is at `/etc/hosts`;
//! - `kubelet HOSTPATH CONTAINERPATH`: bind-mounts as the kubelet does, following every
//!   symlink on the node;
//! - `start_agent SOCKET [ARGS...]` (see [`super::agent::START_AGENT_SH`]);
//! - `run NAME ARGS...`: `pod /prestop-clean hook ARGS...`, then prints `NAME=<status>`;
//!   `run_cmd NAME CMD...` the same for any command (`setpriv … "$BIN" hook …`).

use std::path::Path;
use std::process::Output;

use super::agent::START_AGENT_SH;
use super::{unshare, BIN, KUBELET_POD_SH};

const SETUP: &str = r#"
D=$1
mount --make-rprivate /
mkdir -p "$D/N"
mount -t tmpfs node "$D/N"
for dir in bin sbin lib lib32 lib64 libx32 usr; do
  if [ -L "/$dir" ]; then cp -P "/$dir" "$D/N/$dir"
  elif [ -d "/$dir" ]; then mkdir "$D/N/$dir"; mount --rbind "/$dir" "$D/N/$dir"; fi
done
mkdir "$D/N/proc" "$D/N/dev" "$D/N/tmp" "$D/N/agent"
mount -t proc proc "$D/N/proc"
mount --rbind /dev "$D/N/dev"
touch "$D/N/prestop-clean"
mount --bind "$2" "$D/N/prestop-clean"
for extra in "$D"/extra/*; do
  [ -e "$extra" ] || continue
  touch "$D/N/agent/${extra##*/}"
  mount --bind "$extra" "$D/N/agent/${extra##*/}"
done
exec chroot "$D/N" /bin/sh -euc "$3" sh
"#;

const HELPERS: &str = r#"
BIN=/prestop-clean
NODE_FS=""
plant() { mkdir -p "$1/sub"; for f in keep .hidden sub/keep; do echo canary > "$1/$f"; done; }
intact() {
  for dir in "$@"; do
    for f in keep .hidden sub/keep; do
      [ "$(cat "$dir/$f" 2>/dev/null)" = canary ] || echo "TOUCHED $dir/$f"
    done
  done
}
node_fs() { mkdir -p "$1"; mount -t tmpfs "node$1" "$1"; NODE_FS="$NODE_FS $1"; }
pod() {
  NODE_FS=$NODE_FS POD_UID=$POD_UID unshare -m sh -c '
    for m in $NODE_FS; do umount -l "$m"; done
    mount --bind "/var/lib/kubelet/pods/$POD_UID/etc-hosts" /etc/hosts
    exec "$@"' sh "$@"
}
mkdir -p "/var/lib/kubelet/pods/$POD_UID" /etc
: > "/var/lib/kubelet/pods/$POD_UID/etc-hosts"; : > /etc/hosts
kubelet() { mkdir -p "$2"; mount --bind "$1" "$2"; }
run() { name=$1; shift; run_cmd "$name" "$BIN" hook "$@"; }
run_cmd() { name=$1; shift; set +e; pod "$@"; echo "$name=$?"; set -e; }
"#;

/// Runs `script` on a fresh node (see the module docs); `dir` is a scratch directory of
/// the test machine (its `extra/` files, e.g. sockets, appear at `/agent/<name>` on the
/// node). `None` when namespaces are unavailable (skipped).
pub fn on_node(dir: &Path, script: &str) -> Option<Output> {
    let unshare = unshare(&["-m"])?;
    let script = format!("{START_AGENT_SH}{KUBELET_POD_SH}{HELPERS}{script}");
    // A hung agent or client fails the test instead of hanging it.
    Some(
        std::process::Command::new("timeout")
            .args(["-k", "5", "120", unshare])
            .args(["-m", "sh", "-euc", SETUP, "sh"])
            .arg(dir)
            .arg(BIN)
            .arg(script)
            .env_remove("POD_NAME")
            .output()
            .expect("run unshare"),
    )
}
