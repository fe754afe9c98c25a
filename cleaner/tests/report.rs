//! The cleanup's report reaches the node agent (issue 39): the real program, a real
//! socket. The kubelet's `FailedPreStopHook` Event no longer carries a hook's output, so
//! the program hands its final line to the agent, which records it on the pod
//! (`prestop-injector node-agent`) or logs it (this static agent). Reporting never
//! changes the cleanup: an agent that predates it, or one that never answers, leaves the
//! exit status and the lines as they were, within a bound.

mod support;

use std::fs;
use std::io::{BufRead, BufReader, IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use prestop_clean::agent::{ask_grace, encode_report, GraceLeft, Outcome};
use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use support::agent::NodeAgent;
use support::{wait_until, Sandbox, BIN};

fn hook(socket: &Path, target: &Path, extra: &[std::ffi::OsString]) -> (Output, Duration) {
    let started = Instant::now();
    let output = Command::new(BIN)
        .arg("hook")
        .arg("--node-agent")
        .arg(socket)
        .arg("--target")
        .arg(target)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .expect("run prestop-clean");
    (output, started.elapsed())
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// An emptied target's line, and a skipped one's, reach the agent with their outcome;
/// the agent names the reporting process from the kernel.
#[test]
fn the_cleanups_line_reaches_the_node_agent() {
    let sandbox = Sandbox::on_tmpfs();
    let agent = NodeAgent::start();
    fs::create_dir_all(sandbox.target.join("a/b")).expect("mkdir");
    fs::write(sandbox.target.join("a/b/f"), "data").expect("write");
    let (output, _) = hook(
        &agent.socket,
        &sandbox.target,
        &support::on_whole_filesystem(&sandbox.target),
    );
    let err = stderr(&output);
    assert!(!err.contains("report"), "{err}");
    // The test machine is shared: another mount namespace that reaches /dev/shm makes the
    // agent say `in-use`. Either way the line the program printed is what the agent got,
    // with the outcome it means.
    let summary = err
        .lines()
        .find_map(|l| l.strip_prefix("prestop-clean: "))
        .expect("a summary line");
    let (outcome, status) = if summary.starts_with("emptied ") {
        ("emptied", 0)
    } else {
        assert!(summary.contains("the node agent says"), "{err}");
        ("refused", 1)
    };
    assert_eq!(output.status.code(), Some(status), "{err}\n{}", agent.log());
    let expected = format!(
        "logged: this node agent has no API server [on the node: report {outcome}: {summary}]"
    );
    assert!(
        wait_until(Duration::from_secs(5), || agent.log().contains(&expected)),
        "{expected}\n{}",
        agent.log()
    );
    // A target without --host is skipped by the program's own rule: reported as such.
    let (output, _) = hook(&agent.socket, &sandbox.target, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        wait_until(Duration::from_secs(5), || agent
            .log()
            .contains("[on the node: report skipped: skipped ")),
        "{}",
        agent.log()
    );
    // Each report names the process the kernel says sent it.
    let reports: Vec<String> = agent
        .log()
        .lines()
        .filter(|l| l.contains("[on the node: report "))
        .map(str::to_owned)
        .collect();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(
        reports
            .iter()
            .all(|l| l.contains(": pid ") || l.contains("uid")),
        "{reports:?}"
    );
}

/// What a fake agent does with one connection.
enum Fake {
    /// Reads the line and answers as an agent that predates reports does.
    Predates,
    /// Accepts and never answers.
    Silent,
}

fn fake_agent(socket: &Path, fake: Fake) -> std::thread::JoinHandle<Vec<u8>> {
    let listener = UnixListener::bind(socket).expect("bind");
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        match fake {
            Fake::Predates => {
                let mut line = Vec::new();
                let mut reader = BufReader::new(&stream);
                let _ = reader.read_until(b'\n', &mut line);
                let _ = (&stream).write_all(b"refused: not a prestop-identity 1 or 2 request\n");
                line
            }
            Fake::Silent => {
                std::thread::sleep(Duration::from_secs(3));
                drop::<UnixStream>(stream);
                Vec::new()
            }
        }
    })
}

