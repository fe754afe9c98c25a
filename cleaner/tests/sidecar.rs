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
    sidecar_with(command.arg(BIN), sandbox, &agent.args())
}

/// `prestop-clean sidecar OPTIONS --target SANDBOX …`, its stderr piped.
fn sidecar_with<S: AsRef<std::ffi::OsStr>>(
    command: &mut Command,
    sandbox: &Sandbox,
    options: &[S],
) -> Child {
    command
        .arg("sidecar")
        .args(options)
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

/// Issue 31, sandbox recreation: the kubelet stops every container of a pod it can
/// restart in place (any `restartPolicy` but `Never`) exactly as at the pod's end, our
/// sidecar with SIGTERM, then starts them all again on the same volumes. The sidecar of
/// such a pod (`--restartable`) empties nothing on a signal alone: without an agent, or
/// with one that cannot say the pod is ending (`prestop-clean node-agent` has no API
/// server; `prestop-injector node-agent` does, e2e/reaper `restartable_pod`), every file
/// stays for the containers started again, and its line says why.
#[test]
fn a_restartable_pods_sidecar_removes_nothing_on_a_signal_alone() {
    let agent = NodeAgent::start();
    for with_agent in [false, true] {
        let sandbox = Sandbox::new();
        fill(&sandbox);
        // Stopped as in the recreation, then started again in place: twice.
        for _ in 0..2 {
            let mut options: Vec<std::ffi::OsString> = Vec::new();
            if with_agent {
                options.extend(agent.args());
            }
            options.push("--restartable".into());
            let mut child = sidecar_with(&mut Command::new(BIN), &sandbox, &options);
            let lines = stderr_lines(&mut child);
            wait_for_line(&lines, "sidecar ready");
            let pid = Pid::from_raw(child.id() as i32).expect("pid");
            kill_process(pid, Signal::TERM).expect("kill");
            let line = wait_for_line(&lines, "skipped");
            assert!(
                line.contains("the kubelet can restart this pod in place")
                    && line.contains("emptied only on the node's word that the pod is ending"),
                "{line}"
            );
            let why = if with_agent {
                "the asking process is in no pod's cgroup"
            } else {
                "no node agent is configured"
            };
            assert!(line.contains(why), "{line}");
            assert!(wait_until(LIMIT, || matches!(
                child.try_wait(),
                Ok(Some(_))
            )));
            assert!(sandbox.target.join("job/out/result").exists(), "{line}");
            assert!(sandbox.target.join(".lock").exists());
            sandbox.assert_canary();
        }
    }
}
