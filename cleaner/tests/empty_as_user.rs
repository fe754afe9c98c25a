//! Issue 26, item 2: `prestop-clean empty`, the node reaper's walk, removes only what the
//! gone pod's own user could have removed. It runs as root (as the reaper starts it),
//! becomes the pod's uid, gid and groups with no capability, verifies that with the
//! kernel, and only then walks. Real trees owned by several uids; the report on stdout is
//! parsed back with the reaper's own parser.

mod support;

use prestop_clean::wire;
use prestop_clean::{Outcome, Reason, Report};
use std::fs;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::{entries, is_root, skip, Sandbox};

const POD: u32 = 1000;
const OTHER_TENANT: u32 = 2000;
const THIRD: u32 = 3000;

fn owned_dir(path: &Path, uid: u32, mode: u32) {
    fs::create_dir_all(path).unwrap();
    chown(path, Some(uid), Some(uid)).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn owned_file(path: &Path, uid: u32) {
    fs::write(path, b"data").unwrap();
    chown(path, Some(uid), Some(uid)).unwrap();
}

/// `prestop-clean empty` as root (the reaper) with the pod's identity.
fn empty(uid: &str, gid: &str, groups: Option<&str>, target: &Path) -> Output {
    let mut command = Command::new(support::BIN);
    command.args(["empty", "--uid", uid, "--gid", gid]);
    if let Some(groups) = groups {
        command.args(["--groups", groups]);
    }
    command
        .arg(target)
        .stdin(Stdio::null())
        .output()
        .expect("run prestop-clean")
}

fn report_of(output: &Output) -> Report {
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    wire::decode(&stdout)
        .unwrap_or_else(|why| panic!("{why}: {stdout:?} {}", support::stderr(output)))
}

fn survivor(report: &Report, path: &Path) -> Option<Reason> {
    let path = path.as_os_str().as_encoded_bytes();
    report
        .survivors
        .iter()
        .find(|s| s.path == path)
        .map(|s| s.reason)
}

fn need_root() -> bool {
    if !is_root() {
        skip("not root: changing to the pod's user needs root");
    }
    is_root()
}

/// The tree of a uid-1000 pod's directory: its own files, another tenant's 0700
/// directory (which the pod's own hook cannot enter) and a sticky directory holding
/// another user's file next to the pod's.
#[test]
fn other_tenants_directory_is_not_emptied() {
    if !need_root() {
        return;
    }
    let sandbox = Sandbox::new();
    let target = &sandbox.target;
    owned_dir(target, POD, 0o755);
    owned_dir(&target.join("mine/deeper"), POD, 0o755);
    chown(target.join("mine"), Some(POD), Some(POD)).unwrap();
    owned_file(&target.join("mine/deeper/out.bin"), POD);
    owned_file(&target.join(".hidden"), POD);
    let tenant = target.join("other-tenant");
    owned_dir(&tenant, OTHER_TENANT, 0o700);
    owned_file(&tenant.join("secret"), OTHER_TENANT);
    let sticky = target.join("sticky");
    owned_dir(&sticky, 0, 0o1777);
    owned_file(&sticky.join("theirs"), OTHER_TENANT);
    owned_file(&sticky.join("ours"), POD);

    let output = empty("1000", "1000", None, target);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        support::stderr(&output)
    );
    let report = report_of(&output);
    assert_eq!(report.outcome, Outcome::Incomplete);
    assert_eq!(
        survivor(&report, &tenant),
        Some(Reason::PermissionDenied),
        "{report:?}"
    );
    assert_eq!(
        survivor(&report, &sticky.join("theirs")),
        Some(Reason::NotPermitted),
        "{report:?}"
    );
    assert_eq!(fs::read(tenant.join("secret")).unwrap(), b"data");
    assert_eq!(fs::read(sticky.join("theirs")).unwrap(), b"data");
    // The pod's own files went.
    let mut left = entries(target);
    left.sort();
    assert_eq!(left, ["other-tenant", "sticky"]);
    assert_eq!(entries(&sticky), ["theirs"]);
    assert_eq!(report.removed, 5, "{report:?}");
    sandbox.assert_canary();
    let stderr = support::stderr(&output);
    assert!(stderr.contains("permission denied"), "{stderr}");

    // The pod mounted the other tenant's directory itself: nothing in it is touched.
    let output = empty("1000", "1000", None, &tenant);
    assert_ne!(output.status.code(), Some(0));
    let report = report_of(&output);
    assert!(
        matches!(&report.outcome, Outcome::Skipped(why) if why.contains("Permission denied")),
        "{report:?}"
    );
    assert_eq!(report.removed, 0);
    assert_eq!(entries(&tenant), ["secret"]);
}

