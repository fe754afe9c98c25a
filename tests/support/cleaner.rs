//! The real `prestop-clean` program, for tests that run the hooks the webhook renders.
//!
//! [`program`] returns `target/debug/prestop-clean` when it is newer than the cleaner's
//! sources, and otherwise builds it with `cargo build -p prestop-clean` into a target
//! directory of its own (the `cargo test` running us holds the lock on the main one).
//! `PRESTOP_CLEANER_PROGRAM=/path/to/prestop-clean` tests that binary instead (e.g. the
//! static release build). While the crate's `main` is still the placeholder it returns
//! `None` with a skip note; `PRESTOP_REQUIRE_CLEANER=1` (CI) makes that a failure instead.
//!
//! [`map_argv`] rewrites a pod's argv for this machine — the program's in-pod path to the
//! built binary, container paths to temp dirs — and changes nothing else, so the argv
//! shape under test is the one the pod gets.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

const PLACEHOLDER: &str = "prestop-clean: not built yet";

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return newest;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let time = if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            newest_source(&path)
        } else {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        newest = newest.max(time);
    }
    newest
}

fn build() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let built = target.join("debug/prestop-clean");
    let sources = newest_source(&root.join("cleaner"));
    let fresh = |binary: &Path| {
        std::fs::metadata(binary)
            .and_then(|m| m.modified())
            .is_ok_and(|time| time >= sources)
    };
    if fresh(&built) {
        return built;
    }
    let own = target.join("prestop-clean-for-tests");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "prestop-clean",
            "--bin",
            "prestop-clean",
        ])
        .arg("--target-dir")
        .arg(&own)
        .current_dir(root)
        .status()
        .expect("run cargo build -p prestop-clean");
    assert!(status.success(), "cargo build -p prestop-clean failed");
    own.join("debug/prestop-clean")
}

/// The built program, or `None` while it is the placeholder (see the module docs).
pub fn program() -> Option<&'static Path> {
    static PROGRAM: OnceLock<Option<PathBuf>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| {
            let binary = std::env::var_os("PRESTOP_CLEANER_PROGRAM")
                .map(PathBuf::from)
                .unwrap_or_else(build);
            let probe = Command::new(&binary)
                .arg("hook")
                .output()
                .expect("run prestop-clean");
            if String::from_utf8_lossy(&probe.stderr).contains(PLACEHOLDER) {
                if std::env::var("PRESTOP_REQUIRE_CLEANER").as_deref() == Ok("1") {
                    panic!("prestop-clean is still the placeholder (PRESTOP_REQUIRE_CLEANER=1)");
                }
                eprintln!(
                    "SKIP: prestop-clean is still the placeholder main; these cases run once \
                     the cleaner program is merged"
                );
                return None;
            }
            Some(binary)
        })
        .as_deref()
}

/// `argv` with `program_in_pod` replaced by `binary` and every entry at or below a
/// container path of `paths` moved under its temp dir. Nothing else changes.
pub fn map_argv(
    argv: &[String],
    program_in_pod: &str,
    binary: &Path,
    paths: &[(&str, &Path)],
) -> Vec<String> {
    argv.iter()
        .map(|arg| {
            if arg == program_in_pod {
                return binary.display().to_string();
            }
            for (container_path, local) in paths {
                if let Some(rest) = arg.strip_prefix(container_path) {
                    if rest.is_empty() || rest.starts_with('/') {
                        return format!("{}{rest}", local.display());
                    }
                }
            }
            arg.clone()
        })
        .collect()
}

/// The pod the commands of [`as_mounted`] run in, as the kubelet's mounts name it.
pub const POD_UID: &str = "5f0c9f3e-8b1a-4c2d-9e7f-1a2b3c4d5e6f";

/// A command that runs `argv` as the kubelet would have set it up for a hostPath volume:
/// in a private mount namespace (`unshare -m`, root) where `target` is a mount, a bind
/// of itself, so `/proc/self/mountinfo` shows its own path as the mount's root, and
/// `/etc/hosts` is the kubelet's `etc-hosts` of pod [`POD_UID`]. Pair it with
/// [`map_argv`] mapping the rendered `--host` to `target` as well: the program's run-time
/// identity check then sees what it would see in a pod. Without a node agent the program
/// cleans only a directory named by its pod's uid: put `target` below one
/// (`Tree::named(&format!("pod-{POD_UID}-"))`).
pub fn as_mounted(target: &Path, argv: &[String]) -> Command {
    let script = "mount --make-rprivate /\n\
                  kubelet=$(mktemp -d)/pods/$1; mkdir -p \"$kubelet\"; : > \"$kubelet/etc-hosts\"\n\
                  mount --bind \"$kubelet/etc-hosts\" /etc/hosts\n\
                  if [ -d \"$0\" ]; then mount --bind \"$0\" \"$0\"; fi\n\
                  shift; exec \"$@\"";
    let mut command = Command::new("unshare");
    command
        .args(["-m", "sh", "-ec", script])
        .arg(target)
        .arg(POD_UID)
        .args(argv);
    command
}
