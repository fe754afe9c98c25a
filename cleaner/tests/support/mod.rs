//! Shared by the cleaner's tests: the real binary, sandboxes with a target and canaries
//! outside it, and helpers to run as another user or inside a mount namespace.
//!
//! Tests that need root or `unshare` skip with a note when those are missing, and fail
//! instead when `PRESTOP_REQUIRE_TOOLS=1` (CI sets it).

#![allow(dead_code)]

pub mod agent;
pub mod cgroup;
pub mod node;

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{lchown, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_prestop-clean");
/// The uid of the pod every test container belongs to, as the kubelet's own mounts in the
/// container name it ([`KUBELET_POD_SH`]).
pub const POD_UID: &str = "5f0c9f3e-8b1a-4c2d-9e7f-1a2b3c4d5e6f";

/// `kubelet_pod DIR`, in a mount namespace of the test's own: what the kubelet mounts in
/// every container of pod `$POD_UID` (set, to [`POD_UID`]) — its `etc-hosts` from the pod's
/// directory below the kubelet's root `DIR`, over `/etc/hosts`. Without the node agent a
/// cleaner learns its pod's uid from that mount alone (cleans only a directory named by
/// it).
pub const KUBELET_POD_SH: &str = r#"
POD_UID=5f0c9f3e-8b1a-4c2d-9e7f-1a2b3c4d5e6f
kubelet_pod() {
  mkdir -p "$1/pods/$POD_UID" /etc; : > "$1/pods/$POD_UID/etc-hosts"
  [ -e /etc/hosts ] || : > /etc/hosts
  mount --bind "$1/pods/$POD_UID/etc-hosts" /etc/hosts
}
"#;

/// The unprivileged user the tests run the binary as.
pub const NOBODY: u32 = 65534;

/// Who runs the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum User {
    Root,
    Nobody,
}

impl User {
    pub fn uid(self) -> u32 {
        match self {
            User::Root => 0,
            User::Nobody => NOBODY,
        }
    }
}

/// The users a test runs as: root always, nobody when we are root (to switch to it).
pub fn users() -> Vec<User> {
    if is_root() {
        vec![User::Root, User::Nobody]
    } else {
        skip("not root: the unprivileged-user cases run as the current user only");
        vec![User::Root]
    }
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A missing tool or privilege: a note, or a failure under `PRESTOP_REQUIRE_TOOLS=1`.
pub fn skip(why: &str) {
    if std::env::var("PRESTOP_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!("required (PRESTOP_REQUIRE_TOOLS=1): {why}");
    }
    eprintln!("note: skipped: {why}");
}

/// A temporary directory holding `target/` and `canary/` side by side.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    pub target: PathBuf,
    pub canary: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox::new_in(&std::env::temp_dir())
    }

    /// On tmpfs (`/dev/shm`) when there is one: the race tests run hundreds of cleanups,
    /// and a disk mounted with `discard` makes each deletion slow.
    pub fn on_tmpfs() -> Sandbox {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() && tempfile::tempdir_in(shm).is_ok() {
            Sandbox::new_in(shm)
        } else {
            Sandbox::new()
        }
    }

    pub fn new_in(base: &Path) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("prestop-clean-")
            .tempdir_in(base)
            .expect("tempdir");
        // Other users (nobody) must be able to reach the target.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        let target = dir.path().join("target");
        let canary = dir.path().join("canary");
        fs::create_dir(&target).expect("mkdir target");
        plant_canary(&canary);
        Sandbox {
            dir,
            target,
            canary,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Hands the target and the canaries to `user`: only the cleaner's care protects the
    /// canaries then, not their permissions.
    pub fn give_to(&self, user: User) {
        if !is_root() {
            // Not root: everything is the current user's already.
            return;
        }
        chown_tree(&self.target, user.uid());
        chown_tree(&self.canary, user.uid());
    }

    pub fn assert_canary(&self) {
        assert_canary(&self.canary);
    }

    /// Asserts the target still exists and is empty.
    pub fn assert_emptied(&self) {
        let left = entries(&self.target);
        assert!(left.is_empty(), "left in the target: {left:?}");
    }
}

/// A canary directory: files, a dot-file, a subdirectory.
pub fn plant_canary(dir: &Path) {
    fs::create_dir_all(dir.join("sub")).expect("mkdir canary");
    fs::write(dir.join("keep"), "canary").expect("write");
    fs::write(dir.join(".hidden"), "canary").expect("write");
    fs::write(dir.join("hardkeep"), "canary").expect("write");
    fs::write(dir.join("sub/keep"), "canary").expect("write");
}

pub fn assert_canary(dir: &Path) {
    for file in ["keep", ".hidden", "hardkeep", "sub/keep"] {
        let path = dir.join(file);
        assert_eq!(
            fs::read_to_string(&path).ok().as_deref(),
            Some("canary"),
            "canary {} was touched",
            path.display()
        );
    }
}

pub fn chown_tree(path: &Path, uid: u32) {
    lchown(path, Some(uid), Some(uid)).expect("lchown");
    let meta = fs::symlink_metadata(path).expect("lstat");
    if meta.is_dir() {
        for entry in fs::read_dir(path).expect("read_dir") {
            chown_tree(&entry.expect("entry").path(), uid);
        }
    }
}

/// Names in a directory (empty when it cannot be read).
pub fn entries(dir: &Path) -> Vec<OsString> {
    match fs::read_dir(dir) {
        Ok(read) => read.map(|e| e.expect("entry").file_name()).collect(),
        Err(err) => panic!("{}: {err}", dir.display()),
    }
}

/// The binary with `args`, as `user`, stdin closed.
pub fn command(user: User, args: &[&std::ffi::OsStr]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args).stdin(Stdio::null());
    if user == User::Nobody {
        // std drops the supplementary groups when root sets a uid.
        command.uid(NOBODY).gid(NOBODY);
    }
    command
}

/// The identity options of a target that lies, under its own path, on a filesystem
/// mounted whole (the test machine's `/` or `/dev/shm`, no mount namespace): `--host`
/// its own path and `--whole-filesystem`. Such a prefix is cleaned only with the node
/// agent's word (`/dev/shm` is its own filesystem): pass [`agent::NodeAgent::args`] too.
/// Tests of the identity check itself set up real bind mounts instead (tests/identity.rs).
pub fn on_whole_filesystem(target: &Path) -> [OsString; 3] {
    [
        "--host".into(),
        target.as_os_str().to_owned(),
        "--whole-filesystem".into(),
    ]
}

/// `prestop-clean hook --node-agent S --target T --host T --whole-filesystem…` as
/// `user`, with a node agent of its own.
pub fn clean(user: User, targets: &[&Path]) -> Output {
    let agent = agent::NodeAgent::start();
    let mut args: Vec<OsString> = vec!["hook".into()];
    args.extend(agent.args());
    for target in targets {
        args.push("--target".into());
        args.push(target.as_os_str().to_owned());
        args.extend(on_whole_filesystem(target));
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(OsString::as_os_str).collect();
    command(user, &args).output().expect("run prestop-clean")
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Polls `done` until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Where `unshare` is, when it can make the namespaces in `flags` here.
pub fn unshare(flags: &[&str]) -> Option<&'static str> {
    let path = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    let Some(path) = path else {
        skip("unshare is not installed");
        return None;
    };
    let works = Command::new(path)
        .args(flags)
        .arg("true")
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        skip(&format!("unshare {flags:?} does not work here"));
        return None;
    }
    Some(path)
}
