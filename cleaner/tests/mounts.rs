//! Mounts inside and under the target, in a private mount namespace (`unshare -m` as
//! root, and `unshare -rm`, a user namespace, where it works): a bind mount of the *same*
//! filesystem, a tmpfs and a bind-mounted file inside the target survive untouched and
//! are named; a target on a read-only mount is reported and nothing is touched.
//!
//! The binary runs inside the namespace through a small `sh` wrapper that sets up the
//! mounts, runs it, and prints what it finds afterwards (the mounts vanish with the
//! namespace).

mod support;

use std::fs;
use std::path::Path;
use std::process::Output;

use support::agent::START_AGENT_SH;
use support::{assert_canary, plant_canary, stderr, unshare, Sandbox, BIN};

/// Runs `script` as `sh -c` inside each available private mount namespace and hands the
/// output to `check` before the next; `$1` is the sandbox directory, `$2` the binary.
fn in_mount_namespaces(sandbox_dir: &Path, script: &str, mut check: impl FnMut(Output)) {
    for flags in [&["-m"][..], &["-r", "-m"][..]] {
        let Some(unshare) = unshare(flags) else {
            continue;
        };
        let script = format!("{START_AGENT_SH}{script}");
        let output = std::process::Command::new(unshare)
            .args(flags)
            .args(["sh", "-euc", &script, "sh"])
            .arg(sandbox_dir)
            .arg(BIN)
            .output()
            .expect("run unshare");
        check(output);
    }
}

const MOUNTS: &str = r#"
D=$1 BIN=$2 T=$1/target
mount --make-rprivate /
mkdir -p "$T/pv" "$T/a/b/tmp" "$T/junk/deep"
echo junk > "$T/junk/deep/file"
echo junk > "$T/a/file"
mount --bind "$D/pv" "$T/pv"
mount -t tmpfs tmpfs "$T/a/b/tmp"
echo tmpfs > "$T/a/b/tmp/file"
touch "$T/bound-file"
mount --bind "$D/canary/keep" "$T/bound-file"
start_agent "$D/agent.sock"
set +e
"$BIN" hook --node-agent "$D/agent.sock" --target "$T" --host "$T" --whole-filesystem
echo "status=$?"
test -f "$T/a/b/tmp/file" && echo tmpfs-kept
mountpoint -q "$T/pv" && echo pv-mounted
mountpoint -q "$T/a/b/tmp" && echo tmpfs-mounted
test -e "$T/junk" || echo junk-gone
test -e "$T/a/file" || echo a-file-gone
"#;

#[test]
fn mounts_inside_the_target_survive_and_are_named() {
    let sandbox = Sandbox::new();
    // The "PV": a directory on the same filesystem as the target, bind-mounted in.
    let pv = sandbox.path("pv");
    plant_canary(&pv);
    in_mount_namespaces(sandbox.dir.path(), MOUNTS, |output| {
        let out = String::from_utf8_lossy(&output.stdout);
        let err = stderr(&output);
        for line in [
            "status=1",
            "tmpfs-kept",
            "pv-mounted",
            "tmpfs-mounted",
            "junk-gone",
            "a-file-gone",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "no {line:?} in {out}\n{err}"
            );
        }
        let target = sandbox.target.display();
        // pv, bound-file, a/b/tmp, and a and a/b that hold the tmpfs.
        assert!(
            err.contains(&format!("{target}: 5 entries left: ")),
            "{err}"
        );
        for named in ["pv", "a/b/tmp", "bound-file"] {
            assert!(
                err.contains(&format!("{target}/{named} is a mount point")),
                "{named} not named: {err}"
            );
        }
        assert_canary(&pv);
        sandbox.assert_canary();
        // Outside the namespace the mount points are plain directories again.
        let mut left: Vec<_> = support::entries(&sandbox.target);
        left.sort();
        assert_eq!(left, ["a", "bound-file", "pv"], "{err}");
        // Ready for the next namespace.
        fs::remove_dir_all(&sandbox.target).expect("reset");
        fs::create_dir(&sandbox.target).expect("reset");
    });
}

const READ_ONLY: &str = r#"
D=$1 BIN=$2 T=$1/target
mount --make-rprivate /
mount --bind "$D/ro-source" "$T"
mount -o remount,bind,ro "$T"
start_agent "$D/agent.sock"
set +e
"$BIN" hook --node-agent "$D/agent.sock" --target "$T" --host "$D/ro-source"
echo "status=$?"
"#;

#[test]
fn a_target_on_a_read_only_mount_is_reported_and_untouched() {
    let sandbox = Sandbox::new();
    let source = sandbox.path("ro-source");
    plant_canary(&source);
    std::os::unix::fs::symlink(&sandbox.canary, source.join("link")).expect("symlink");
    in_mount_namespaces(sandbox.dir.path(), READ_ONLY, |output| {
        let out = String::from_utf8_lossy(&output.stdout);
        let err = stderr(&output);
        assert!(out.contains("status=1"), "{out}\n{err}");
        let target = sandbox.target.display();
        assert!(
            err.contains(&format!(
                "{target}: 5 entries left: {target} is on a read-only filesystem"
            )),
            "{err}"
        );
        assert_canary(&source);
        assert!(source.join("link").is_symlink());
        sandbox.assert_canary();
    });
}

const TMPFS_TARGET: &str = r#"
D=$1 BIN=$2 T=$1/target
mount --make-rprivate /
mount -t tmpfs tmpfs "$T"
mkdir -p "$T/x/y" && echo junk > "$T/x/y/z" && ln -s "$D/canary" "$T/link"
start_agent "$D/agent.sock"
set +e
"$BIN" hook --node-agent "$D/agent.sock" --target "$T" --host "$T" --whole-filesystem
echo "status=$?"
ls -A "$T" | wc -l
"#;

/// The usual case in a pod: the target is itself the root of a mount (here a whole
/// tmpfs, which the operator allowed: `--whole-filesystem`, and the node agent vouches
/// that it is the node's directory at that path).
#[test]
fn a_target_that_is_a_mount_root_is_emptied() {
    let sandbox = Sandbox::new();
    in_mount_namespaces(sandbox.dir.path(), TMPFS_TARGET, |output| {
        let out = String::from_utf8_lossy(&output.stdout);
        let err = stderr(&output);
        assert_eq!(out, "status=0\n0\n", "{err}");
        assert!(err.contains(": 4 entries, 5 B in "), "{err}");
        sandbox.assert_canary();
    });
}
