//! `prestop-clean sidecar`: idles, cleans on SIGTERM/SIGINT, exits 0 — as PID 1 of a PID
//! namespace (where a signal without a handler is dropped) and as an ordinary process.
//! Also `prestop-clean install`, the init container that delivers the program.

mod support;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};
use support::agent::NodeAgent;
use support::{wait_until, Sandbox, BIN};

const LIMIT: Duration = Duration::from_secs(20);

/// Forwards the child's stderr lines to a channel.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("piped stderr");
    let (send, receive) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    receive
}

fn wait_for_line(lines: &mpsc::Receiver<String>, needle: &str) -> String {
    loop {
        match lines.recv_timeout(LIMIT) {
            Ok(line) if line.contains(needle) => return line,
            Ok(_) => {}
            Err(err) => panic!("no line with {needle:?}: {err}"),
        }
    }
}

fn fill(sandbox: &Sandbox) {
    fs::create_dir_all(sandbox.target.join("job/out")).expect("mkdir");
    fs::write(sandbox.target.join("job/out/result"), "junk").expect("write");
    fs::write(sandbox.target.join(".lock"), "").expect("write");
    std::os::unix::fs::symlink(&sandbox.canary, sandbox.target.join("link")).expect("symlink");
}

/// Waits for the ready line, checks nothing was deleted, signals `pid`, and checks the
/// cleanup and exit 0 of `child`.
fn signal_and_check(mut child: Child, pid: u32, signal: Signal, sandbox: &Sandbox) {
    let lines = stderr_lines(&mut child);
    wait_for_line(&lines, "sidecar ready");
    assert!(
        sandbox.target.join("job/out/result").exists(),
        "deleted before the signal"
    );
    assert!(sandbox.target.join(".lock").exists());
    let pid = Pid::from_raw(pid as i32).expect("pid");
    kill_process(pid, signal).expect("kill");
    let summary = wait_for_line(&lines, "emptied");
    assert!(summary.contains(": 5 entries, 4 B in "), "{summary}");
    let mut status = None;
    assert!(wait_until(LIMIT, || {
        status = child.try_wait().expect("wait");
        status.is_some()
    }));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    sandbox.assert_emptied();
    sandbox.assert_canary();
}

/// The sidecar for the sandbox, which lies on the test machine's filesystem: cleaned on
/// the word of `agent`.
fn sidecar(command: &mut Command, sandbox: &Sandbox, agent: &NodeAgent) -> Child {
    command
        .arg(BIN)
        .arg("sidecar")
        .args(agent.args())
        .arg("--target")
        .arg(&sandbox.target)
        .args(support::on_whole_filesystem(&sandbox.target))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sidecar")
}

#[test]
fn sidecar_cleans_on_sigterm_and_sigint() {
    for signal in [Signal::TERM, Signal::INT] {
        let sandbox = Sandbox::new();
        fill(&sandbox);
        let mut command = Command::new("env");
        let agent = NodeAgent::start();
        let child = sidecar(&mut command, &sandbox, &agent);
        let pid = child.id();
        signal_and_check(child, pid, signal, &sandbox);
    }
}

/// The PID of `parent`'s only child (unshare --fork runs ours as its child).
fn only_child(parent: u32) -> Option<u32> {
    let children = fs::read_to_string(format!("/proc/{parent}/task/{parent}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

#[test]
fn sidecar_as_pid_1_of_a_pid_namespace() {
    let flags = ["--pid", "--fork", "--mount-proc", "--kill-child"];
    let Some(unshare) = support::unshare(&flags) else {
        return;
    };
    let sandbox = Sandbox::new();
    fill(&sandbox);
    let mut command = Command::new(unshare);
    command.args(flags);
    let agent = NodeAgent::start();
    let child = sidecar(&mut command, &sandbox, &agent);
    let mut inner = None;
    assert!(wait_until(LIMIT, || {
        inner = only_child(child.id());
        inner.is_some()
    }));
    let inner = inner.expect("inner pid");
    // It is PID 1 inside: its status file names both PIDs.
    let status = fs::read_to_string(format!("/proc/{inner}/status")).expect("status");
    let nspid = status
        .lines()
        .find(|l| l.starts_with("NSpid:"))
        .expect("NSpid");
    assert!(nspid.trim_end().ends_with("\t1"), "{nspid}");
    signal_and_check(child, inner, Signal::TERM, &sandbox);
}

#[test]
fn install_copies_the_program_atomically() {
    let sandbox = Sandbox::new();
    let dir = sandbox.path("emptydir");
    fs::create_dir(&dir).expect("mkdir");
    // A half-written copy from an earlier attempt, and an old program: both replaced.
    fs::write(dir.join(".prestop-clean.tmp"), "partial").expect("write");
    fs::write(dir.join("prestop-clean"), "old").expect("write");
    for _ in 0..2 {
        let output = Command::new(BIN)
            .arg("install")
            .arg(&dir)
            .output()
            .expect("run");
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            support::stderr(&output)
        );
        let installed = dir.join("prestop-clean");
        assert_eq!(
            fs::read(&installed).expect("read"),
            fs::read(BIN).expect("read")
        );
        let mode = fs::metadata(&installed).expect("stat").permissions().mode();
        assert_eq!(mode & 0o7777, 0o555);
        let mut names = support::entries(&dir);
        names.sort();
        assert_eq!(names, ["prestop-clean"]);
        // It runs from there.
        let output = Command::new(&installed).output().expect("run installed");
        assert_eq!(output.status.code(), Some(2));
    }
    let output = Command::new(BIN)
        .arg("install")
        .arg(sandbox.path("missing"))
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    assert!(support::stderr(&output).contains("cannot install into"));
}
