//! The run-time identity check (issue 17 classes 4, 5 and 6;
//! docs/DESIGN.md#identity-is-checked-on-the-node, "decided by identity"), with real mounts in a
//! private mount namespace (`unshare -m` as root).
//!
//! Each test lays out a "node" under `$D/H` and a "container" under `$D/ctr`, and plays
//! the kubelet: it resolves the host path as the kubelet does (following every symlink)
//! and bind-mounts the result at the container path. The program gets the host path the
//! webhook expected (`--host`) and must refuse whatever the node resolved elsewhere.

mod support;

use std::path::Path;
use std::process::Output;

use support::agent::START_AGENT_SH;
use support::{assert_canary, plant_canary, stderr, unshare, Sandbox, BIN};

/// Runs `script` as `sh -euc` in a private mount namespace; `$1` is the sandbox
/// directory, `$2` the binary. `None` when namespaces are unavailable (skipped).
fn in_namespace(dir: &Path, script: &str) -> Option<Output> {
    let unshare = unshare(&["-m"])?;
    let setup = format!("D=$1 BIN=$2\nexport D\nmount --make-rprivate /\n{START_AGENT_SH}{script}");
    Some(
        std::process::Command::new(unshare)
            .args(["-m", "sh", "-euc", &setup, "sh"])
            .arg(dir)
            .arg(BIN)
            .env_remove("POD_NAME")
            .output()
            .expect("run unshare"),
    )
}

fn out(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `$D/H/protected` (a canary), `$D/H/scratch`, `$D/ctr/data`.
fn node(sandbox: &Sandbox) {
    plant_canary(&sandbox.path("H/protected"));
    std::fs::create_dir_all(sandbox.path("H/scratch")).expect("mkdir");
    std::fs::create_dir_all(sandbox.path("ctr/data")).expect("mkdir");
}

#[test]
fn symlink_on_the_node_is_refused_naming_both_paths() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    let d = sandbox.dir.path().display().to_string();
    // In hostPath.path: /H/scratch/cache -> /H/protected. In a subPath: the volume is
    // /H/scratch, subPath job -> ../protected. In a middle component: /H/mnt -> /H.
    let script = r#"
ln -s "$D/H/protected" "$D/H/scratch/cache"
ln -s ../protected "$D/H/scratch/job"
ln -s "$D/H" "$D/H/mnt"
set +e
for host in "$D/H/scratch/cache" "$D/H/scratch/job" "$D/H/mnt/protected"; do
  mount --bind "$host" "$D/ctr/data"
  "$BIN" hook --target "$D/ctr/data" --host "$host"
  echo "status=$?"
  umount "$D/ctr/data"
done
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    let err = stderr(&output);
    assert_eq!(out(&output), "status=1\n".repeat(3), "{err}");
    for host in ["H/scratch/cache", "H/scratch/job", "H/mnt/protected"] {
        let line = format!(
            "prestop-clean: skipped {d}/ctr/data: expected host path {d}/{host}, \
             but the node mounted {d}/H/protected at {d}/ctr/data"
        );
        assert!(err.contains(&line), "no {line:?} in\n{err}");
    }
    assert_canary(&sandbox.path("H/protected"));
}

#[test]
fn the_expected_directory_is_emptied_and_subpathexpr_expands_from_env() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    let script = r#"
mkdir -p "$D/H/scratch/cache/sub/x" "$D/H/scratch/job-1/y" "$D/H/scratch/other"
echo junk > "$D/H/scratch/cache/sub/x/f"; echo junk > "$D/H/scratch/job-1/y/f"
echo keep > "$D/H/scratch/other/f"
set +e
mount --bind "$D/H/scratch/cache" "$D/ctr/data"
# A target below its mount: the suffix is checked too.
"$BIN" hook --target "$D/ctr/data/sub" --host "$D/H/scratch/cache/sub"; echo "below=$?"
"$BIN" hook --target "$D/ctr/data/sub" --host "$D/H/scratch/cachesub"; echo "wrong-suffix=$?"
"$BIN" hook --target "$D/ctr/data" --host "$D/H/scratch/cache"; echo "mount=$?"
umount "$D/ctr/data"
mount --bind "$D/H/scratch/job-1" "$D/ctr/data"
H="$D/H/scratch/\$(POD_NAME)"
POD_NAME=other "$BIN" hook --target "$D/ctr/data" --host "$H"; echo "other-pod=$?"
"$BIN" hook --target "$D/ctr/data" --host "$H"; echo "unset=$?"
POD_NAME=job-1 "$BIN" hook --target "$D/ctr/data" --host "$H"; echo "expr=$?"
ls -A "$D/H/scratch/cache" "$D/H/scratch/job-1" | wc -w
cat "$D/H/scratch/other/f"
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    let err = stderr(&output);
    assert_eq!(
        out(&output),
        "below=0\nwrong-suffix=1\nmount=0\nother-pod=1\nunset=1\nexpr=0\n2\nkeep\n",
        "{err}"
    );
    assert!(
        err.contains("references $(POD_NAME), which is not set here"),
        "{err}"
    );
    assert_canary(&sandbox.path("H/protected"));
}