/// An agent of an earlier release refuses the report, one that never answers is left
/// after less than a second: the program says so in one line, and its status and other
/// lines are those of the same cleanup without a report.
#[test]
fn an_agent_that_predates_reports_or_never_answers_changes_nothing() {
    let sandbox = Sandbox::on_tmpfs();
    // A target without --host: skipped before any question, so the one connection is
    // the report's.
    let socket = sandbox.path("agent.sock");
    let old = fake_agent(&socket, Fake::Predates);
    let (output, took) = hook(&socket, &sandbox.target, &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let line = old.join().expect("fake agent");
    assert!(line.starts_with(b"prestop-report 2 skipped "), "{line:?}");
    assert!(
        err.contains("the node agent did not record this report: refused: not a prestop-identity"),
        "{err}"
    );
    assert!(took < Duration::from_secs(2), "{took:?}");
    fs::remove_file(&socket).expect("rm");

    let silent = fake_agent(&socket, Fake::Silent);
    let (output, took) = hook(&socket, &sandbox.target, &[]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("could not report to the node agent: no answer within 0.8 s"),
        "{err}"
    );
    assert!(took < Duration::from_millis(1800), "{took:?}");
    assert!(err.contains("skipped "), "{err}");
    silent.join().expect("fake agent");
}

/// One raw request with these descriptors; the agent's answer.
fn raw(agent: &NodeAgent, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> String {
    let stream = UnixStream::connect(&agent.socket).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
    }
    let sent = sendmsg(
        &stream,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    );
    assert_eq!(sent.expect("sendmsg"), bytes.len());
    let mut answer = Vec::new();
    let _ = (&stream).read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

/// A report carries no descriptor (one that did would leave it with the agent), and what
/// is not a whole report is refused at once, not waited for; the agent serves on.
#[test]
fn reports_with_a_descriptor_or_malformed_are_refused() {
    let sandbox = Sandbox::new();
    let agent = NodeAgent::start();
    let dir = fs::File::open(&sandbox.target).expect("open");
    let report = encode_report(Outcome::Emptied, "emptied /scratch: 1 entry, 1 B in 0.01 s");
    assert_eq!(
        raw(&agent, &report, &[dir.as_fd()]),
        "refused: a report carries no descriptor, this one 1\n"
    );
    for bad in [
        &b"prestop-report 2 gone 2 ok\n"[..],
        b"prestop-report 2 emptied 2 o\x07\n",
        b"prestop-report 3 emptied 2 ok\n",
    ] {
        let started = Instant::now();
        let answer = raw(&agent, bad, &[]);
        assert!(answer.starts_with("refused: "), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }
    assert_eq!(
        raw(&agent, &report, &[]),
        "logged: this node agent has no API server\n"
    );
}

/// Issue 39, the sidecar's deadline: `prestop-grace 1` asks how long the asking pod has.
/// It carries no descriptor either, and a process in no pod's cgroup (this test) has no
/// pod to ask about: the static agent answers `unknown`, and the client reads that as no
/// answer to shorten anything by. Anything after the line is not the question.
#[test]
fn a_question_of_time_is_answered_and_carries_no_descriptor() {
    let sandbox = Sandbox::new();
    let agent = NodeAgent::start();
    assert_eq!(
        raw(&agent, b"prestop-grace 1\n", &[]),
        "unknown: the asking process is in no pod's cgroup\n"
    );
    let dir = fs::File::open(&sandbox.target).expect("open");
    assert_eq!(
        raw(&agent, b"prestop-grace 1\n", &[dir.as_fd()]),
        "refused: a question of time carries no descriptor, this one 1\n"
    );
    assert!(raw(&agent, b"prestop-grace 2\n", &[]).starts_with("refused: "));
    assert_eq!(
        ask_grace(agent.socket.to_str().expect("UTF-8")),
        Ok(GraceLeft::Unknown(
            "the asking process is in no pod's cgroup".to_owned()
        ))
    );
    // No agent: an error, which the sidecar reads as "the deadline stands".
    assert!(ask_grace(sandbox.path("no-agent.sock").to_str().expect("UTF-8")).is_err());
}