/// A pod's supplementary groups count (a group-writable directory of another user goes),
/// and only the groups it is given.
#[test]
fn the_pods_groups_and_only_those_count() {
    if !need_root() {
        return;
    }
    for (groups, kept) in [
        (None, true),
        (Some("2500"), true),
        (Some("2500,4000"), false),
    ] {
        let sandbox = Sandbox::new();
        let target = &sandbox.target;
        owned_dir(target, POD, 0o755);
        let shared = target.join("shared");
        fs::create_dir(&shared).unwrap();
        chown(&shared, Some(OTHER_TENANT), Some(4000)).unwrap();
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o770)).unwrap();
        owned_file(&shared.join("f"), OTHER_TENANT);
        let output = empty("1000", "1000", groups, target);
        assert_eq!(
            shared.join("f").exists(),
            kept,
            "groups {groups:?}: {}",
            support::stderr(&output)
        );
    }
}

/// A root pod keeps root's rights as an owner, but gets neither DAC_OVERRIDE (another
/// user's 0700 directory) nor FOWNER (another user's file in another user's sticky
/// directory): it had neither (a container's default capabilities include them, but the
/// reaper cannot know which the pod kept, so it gives none).
#[test]
fn root_pod_gets_no_capabilities() {
    if !need_root() {
        return;
    }
    let sandbox = Sandbox::new();
    let target = &sandbox.target;
    owned_dir(&target.join("roots/deeper"), 0, 0o755);
    owned_file(&target.join("roots/deeper/f"), 0);
    let tenant = target.join("other-tenant");
    owned_dir(&tenant, OTHER_TENANT, 0o700);
    owned_file(&tenant.join("secret"), OTHER_TENANT);
    let sticky = target.join("sticky");
    owned_dir(&sticky, OTHER_TENANT, 0o1777);
    owned_file(&sticky.join("theirs"), THIRD);

    let output = empty("0", "0", None, target);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        support::stderr(&output)
    );
    let report = report_of(&output);
    assert_eq!(
        survivor(&report, &tenant),
        Some(Reason::PermissionDenied),
        "{report:?}"
    );
    assert_eq!(
        survivor(&report, &sticky.join("theirs")),
        Some(Reason::NotPermitted),
        "{report:?}"
    );
    assert!(!target.join("roots").exists(), "root's own files go");
    assert_eq!(entries(&tenant), ["secret"]);
    sandbox.assert_canary();
}