/// A whole filesystem is cleaned only as exactly an allowed prefix (`--whole-filesystem`)
/// and with the node agent's word that it is the node's filesystem at that path; the
/// strict rule (no agent) refuses it even when allowed (issue 26: it accepted any).
#[test]
fn whole_filesystem_root_is_refused_unless_allowed() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    let script = r#"
mkdir -p "$D/H/disk"
mount -t tmpfs tmpfs "$D/H/disk"
mount --bind "$D/H/disk" "$D/ctr/data"
mkdir "$D/ctr/data/x"; echo junk > "$D/ctr/data/x/f"
start_agent "$D/agent.sock"
# The pod sees its volume, not the node's own mount of the disk.
pod() { unshare -m sh -c 'umount -l "$D/H/disk"; exec "$@"' sh "$@"; }
set +e
pod "$BIN" hook --target "$D/ctr/data" --host "$D/H/disk"; echo "refused=$?"
pod "$BIN" hook --target "$D/ctr/data" --host "$D/H/disk" --whole-filesystem; echo "no-agent=$?"
pod "$BIN" hook --node-agent "$D/agent.sock" --target "$D/ctr/data" --host "$D/H/disk"; echo "not-allowed=$?"
ls -A "$D/ctr/data"
pod "$BIN" hook --node-agent "$D/agent.sock" --target "$D/ctr/data" --host "$D/H/disk" --whole-filesystem; echo "allowed=$?"
ls -A "$D/ctr/data" | wc -l
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    let err = stderr(&output);
    assert_eq!(
        out(&output),
        "refused=1\nno-agent=1\nnot-allowed=1\nx\nallowed=0\n0\n",
        "{err}"
    );
    assert!(
        err.contains("but the node mounted the root of a whole filesystem (tmpfs "),
        "{err}"
    );
    assert!(err.contains("cleaned only with the node agent"), "{err}");
    assert!(
        err.contains("allowedHostPathPrefixes does not list exactly"),
        "{err}"
    );
}

#[test]
fn pv_inside_the_target_is_never_entered() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    plant_canary(&sandbox.path("H/scratch/job/pv"));
    let d = sandbox.dir.path().display().to_string();
    // The PV's directory lies inside the hostPath target; the pod mounts it read-only.
    let script = r#"
mkdir -p "$D/ctr/pv" "$D/H/scratch/job/junk/deep"; echo junk > "$D/H/scratch/job/junk/deep/f"
mount --bind "$D/H/scratch/job/pv" "$D/ctr/pv"
mount -o remount,bind,ro "$D/ctr/pv"
mount --bind "$D/H/scratch/job" "$D/ctr/data"
set +e
"$BIN" hook --target "$D/ctr/data" --host "$D/H/scratch/job"; echo "status=$?"
ls -A "$D/H/scratch/job"
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    let err = stderr(&output);
    assert_eq!(out(&output), "status=1\npv\n", "{err}");
    assert!(
        err.contains(&format!(
            "{d}/ctr/data/pv is the root of another mount of the container (not entered)"
        )),
        "{err}"
    );
    assert_canary(&sandbox.path("H/scratch/job/pv"));
}

