//! Real shells for the hook tests: busybox `sh` with only busybox applets on PATH (as in a
//! busybox or alpine image), `dash` and `bash` with the system PATH.
//!
//! A missing shell fails the test when `PRESTOP_REQUIRE_SHELLS=1` (CI sets it); otherwise
//! the test prints a skip note and runs with the shells it has.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

/// Applets a busybox image offers that the hooks or the tests call.
const APPLETS: &[&str] = &[
    "sh", "find", "rm", "rmdir", "sleep", "kill", "printf", "echo", "test", "[", "touch", "cat",
    "ls", "mkdir", "true", "false",
];

pub struct Shell {
    pub name: &'static str,
    /// Absolute path used as argv[0] of the hook.
    pub path: PathBuf,
    /// PATH for the hook's process.
    pub path_env: String,
    /// Keeps the busybox applet directory alive.
    _bin: Option<tempfile::TempDir>,
}

impl Shell {
    /// A command running `argv` (argv[0] replaced by this shell) in `cwd` with a clean env.
    pub fn command(&self, argv: &[String], cwd: &Path) -> Command {
        let mut command = Command::new(&self.path);
        command
            .args(&argv[1..])
            .env_clear()
            .env("PATH", &self.path_env)
            .current_dir(cwd);
        command
    }

    pub fn run(&self, argv: &[String], cwd: &Path) -> Output {
        self.command(argv, cwd)
            .output()
            .unwrap_or_else(|e| panic!("{}: cannot run: {e}", self.name))
    }
}

fn first_existing(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

fn missing(name: &str) {
    if std::env::var("PRESTOP_REQUIRE_SHELLS").as_deref() == Ok("1") {
        panic!("{name} is required (PRESTOP_REQUIRE_SHELLS=1) but not installed");
    }
    eprintln!("note: {name} not installed, its cases are skipped");
}

/// The shells found on this machine. Callers iterate; an empty list means skip.
pub fn shells() -> Vec<Shell> {
    let mut shells = Vec::new();
    match first_existing(&["/bin/busybox", "/usr/bin/busybox"]) {
        Some(busybox) => {
            let bin = tempfile::tempdir().expect("tempdir");
            for applet in APPLETS {
                std::os::unix::fs::symlink(&busybox, bin.path().join(applet)).expect("symlink");
            }
            shells.push(Shell {
                name: "busybox sh",
                path: bin.path().join("sh"),
                path_env: bin.path().display().to_string(),
                _bin: Some(bin),
            });
        }
        None => missing("busybox"),
    }
    let system_path = "/usr/local/bin:/usr/bin:/bin".to_owned();
    for (name, candidates) in [
        ("dash", ["/bin/dash", "/usr/bin/dash"]),
        ("bash", ["/bin/bash", "/usr/bin/bash"]),
    ] {
        match first_existing(&candidates) {
            Some(path) => shells.push(Shell {
                name,
                path,
                path_env: system_path.clone(),
                _bin: None,
            }),
            None => missing(name),
        }
    }
    shells
}

/// The direct children of `pid`, from `/proc/*/stat` (field 4 is the parent pid).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let child: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).ok()?;
            // comm may hold spaces and parentheses: parse after the last ')'.
            let after = &stat[stat.rfind(')')? + 1..];
            let ppid: u32 = after.split_whitespace().nth(1)?.parse().ok()?;
            (ppid == pid).then_some(child)
        })
        .collect()
}