/// The drop is checked with the kernel before the walk. `4294967295` is -1 to
/// `setresuid`/`setresgid` ("leave unchanged"): the calls succeed and the process would
/// still be root; the verification refuses, and nothing is touched. An identity that
/// cannot be taken at all (not root; a uid outside a user namespace's map) is refused
/// the same way.
#[test]
fn privileges_are_verified_after_the_drop() {
    if !need_root() {
        return;
    }
    let sandbox = Sandbox::new();
    let target = &sandbox.target;
    owned_file(&target.join("f"), 0);
    let untouched = |output: &Output, says: &str| {
        let stderr = support::stderr(output);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(output.stdout.is_empty(), "no report: nothing was walked");
        assert!(stderr.contains("cannot become the pod's user"), "{stderr}");
        assert!(stderr.contains(says), "{says:?} not in {stderr}");
        assert_eq!(entries(target), ["f"]);
    };
    let output = empty("4294967295", "4294967295", None, target);
    untouched(
        &output,
        "uids (real, effective, saved, fs) are [0, 0, 0, 0]",
    );
    untouched(
        &output,
        "gids (real, effective, saved, fs) are [0, 0, 0, 0]",
    );
    // Only the gid is the trap: the uid changes, the gid stays root's.
    let output = empty("1000", "4294967295", None, target);
    untouched(
        &output,
        "gids (real, effective, saved, fs) are [0, 0, 0, 0], not 4294967295",
    );

    // Not root (no CAP_SETGID): setgroups fails.
    let output = support::command(
        support::User::Nobody,
        &["empty", "--uid", "1000", "--gid", "1000"]
            .map(std::ffi::OsStr::new)
            .iter()
            .copied()
            .chain([target.as_os_str()])
            .collect::<Vec<_>>(),
    )
    .output()
    .unwrap();
    untouched(&output, "setgroups([]) failed");

    // In a user namespace that maps only root: uid 1000 does not exist there (and
    // setgroups is denied, as in every such namespace).
    let Some(unshare) = support::unshare(&["-r"]) else {
        return;
    };
    let output = Command::new(unshare)
        .args(["-r", support::BIN, "empty", "--uid", "1000", "--gid", "0"])
        .arg(target)
        .output()
        .unwrap();
    untouched(&output, "failed: ");
}

/// The reaper's stop line: stdin is a pipe from the reaper; when the reaper closes it (a
/// user arrived, or the reaper died), the walk kills itself with SIGKILL at once. The
/// reaper, root without CAP_KILL, could not signal a walk running as uid 1000.
///
/// Whatever the machine's speed: the walk's stdout is a FIFO with room for a few dozen
/// progress lines only, so the walk soon blocks on its report and can remove little more
/// before the stop, however late the stop thread runs. A walk that ignored the closed
/// stop line would stay blocked there: it must be dead of SIGKILL within 10 s.
#[test]
fn a_closed_stop_line_kills_the_walk() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    if !need_root() {
        return;
    }
    let sandbox = Sandbox::on_tmpfs();
    let target = &sandbox.target;
    owned_dir(target, POD, 0o755);
    for d in 0..50 {
        let sub = target.join(format!("d{d:02}"));
        owned_dir(&sub, POD, 0o755);
        for f in 0..1000 {
            owned_file(&sub.join(format!("f{f:04}")), POD);
        }
    }
    let left = || -> usize {
        (0..50)
            .map(|d| fs::read_dir(target.join(format!("d{d:02}"))).map_or(0, |e| e.count()))
            .sum()
    };
    // A FIFO, held open for reading and writing here (no open blocks), filled but for
    // 128 bytes of its 64 KiB: the header and a few progress lines (one per 256 entries).
    let fifo = sandbox.path("stdout.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let mut held = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    held.write_all(&vec![b'#'; 65536 - 128]).unwrap();
    let stdout = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    let mut child = Command::new(support::BIN)
        .args(["empty", "--uid", "1000", "--gid", "1000"])
        .arg(target)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stop = child.stdin.take().unwrap();
    assert!(
        support::wait_until(Duration::from_secs(30), || left() < 50_000),
        "the walk did not start within 30 s"
    );
    drop(stop);
    let died = support::wait_until(Duration::from_secs(10), || {
        child.try_wait().unwrap().is_some()
    });
    if !died {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the walk was still running 10 s after its stop line closed");
    }
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status}");
    // The FIFO let it remove at most a few thousand entries (what its workers had in
    // hand when the first of them blocked on a report).
    let left = left();
    assert!(left > 40_000, "the walk went on: {left} files left");
    drop(held);
    sandbox.assert_canary();
}
