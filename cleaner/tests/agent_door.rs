//! The node agent as a door any pod can lean on (issue 32, the fourth review's findings 5
//! and 6): one pod's idle connections, a `busy` agent, a descriptor on a filesystem whose
//! server never answers, a prefix written with a trailing `/`. Each attack runs against
//! the real binary; the legitimate client next to it must still get its answer.

mod support;

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use prestop_clean::agent::{ask, ask_with_patience, Verdict, PLACES_PER_PEER};
use support::agent::{NodeAgent, START_AGENT_SH};
use support::cgroup::PodCgroup;
use support::{is_root, skip, unshare, wait_until, Sandbox, BIN};

/// `node/mnt/scratch/job` and an agent serving that node for `--allow /mnt/scratch`.
fn node(sandbox: &Sandbox, extra: &[&str]) -> NodeAgent {
    let root = sandbox.path("node");
    fs::create_dir_all(root.join("mnt/scratch/job")).expect("mkdir");
    let mut args = vec!["--allow", "/mnt/scratch"];
    args.extend_from_slice(extra);
    NodeAgent::start_with_args(&root, &args)
}

fn open(path: &Path) -> OwnedFd {
    fs::File::open(path).expect("open").into()
}

/// How many requests the agent has turned away as busy, from its log.
fn busy_answers(agent: &NodeAgent) -> usize {
    agent
        .log()
        .lines()
        .filter(|line| line.ends_with(": busy") || line.ends_with(": refused: busy"))
        .count()
}

/// One pod's idle connections fill only that pod's share of the agent: another pod (here
/// the test, outside any pod) is answered at once. Before, 16 idle connections of any pod
/// made every cleaner on the node skip.
#[test]
fn idle_connections_of_one_pod_leave_other_pods_served() {
    let sandbox = Sandbox::new();
    let agent = node(&sandbox, &[]);
    let Some(cgroup) = PodCgroup::new("0b5e1c9e-3f1d-4c1e-9a43-6f0e2c5d7a11") else {
        return;
    };
    let _holder = cgroup.hold_connections(&agent.socket, 20);
    // 20 connections: whatever the places, at least 4 are turned away, and they are the
    // last the agent accepted, so all 20 have been seen.
    assert!(
        wait_until(Duration::from_secs(10), || busy_answers(&agent) >= 4),
        "{}",
        agent.log()
    );
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let socket = agent.socket.to_str().expect("utf-8");
    let started = Instant::now();
    let verdict = ask_with_patience(socket, "/mnt/scratch/job", job.as_fd(), Duration::ZERO);
    assert_eq!(verdict, Verdict::Same, "{}", agent.log());
    assert!(started.elapsed() < Duration::from_secs(2));
    // The log names the pod the kernel says asked, not what it claimed.
    assert!(
        agent
            .log()
            .contains("pod 0b5e1c9e-3f1d-4c1e-9a43-6f0e2c5d7a11: -: busy"),
        "{}",
        agent.log()
    );
}

/// `busy` is not no: a cleaner whose share is taken asks again, backing off, and is
/// answered once a place frees. Before, it skipped its target at the first `busy`.
#[test]
fn busy_is_not_no_the_cleaner_asks_again() {
    let sandbox = Sandbox::new();
    let agent = node(&sandbox, &[]);
    let held: Vec<UnixStream> = (0..20)
        .map(|_| UnixStream::connect(&agent.socket).expect("connect"))
        .collect();
    assert!(
        wait_until(Duration::from_secs(10), || busy_answers(&agent) >= 4),
        "{}",
        agent.log()
    );
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        drop(held);
    });
    let job = open(&sandbox.path("node/mnt/scratch/job"));
    let started = Instant::now();
    let verdict = ask(
        agent.socket.to_str().expect("utf-8"),
        "/mnt/scratch/job",
        job.as_fd(),
    );
    let waited = started.elapsed();
    release.join().expect("release");
    assert_eq!(verdict, Verdict::Same, "{}", agent.log());
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
    assert!(
        agent
            .log()
            .lines()
            .filter(|line| line.ends_with(": busy"))
            .count()
            > 16,
        "the cleaner was never turned away: {}",
        agent.log()
    );
    // A share held for longer than the patience is a refusal that says so.
    let before = busy_answers(&agent);
    let _held: Vec<UnixStream> = (0..PLACES_PER_PEER + 2)
        .map(|_| UnixStream::connect(&agent.socket).expect("connect"))
        .collect();
    assert!(wait_until(Duration::from_secs(5), || busy_answers(&agent)
        >= before + 2));
    let verdict = ask_with_patience(
        agent.socket.to_str().expect("utf-8"),
        "/mnt/scratch/job",
        job.as_fd(),
        Duration::from_millis(300),
    );
    let Verdict::Refused(why) = verdict else {
        panic!("{verdict:?}")
    };
    assert!(why.contains("stayed busy for 0.3 s"), "{why}");
}