/// Polls `condition` until it holds or `limit` passes; returns whether it held.
pub fn wait_until(limit: std::time::Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Names that break naive scripts: word splitting, globbing, options, substitutions.
pub const HOSTILE: &[&str] = &[
    "with space",
    "new\nline",
    "-rf",
    "--",
    "-",
    "$(touch pwned)",
    "`touch pwned`",
    "*",
    "?",
    "[a]",
    "\\",
    "'",
    "\"",
    ".hidden",
    "..dots",
    "...",
    ".-x",
];

pub struct Tree {
    pub root: tempfile::TempDir,
    pub target: PathBuf,
    pub outside: PathBuf,
    pub cwd: PathBuf,
}

impl Tree {
    pub fn new() -> Tree {
        Tree::named(".tmp")
    }

    /// A tree whose temporary root's name starts with `prefix`.
    pub fn named(prefix: &str) -> Tree {
        let root = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .expect("tempdir");
        let target = root.path().join("target dir");
        let outside = root.path().join("outside");
        let cwd = root.path().join("cwd");
        for dir in [&target, &outside, &cwd, &outside.join("sub")] {
            fs::create_dir_all(dir).expect("mkdir");
        }
        fs::write(outside.join("keep.txt"), "keep").expect("write");
        fs::write(outside.join("sub/inner"), "keep").expect("write");
        Tree {
            root,
            target,
            outside,
            cwd,
        }
    }

    /// Fills `dir` with every hostile name as file, as nested directory, and symlinks out.
    pub fn fill(&self, dir: &Path) {
        for name in HOSTILE {
            fs::write(dir.join(name), "x").expect("write");
            let nested = dir.join(format!("d{name}")).join(name).join(".deep");
            fs::create_dir_all(&nested).expect("mkdir");
            fs::write(nested.join(name), "x").expect("write");
        }
        symlink(&self.outside, dir.join("link-out")).expect("symlink");
        symlink(self.outside.join("keep.txt"), dir.join("link-file")).expect("symlink");
        symlink("/nonexistent/dangling", dir.join("dangling")).expect("symlink");
        symlink(&self.outside, dir.join("d-rf").join("link-up")).expect("symlink");
    }

    pub fn path(&self, p: &Path) -> String {
        p.to_str().expect("utf-8 temp path").to_owned()
    }

    /// The target emptied but kept, the outside intact, no substitution ever ran.
    pub fn assert_clean(&self, dir: &Path, who: &str) {
        assert!(dir.is_dir(), "{who}: {} was removed", dir.display());
        let left: Vec<_> = fs::read_dir(dir).expect("read_dir").collect();
        assert!(left.is_empty(), "{who}: left behind {left:?}");
        self.assert_safe(who);
    }

    pub fn assert_safe(&self, who: &str) {
        assert!(
            self.outside.join("keep.txt").is_file(),
            "{who}: symlink target deleted"
        );
        assert!(
            self.outside.join("sub/inner").is_file(),
            "{who}: symlink target deleted"
        );
        for dir in [self.root.path(), &self.cwd, &self.target] {
            assert!(!dir.join("pwned").exists(), "{who}: a name was run as code");
        }
    }
}

/// A `find` that logs its arguments (and deletes nothing), ahead of the real one on PATH.
/// busybox sh runs its own applets whatever PATH says, so this only works for dash/bash.
pub fn fake_find(tree: &Tree) -> (PathBuf, String) {
    let bin = tree.root.path().join("fake-bin");
    fs::create_dir(&bin).expect("mkdir");
    let log = tree.root.path().join("find.log");
    let script = format!("#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\n", log.display());
    fs::write(bin.join("find"), script).expect("write");
    Command::new("chmod")
        .arg("+x")
        .arg(bin.join("find"))
        .status()
        .expect("chmod");
    (log, format!("{}:/usr/bin:/bin", bin.display()))
}

/// Spawns a sidecar `argv` (its argv[0] replaced by `shell`) in the tree's cwd and runs
/// [`run_sidecar`] on it.
pub fn spawn_sidecar(shell: &Shell, tree: &Tree, mut argv: Vec<String>) {
    argv[0] = shell.path.display().to_string();
    let child = shell
        .command(&argv, &tree.cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn the sidecar");
    let pid = child.id();
    run_sidecar(shell, tree, child, pid);
}

/// Starts the sidecar, waits until it idles, checks nothing was deleted, sends SIGTERM to
/// `signal_pid` and expects `child` to exit 0 with the target emptied.
pub fn run_sidecar(shell: &Shell, tree: &Tree, mut child: Child, idle_pid: u32) {
    let mut sleeps = Vec::new();
    let idle = wait_until(Duration::from_secs(10), || {
        sleeps = children(idle_pid);
        !sleeps.is_empty()
    });
    assert!(idle, "{}: sidecar never started idling", shell.name);
    assert!(
        tree.target.join(".hidden").exists(),
        "{}: deleted before SIGTERM",
        shell.name
    );
    assert_eq!(
        fs::read_dir(&tree.target).expect("read_dir").count(),
        HOSTILE.len() * 2 + 3
    );
    let sent = Command::new("kill")
        .args(["-TERM", &idle_pid.to_string()])
        .status();
    assert!(
        sent.is_ok_and(|s| s.success()),
        "{}: kill failed",
        shell.name
    );
    let mut status = None;
    let exited = wait_until(Duration::from_secs(10), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
        kill_all(&sleeps);
    }
    assert!(exited, "{}: sidecar ignored SIGTERM", shell.name);
    assert!(
        status.is_some_and(|s| s.success()),
        "{}: {status:?}",
        shell.name
    );
    tree.assert_clean(&tree.target, shell.name);
    // The background sleep must not outlive the sidecar (gone, or a zombie being reaped).
    let gone = |pid: &u32| {
        fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'))
        })
    };
    let reaped = wait_until(Duration::from_secs(10), || sleeps.iter().all(gone));
    if !reaped {
        kill_all(&sleeps);
    }
    assert!(reaped, "{}: idle sleep left running", shell.name);
}

/// Ends the processes a failed sidecar case started, so a failure leaks nothing.
fn kill_all(pids: &[u32]) {
    for pid in pids {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
}