#[test]
fn a_target_that_is_another_mounts_root_is_refused() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    plant_canary(&sandbox.path("H/scratch/job"));
    let d = sandbox.dir.path().display().to_string();
    let script = r#"
mkdir -p "$D/ctr/ro"
mount --bind "$D/H/scratch/job" "$D/ctr/ro"
mount -o remount,bind,ro "$D/ctr/ro"
mount --bind "$D/H/scratch/job" "$D/ctr/data"
set +e
"$BIN" hook --target "$D/ctr/data" --host "$D/H/scratch/job"; echo "status=$?"
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    let err = stderr(&output);
    assert_eq!(out(&output), "status=1\n", "{err}");
    assert!(
        err.contains(&format!(
            "the target is also the root of another mount of the container, at {d}/ctr/ro"
        )),
        "{err}"
    );
    assert_canary(&sandbox.path("H/scratch/job"));
}

#[test]
fn a_target_without_host_from_an_older_release_is_refused() {
    let sandbox = Sandbox::new();
    plant_canary(&sandbox.target);
    let output = support::command(
        support::User::Root,
        &[
            "hook".as_ref(),
            "--target".as_ref(),
            sandbox.target.as_os_str(),
        ],
    )
    .output()
    .expect("run");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("no expected host path (--host)"), "{err}");
    assert_canary(&sandbox.target);
}

#[test]
fn mountinfo_escapes_are_read_as_the_kernel_writes_them() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    // Space, tab, newline and backslash in the host path and in the mount point.
    let script = r#"
H="$D/H/scr atch	x
y\\z"
C="$D/ctr/da ta
b"
mkdir -p "$H/sub" "$C"; echo junk > "$H/sub/f"
mount --bind "$H" "$C"
set +e
"$BIN" hook --target "$C" --host "$H"; echo "status=$?"
ls -A "$H" | wc -l
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    assert_eq!(out(&output), "status=0\n0\n", "{}", stderr(&output));
}

/// The attack on the check itself: the container-side mount is swapped (unmounted and
/// replaced by a bind of the protected tree) while the program runs, hundreds of times.
/// The check is on the opened descriptor's own mount (its mount id, device and root), so
/// a swap between opening and checking can only make the program refuse. A long mount
/// table (1,500 mounts listed before the swapped one) widens the window between the
/// program's open and its reading of the swapped mount's line: without the mount-id
/// check, this run empties the protected tree.
#[test]
fn a_mount_swapped_between_the_checks_never_redirects_the_cleanup() {
    let sandbox = Sandbox::new();
    node(&sandbox);
    std::fs::create_dir_all(sandbox.path("H/real")).expect("mkdir");
    let script = r#"
mkdir "$D/many"
mount -t tmpfs many "$D/many"
i=0
while [ $i -lt 1500 ]; do mkdir "$D/many/$i"; mount --bind "$D/many/$i" "$D/many/$i"; i=$((i + 1)); done
(
  while [ ! -e "$D/stop" ]; do
    mount --bind "$D/H/protected" "$D/ctr/data"; umount -l "$D/ctr/data"
    mount --bind "$D/H/real" "$D/ctr/data"; umount -l "$D/ctr/data"
  done
) &
set +e
i=0
while [ $i -lt 200 ]; do
  i=$((i + 1))
  echo junk > "$D/H/real/f"
  [ -e "$D/H/protected/keep" ] || echo "protected-emptied"
  "$BIN" hook --target "$D/ctr/data" --host "$D/H/real" 2>/dev/null
  echo "status=$?"
done
touch "$D/stop"
wait
"#;
    let Some(output) = in_namespace(sandbox.dir.path(), script) else {
        return;
    };
    let text = out(&output);
    assert!(!text.contains("protected-emptied"), "{text}");
    let statuses: Vec<&str> = text.lines().collect();
    assert_eq!(statuses.len(), 200, "{text}{}", stderr(&output));
    assert!(
        statuses
            .iter()
            .all(|s| matches!(*s, "status=0" | "status=1")),
        "{text}"
    );
    eprintln!(
        "{} runs emptied the real directory, {} refused",
        statuses.iter().filter(|s| **s == "status=0").count(),
        statuses.iter().filter(|s| **s == "status=1").count()
    );
    assert_canary(&sandbox.path("H/protected"));
}