const FUSE_NEVER_ANSWERS: &str = r#"
D=$1 BIN=$2
mount --make-rprivate /
mkdir -p "$D/node/mnt/scratch/job" "$D/node/mnt/scratch/fuse"
HOST_ROOT="$D/node" start_agent "$D/agent.sock" --allow /mnt/scratch
python3 - "$D" <<'PY'
import os, socket, subprocess, sys, time
d = sys.argv[1]
# A FUSE filesystem whose server never answers: not even its INIT.
dev = os.open("/dev/fuse", os.O_RDWR)
subprocess.run(["mount", "-t", "fuse", "-o",
                f"fd={dev},rootmode=40000,user_id=0,group_id=0",
                "parked", f"{d}/node/mnt/scratch/fuse"], pass_fds=(dev,), check=True)
parked = os.open(f"{d}/node/mnt/scratch/fuse", os.O_PATH | os.O_DIRECTORY)
job = os.open(f"{d}/node/mnt/scratch/job", os.O_RDONLY | os.O_DIRECTORY)

def send(host, fd):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    s.connect(f"{d}/agent.sock")
    try:
        socket.send_fds(s, [b"prestop-identity 1 %d %s\n" % (len(host), host)], [fd])
    except (BrokenPipeError, ConnectionResetError):
        # An agent whose places are taken answers `busy` and closes at once, maybe before
        # the request arrives: the answer is still there to read (as the cleaner does).
        pass
    return s

def answer(s):
    got = b""
    try:
        while not got.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        return "no answer\n"
    except ConnectionResetError:
        pass
    return got.decode() or "nothing\n"

# More requests than the agent has places, all at once, each with the parked directory.
pending = [send(b"/mnt/scratch/fuse", parked) for _ in range(20)]
for s in pending:
    print("parked:", answer(s), end="")
started = time.monotonic()
print("legit:", answer(send(b"/mnt/scratch/job", job)), end="")
print("legit took %.1f s" % (time.monotonic() - started))
PY
"#;

/// A descriptor on a filesystem whose server never answers (FUSE here, NFS on a node)
/// cannot park the agent: its filesystem is known from the asker's mount table before
/// anything touches it, and it is refused. Before, each such request parked a place in
/// `fstat` for ever, and after 16 every cleaner on the node was told `busy`.
#[test]
fn a_descriptor_on_a_filesystem_that_never_answers_cannot_park_the_agent() {
    if !Path::new("/dev/fuse").exists() {
        skip("no /dev/fuse");
        return;
    }
    let Some(unshare) = unshare(&["-m"]) else {
        return;
    };
    let sandbox = Sandbox::new();
    let output = Command::new(unshare)
        .args(["-m", "sh", "-euc"])
        .arg(format!("{START_AGENT_SH}{FUSE_NEVER_ANSWERS}"))
        .arg("sh")
        .arg(sandbox.dir.path())
        .arg(BIN)
        .output()
        .expect("unshare");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{out}\n{err}");
    let parked: Vec<&str> = out.lines().filter(|l| l.starts_with("parked: ")).collect();
    assert_eq!(parked.len(), 20, "{out}");
    assert!(
        parked.iter().all(|line| line.ends_with(": busy")
            || line.contains("is on a fuse filesystem, whose server may never answer")),
        "{out}"
    );
    assert!(
        parked.iter().any(|line| line.contains("fuse filesystem")),
        "{out}"
    );
    assert!(out.contains("legit: same\n"), "{out}\n{err}");
}

