//! Real shells for the hook tests: busybox `sh` with only busybox applets on PATH (as in a
//! busybox or alpine image), `dash` and `bash` with the system PATH.
//!
//! A missing shell fails the test when `PRESTOP_REQUIRE_SHELLS=1` (CI sets it); otherwise
//! the test prints a skip note and runs with the shells it has.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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
