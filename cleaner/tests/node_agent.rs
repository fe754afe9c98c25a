//! The node agent under attack (`prestop-clean node-agent`, src/agent.rs): the real
//! binary serving a node tree of the sandbox (`--host-root`), and clients that send what
//! the protocol allows and what it does not. Each request is answered `same`, `differs`
//! or `refused` (or dropped), the agent keeps serving, and nothing on the node or behind
//! a received descriptor is touched.

mod support;

use std::ffi::OsStr;
use std::fs;
use std::io::{IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{symlink, FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use prestop_clean::agent::{ask, encode_request, Verdict, PLACES_PER_PEER};
use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use support::agent::NodeAgent;
use support::{assert_canary, plant_canary, wait_until, Sandbox, BIN};

/// `node/mnt/scratch/{job,other}`, a canary at `node/etc/secret`, symlinks
/// `node/mnt/scratch/link -> job` and `node/mnt/scratch/up -> /etc`, and an agent serving
/// that node for `--allow /mnt/scratch`.
fn node(sandbox: &Sandbox) -> NodeAgent {
    let root = sandbox.path("node");
    fs::create_dir_all(root.join("mnt/scratch/job/work")).expect("mkdir");
    fs::create_dir_all(root.join("mnt/scratch/other")).expect("mkdir");
    fs::write(root.join("mnt/scratch/job/work/f"), "data").expect("write");
    plant_canary(&root.join("etc/secret"));
    symlink("job", root.join("mnt/scratch/link")).expect("symlink");
    symlink("/etc", root.join("mnt/scratch/up")).expect("symlink");
    NodeAgent::start_with(&root, &["/mnt/scratch"])
}

/// The node is as it was: every file, symlink and canary.
fn assert_node_untouched(sandbox: &Sandbox) {
    let root = sandbox.path("node");
    assert_eq!(
        fs::read_to_string(root.join("mnt/scratch/job/work/f"))
            .ok()
            .as_deref(),
        Some("data")
    );
    assert_eq!(
        fs::read_link(root.join("mnt/scratch/link")).expect("link"),
        Path::new("job")
    );
    assert!(root.join("mnt/scratch/other").is_dir());
    assert_canary(&root.join("etc/secret"));
}

fn open(path: &Path) -> OwnedFd {
    fs::File::open(path).expect("open").into()
}

/// Sends `bytes` with `fds` in one `sendmsg` and reads the answer until the agent closes.
fn raw(agent: &NodeAgent, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> String {
    let stream = UnixStream::connect(&agent.socket).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() {
        assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
    }
    // An agent that is busy answers and closes at once: the send may then fail (EPIPE),
    // and the answer is still there to read.
    match sendmsg(
        &stream,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    ) {
        Ok(sent) => assert_eq!(sent, bytes.len()),
        Err(rustix::io::Errno::PIPE | rustix::io::Errno::CONNRESET) => {}
        Err(err) => panic!("sendmsg: {err}"),
    }
    let mut answer = Vec::new();
    let _ = (&stream).read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

fn refused(answer: &str) -> bool {
    answer.starts_with("refused: ") && answer.ends_with('\n') && answer.lines().count() == 1
}

fn open_fds(agent: &mut NodeAgent) -> usize {
    let pid = agent.child().id();
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fds")
        .count()
}

#[test]
fn the_node_agent_answers_same_only_for_the_very_directory() {
    let sandbox = Sandbox::new();
    let agent = node(&sandbox);
    let socket = agent.socket.to_str().expect("utf-8");
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let other = open(&sandbox.path("node/mnt/scratch/other"));
    assert_eq!(ask(socket, "/mnt/scratch/job", job.as_fd()), Verdict::Same);
    // The prefix above it, another directory, a missing one, a symlink on the node (even
    // to the very directory), one on the way, one leading outside: to the pod, one and the
    // same answer that speaks only of its own directory (issue 32: what it could tell
    // apart mapped another uid's 0700 directory). The agent's log says which it was.
    let theirs = format!(
        "the pod's directory is {}",
        identity_of(&sandbox.path("node/mnt/scratch/other"))
    );
    let ours = format!(
        "the pod's directory is {}",
        identity_of(&sandbox.path("node/mnt/scratch/job"))
    );
    for (host, dir, pods, logged) in [
        ("/mnt/scratch", &job, &ours, "the node's /mnt/scratch is "),
        (
            "/mnt/scratch/job",
            &other,
            &theirs,
            "the node's /mnt/scratch/job is ",
        ),
        (
            "/mnt/scratch/gone",
            &job,
            &ours,
            "the node has no /mnt/scratch/gone",
        ),
        (
            "/mnt/scratch/link",
            &job,
            &ours,
            "the node's /mnt/scratch/link is a symlink on the node",
        ),
        (
            "/mnt/scratch/link/work",
            &job,
            &ours,
            "the node's /mnt/scratch/link, on the way to /mnt/scratch/link/work, is a symlink",
        ),
        (
            "/mnt/scratch/up/secret",
            &job,
            &ours,
            "the node's /mnt/scratch/up, on the way to",
        ),
    ] {
        let verdict = ask(socket, host, dir.as_fd());
        assert_eq!(
            verdict,
            Verdict::Differs(format!(
                "the node's {host} is not the pod's directory ({pods}); the node agent's log \
                 on the node says why"
            )),
            "{host}"
        );
        let log = agent.log();
        let line = log
            .lines()
            .rfind(|line| line.contains(&format!(": {host}: differs: ")))
            .unwrap_or_else(|| panic!("{host} not logged: {log}"));
        assert!(line.contains(&format!("[on the node: {logged}")), "{line}");
    }
    // Outside --allow, whatever it is.
    let secret = open(&sandbox.path("node/etc/secret"));
    let Verdict::Refused(why) = ask(socket, "/etc/secret", secret.as_fd()) else {
        panic!("outside --allow")
    };
    assert!(
        why.contains("/etc/secret is not at or below an allowed prefix (/mnt/scratch)"),
        "{why}"
    );
    assert_node_untouched(&sandbox);
}

#[test]
fn paths_that_are_not_absolute_and_normalized_are_refused() {
    let sandbox = Sandbox::new();
    let agent = node(&sandbox);
    let socket = agent.socket.to_str().expect("utf-8");
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    for host in [
        "mnt/scratch/job",
        "/mnt/scratch/../scratch/job",
        "/mnt/scratch/job/..",
        "/mnt/scratch/./job",
        "/mnt//scratch/job",
        "/mnt/scratch/job/",
        "/mnt/scratch/job\0",
        "/mnt/scratch/../../../etc/secret",
    ] {
        let verdict = ask(socket, host, job.as_fd());
        assert!(
            matches!(&verdict, Verdict::Refused(why) if why.contains("not absolute and normalized")),
            "{host:?}: {verdict:?}"
        );
    }
    assert_node_untouched(&sandbox);
}

#[test]
fn requests_with_zero_or_several_descriptors_are_refused_and_closed() {
    let sandbox = Sandbox::new();
    let mut agent = node(&sandbox);
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let request = encode_request(b"/mnt/scratch/job");
    // Warm up (the first request starts the agent's threads), then count its descriptors.
    assert_eq!(raw(&agent, &request, &[job.as_fd()]), "same\n");
    let before = open_fds(&mut agent);
    for count in [0, 2, 5, 8] {
        let fds: Vec<BorrowedFd<'_>> = (0..count).map(|_| job.as_fd()).collect();
        let answer = raw(&agent, &request, &fds);
        assert!(refused(&answer), "{count}: {answer}");
        assert!(answer.contains("descriptors, not exactly one"), "{answer}");
    }
    // The descriptor riding a second message counts too.
    let stream = UnixStream::connect(&agent.socket).expect("connect");
    for part in [&request[..5], &request[5..]] {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = [job.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&fds));
        sendmsg(
            &stream,
            &[IoSlice::new(part)],
            &mut control,
            SendFlags::NOSIGNAL,
        )
        .expect("send");
    }
    let mut answer = String::new();
    let _ = (&stream).read_to_string(&mut answer);
    assert!(answer.contains("carried 2 descriptors"), "{answer}");
    assert!(
        wait_until(Duration::from_secs(5), || open_fds(&mut agent) == before),
        "the agent kept descriptors: {} open, {before} before",
        open_fds(&mut agent)
    );
    assert_eq!(raw(&agent, &request, &[job.as_fd()]), "same\n");
    assert_node_untouched(&sandbox);
}

#[test]
fn garbage_and_overlong_requests_are_refused() {
    let sandbox = Sandbox::new();
    let mut agent = node(&sandbox);
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let long = format!("/mnt/scratch/{}", "x/".repeat(2500));
    let mut overlong = encode_request(long.as_bytes());
    overlong.truncate(5000);
    let requests: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        b"prestop-identity 3 16 /mnt/scratch/job\n".to_vec(),
        b"prestop-identity 1 016 /mnt/scratch/job\n".to_vec(),
        b"prestop-identity 1 15 /mnt/scratch/job\n".to_vec(),
        b"prestop-identity 1 -16 /mnt/scratch/job\n".to_vec(),
        b"prestop-identity 1 99999 /mnt/scratch/job\n".to_vec(),
        b"prestop-identity 1 0 \n".to_vec(),
        b"prestop-identity 1 16 /mnt/scratch/job\nprestop-identity 1 16 /mnt/scratch/job\n"
            .to_vec(),
        overlong,
        vec![0xff; 64],
    ];
    for request in &requests {
        let answer = raw(&agent, request, &[job.as_fd()]);
        assert!(
            refused(&answer),
            "{:?}: {answer}",
            String::from_utf8_lossy(request)
        );
    }
    // A request cut short by the client's shutdown.
    let stream = UnixStream::connect(&agent.socket).expect("connect");
    (&stream)
        .write_all(b"prestop-identity 1 16 /mnt")
        .expect("write");
    stream
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    let mut answer = String::new();
    let _ = (&stream).read_to_string(&mut answer);
    assert!(
        answer.starts_with("refused: the request ended early"),
        "{answer}"
    );
    assert!(agent.is_running());
    assert_eq!(
        raw(&agent, &encode_request(b"/mnt/scratch/job"), &[job.as_fd()]),
        "same\n"
    );
    assert_node_untouched(&sandbox);
}

#[test]
fn a_fifo_or_a_file_instead_of_a_directory_is_refused_and_never_read() {
    let sandbox = Sandbox::new();
    let agent = node(&sandbox);
    let fifo_path = sandbox.path("fifo");
    let status = Command::new("mkfifo")
        .arg(&fifo_path)
        .status()
        .expect("mkfifo");
    assert!(status.success());
    // Read-write and non-blocking: opening does not wait for a writer.
    let fifo: OwnedFd = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&fifo_path)
        .expect("open fifo")
        .into();
    fs::File::from(fifo.try_clone().expect("dup"))
        .write_all(b"still here")
        .expect("write fifo");
    let file_path = sandbox.path("node/mnt/scratch/job/work/f");
    let file = open(&file_path);
    let request = encode_request(b"/mnt/scratch/job");
    let answer = raw(&agent, &request, &[fifo.as_fd()]);
    assert_eq!(
        answer,
        "refused: the pod's descriptor for /mnt/scratch/job is a FIFO, not a directory\n"
    );
    let answer = raw(&agent, &request, &[file.as_fd()]);
    assert_eq!(
        answer,
        "refused: the pod's descriptor for /mnt/scratch/job is a regular file, not a directory\n"
    );
    // What was in the FIFO is still there: the agent never read it.
    let mut left = [0u8; 32];
    let n = fs::File::from(fifo).read(&mut left).expect("read fifo");
    assert_eq!(&left[..n], b"still here");
    assert!(fs::metadata(&fifo_path)
        .expect("fifo")
        .file_type()
        .is_fifo());
    assert_node_untouched(&sandbox);
}

/// One silent client holds one place for at most 5 s, and others are served meanwhile;
/// silent clients fill their own share of the places (this test's: it is no pod), and the
/// next from the same share is told `busy` at once; many clients at once are each
/// answered; afterwards the agent serves as before.
#[test]
fn silent_and_many_clients_neither_block_nor_crash_the_agent() {
    let sandbox = Sandbox::new();
    let mut agent = node(&sandbox);
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let request = encode_request(b"/mnt/scratch/job");
    let started = Instant::now();
    let silent: Vec<UnixStream> = (0..PLACES_PER_PEER)
        .map(|_| UnixStream::connect(&agent.socket).expect("connect"))
        .collect();
    assert!(
        wait_until(Duration::from_secs(5), || raw(
            &agent,
            &request,
            &[job.as_fd()]
        ) == "busy\n"),
        "{PLACES_PER_PEER} silent clients did not fill their share"
    );
    for stream in &silent {
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .expect("timeout");
        let mut answer = String::new();
        let _ = (&*stream).read_to_string(&mut answer);
        assert_eq!(answer, "refused: no whole request within 5 s\n");
    }
    let waited = started.elapsed();
    assert!(waited >= Duration::from_secs(4), "{waited:?}");
    assert!(waited < Duration::from_secs(12), "{waited:?}");
    // 64 clients at once, each with its own descriptor.
    let answers: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..64)
            .map(|_| {
                let (agent, request) = (&agent, &request);
                let dir = open(&sandbox.path("node/mnt/scratch/job"));
                scope.spawn(move || raw(agent, request, &[dir.as_fd()]))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("client"))
            .collect()
    });
    assert!(
        answers.iter().all(|a| a == "same\n" || a == "busy\n"),
        "{answers:?}"
    );
    assert!(answers.iter().any(|a| a == "same\n"), "{answers:?}");
    assert!(agent.is_running());
    assert_eq!(raw(&agent, &request, &[job.as_fd()]), "same\n");
    assert_node_untouched(&sandbox);
}