/// One normalization for the webhook and the agent: a prefix written with a trailing `/`
/// (as `config.allowedHostPathPrefixes={/mnt/scratch/}` passes it) is the same prefix.
/// Before, the agent refused its `--allow` and exited on every node.
#[test]
fn a_prefix_written_with_a_trailing_slash_is_the_same_prefix() {
    let sandbox = Sandbox::new();
    let root = sandbox.path("node");
    fs::create_dir_all(root.join("mnt/scratch/job")).expect("mkdir");
    let agent = NodeAgent::start_with(&root, &["/mnt/scratch/", "//mnt/other/./"]);
    assert!(
        agent.log().contains("below /mnt/scratch, /mnt/other"),
        "{}",
        agent.log()
    );
    let job = open(&root.join("mnt/scratch/job"));
    let socket = agent.socket.to_str().expect("utf-8");
    assert_eq!(ask(socket, "/mnt/scratch/job", job.as_fd()), Verdict::Same);
    let refused = Command::new(BIN)
        .args(["node-agent", "--host-root", "/", "--socket"])
        .arg(sandbox.path("never.sock"))
        .args(["--allow", "/mnt/../etc"])
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("--allow /mnt/../etc is not an absolute path without .."),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// A prefix behind a symlink is the operator's layout, not an attack (issue 32, finding
/// 1): on RHCOS `/mnt` is a link to `var/mnt`. The agent resolves the allowed prefix by
/// the one rule the reaper uses (`prestop_clean::prefix`: root's links in directories
/// only root can write), and follows nothing below it. Before, every hook on such a node
/// was refused, and all cleaning fell to the reaper.
#[test]
fn a_prefix_behind_a_root_owned_symlink_is_the_nodes_layout() {
    if !is_root() {
        skip("the links must be root's");
        return;
    }
    let sandbox = Sandbox::new();
    let root = sandbox.path("node");
    fs::create_dir_all(root.join("var/mnt/scratch/job")).expect("mkdir");
    fs::create_dir_all(root.join("var/mnt/scratch/other")).expect("mkdir");
    symlink("var/mnt", root.join("mnt")).expect("symlink");
    symlink("job", root.join("var/mnt/scratch/link")).expect("symlink");
    let agent = NodeAgent::start_with(&root, &["/mnt/scratch"]);
    let socket = agent.socket.to_str().expect("utf-8");
    let job = open(&root.join("var/mnt/scratch/job"));
    assert_eq!(
        ask(socket, "/mnt/scratch/job", job.as_fd()),
        Verdict::Same,
        "{}",
        agent.log()
    );
    // Below the prefix nothing is followed, root's link or not.
    assert!(matches!(
        ask(socket, "/mnt/scratch/link", job.as_fd()),
        Verdict::Differs(_)
    ));
    assert!(
        agent
            .log()
            .contains("[on the node: the node's /mnt/scratch/link (on the node /var/mnt/scratch/link) is a symlink on the node"),
        "{}",
        agent.log()
    );
    // The way to the prefix must be root's alone: a link another user owns, or one in a
    // directory others may write, is not followed.
    rustix::fs::chownat(
        rustix::fs::CWD,
        root.join("mnt"),
        Some(rustix::fs::Uid::from_raw(65534)),
        None,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .expect("lchown");
    assert!(matches!(
        ask(socket, "/mnt/scratch/job", job.as_fd()),
        Verdict::Differs(_)
    ));
    assert!(
        agent
            .log()
            .contains("/mnt is a symlink owned by uid 65534, not root"),
        "{}",
        agent.log()
    );
    rustix::fs::chownat(
        rustix::fs::CWD,
        root.join("mnt"),
        Some(rustix::fs::Uid::ROOT),
        None,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .expect("lchown");
    fs::set_permissions(&root, fs::Permissions::from_mode(0o777)).expect("chmod");
    assert!(matches!(
        ask(socket, "/mnt/scratch/job", job.as_fd()),
        Verdict::Differs(_)
    ));
    assert!(agent.log().contains("others may write"), "{}", agent.log());
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(ask(socket, "/mnt/scratch/job", job.as_fd()), Verdict::Same);
}