#[test]
fn the_socket_is_open_to_every_uid_and_only_a_stale_socket_is_replaced() {
    let sandbox = Sandbox::new();
    let mut first = node(&sandbox);
    let meta = fs::metadata(&first.socket).expect("socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o666);
    let dir = first.socket.parent().expect("dir").to_owned();
    assert_eq!(
        fs::metadata(&dir).expect("dir").permissions().mode() & 0o777,
        0o755
    );
    // Killed without a chance to clean up: its socket stays, stale.
    first.child().kill().expect("kill");
    first.child().wait().expect("wait");
    assert!(UnixStream::connect(&first.socket).is_err());
    let again = Command::new(BIN)
        .arg("node-agent")
        .args([OsStr::new("--host-root"), sandbox.path("node").as_os_str()])
        .args([OsStr::new("--socket"), first.socket.as_os_str()])
        .stderr(fs::File::create(sandbox.path("again.log")).expect("log"))
        .spawn()
        .expect("spawn");
    let mut again = Guard(again);
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let socket = first.socket.to_str().expect("utf-8").to_owned();
    assert!(
        wait_until(Duration::from_secs(10), || ask(
            &socket,
            "/mnt/scratch/job",
            job.as_fd()
        ) == Verdict::Same),
        "the stale socket was not replaced: {}",
        fs::read_to_string(sandbox.path("again.log")).unwrap_or_default()
    );
    // A file that is not a socket is never replaced.
    let _ = again.0.kill();
    let _ = again.0.wait();
    let file = sandbox.path("not-a-socket");
    fs::write(&file, "keep").expect("write");
    let output = Command::new(BIN)
        .arg("node-agent")
        .args([OsStr::new("--host-root"), sandbox.path("node").as_os_str()])
        .args([OsStr::new("--socket"), file.as_os_str()])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr)
        .contains("exists and is not a socket: not replaced"));
    assert_eq!(fs::read_to_string(&file).expect("file"), "keep");
}

#[test]
fn sigterm_stops_the_agent_with_status_0_and_each_request_is_logged_escaped() {
    let sandbox = Sandbox::new();
    let mut agent = node(&sandbox);
    let socket = agent.socket.to_str().expect("utf-8").to_owned();
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    assert!(matches!(
        ask(&socket, "/mnt/scratch/a\nsame\nb", job.as_fd()),
        Verdict::Differs(_)
    ));
    let pid = rustix::process::Pid::from_raw(agent.child().id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("kill");
    let status = agent.child().wait().expect("wait");
    assert_eq!(status.code(), Some(0));
    let log = agent.log();
    let me = std::process::id();
    let line = format!(
        "prestop-clean node-agent: pid {me} uid {}: /mnt/scratch/a\\nsame\\nb: differs: the \
         node's /mnt/scratch/a\\nsame\\nb is not the pod's directory",
        rustix::process::getuid().as_raw()
    );
    assert!(log.contains(&line), "no {line:?} in\n{log}");
    assert!(
        !log.lines().any(|l| l == "same" || l.starts_with("b:")),
        "{log}"
    );
}

/// `major:minor inode N` of a directory, as the agent names identities.
fn identity_of(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path).expect("stat");
    format!(
        "{}:{} inode {}",
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev()),
        meta.ino()
    )
}

/// Kills and reaps a child when dropped.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
