//! The agent's `same` is a lease (src/hold.rs): a walk removes nothing on an answer that
//! is late but what it grants (a bounded number of entries, so that a slow agent slows
//! the walk but never stalls it), and one walk's withdrawn answer never stops another
//! walk.
//!
//! The agent here is a stand-in on a Unix socket that answers the first question `same`
//! and every later one as the test says, when the test says: how slow a real agent is
//! depends on its node, and the point is what the walk does while it waits. The real agent
//! and the real hook are in may_i_empty.rs. The walks share process-wide state (the
//! deadline, the guard in force), so these tests run one at a time.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prestop_clean::agent::Question;
use prestop_clean::argv::Target;
use prestop_clean::{clean_target_with_progress, empty_directory_jobs, Outcome};

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A directory of `files` empty files, removed with the test.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new(files: usize) -> Tree {
        let dir = tempfile::tempdir().expect("tempdir");
        for i in 0..files {
            std::fs::write(dir.path().join(format!("f{i}")), b"").expect("write");
        }
        Tree(dir)
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn left(&self) -> usize {
        std::fs::read_dir(self.path()).expect("read_dir").count()
    }
    /// The target as the hook names it: cleared by the agent (`--host`, the operator's
    /// exact path, so a whole filesystem such as /tmp's may be it).
    fn target(&self) -> Target {
        let path = self.path().to_str().expect("utf-8").to_owned();
        Target {
            path: path.clone(),
            host: Some(path),
            whole_filesystem: true,
        }
    }
}

/// The stand-in agent: `same` to the first question; each later one gets `later`'s line.
struct Agent {
    _dir: tempfile::TempDir,
    socket: PathBuf,
}

impl Agent {
    fn start(later: impl Fn(usize) -> String + Send + 'static) -> Agent {
        Agent::answering(move |n| {
            if n == 0 {
                "same\n".to_owned()
            } else {
                later(n)
            }
        })
    }
    /// Every question, the first included (numbered from 0), gets `answer`'s line, which
    /// may take its time: the questions are answered one after another.
    fn answering(answer: impl Fn(usize) -> String + Send + 'static) -> Agent {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("agent.sock");
        let listener = UnixListener::bind(&socket).expect("bind");
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { return };
                let answer = answer(n);
                std::thread::spawn(move || answer_once(stream, &answer));
            }
        });
        Agent { _dir: dir, socket }
    }
    /// Every question, the first included, answered `answer(n)` after `delay`.
    fn late(delay: Duration, answer: impl Fn(usize) -> &'static str + Send + 'static) -> Agent {
        Agent::answering(move |n| {
            std::thread::sleep(delay);
            answer(n).to_owned()
        })
    }
    fn question(&self) -> Question<'_> {
        Question {
            socket: Some(self.socket.to_str().expect("utf-8")),
            pod_ending: false,
        }
    }
}

fn answer_once(mut stream: UnixStream, answer: &str) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let _ = stream.write_all(answer.as_bytes());
}

/// A walk slowed to at least 60 ms per 256 entries removed (the progress report's
/// cadence): 3,000 entries take at least 660 ms, far longer than one lease.
fn slow(_: u64, _: u64) {
    std::thread::sleep(Duration::from_millis(60));
}

/// The agent takes 3 s to answer the walk's second question, then says a new user came.
/// The walk must not go on while it waits: it pauses at its first entry past the lease
/// and stops on the answer, leaving most of the tree. Before, it removed all 3,000
/// entries on the first `same` while the question was on its way, and the new user's
/// answer came to a walk already over.
#[test]
fn a_late_answer_pauses_the_walk_and_a_new_user_stops_it() {
    let _one = one_at_a_time();
    let tree = Tree::new(3_000);
    let asked_again = Arc::new(Mutex::new(None::<Instant>));
    let noted = asked_again.clone();
    let agent = Agent::start(move |_| {
        noted.lock().unwrap().get_or_insert_with(Instant::now);
        std::thread::sleep(Duration::from_secs(3));
        "in-use: a new pod on the node reaches it\n".to_owned()
    });
    let report = clean_target_with_progress(&tree.target(), agent.question(), 1, &slow);
    assert!(
        matches!(&report.outcome, Outcome::Skipped(why)
            if why.contains("stopped during the walk") && why.contains("a new pod on the node reaches it")),
        "{:?}",
        report.outcome
    );
    assert!(
        asked_again.lock().unwrap().is_some(),
        "the walk asked again"
    );
    // At 256 entries per 60 ms, one lease (100 ms) and the slack of a busy machine are a
    // few hundred entries; the walk never reached the end.
    let left = tree.left();
    assert!(left > 1_000, "{left} entries left of 3,000");
    assert_eq!(report.removed as usize, 3_000 - left);
}

/// An agent slower than one lease on every answer, the first included (a node under
/// load: 0.57 s per answer was seen in CI), still gets the directory emptied, at its own
/// pace. Before, each `same` renewed a lease already over: the walk removed nothing, and
/// the hook was cut off by its deadline with every file left (67 answers `same` in 38 s).
#[test]
fn answers_slower_than_a_lease_still_empty_the_directory() {
    let _one = one_at_a_time();
    for jobs in [1, 4] {
        let tree = Tree::new(20_000);
        let agent = Agent::late(Duration::from_millis(150), |_| "same\n");
        let (tell, told) = std::sync::mpsc::channel();
        let target = tree.target();
        let socket = agent.socket.to_str().expect("utf-8").to_owned();
        std::thread::spawn(move || {
            let question = Question {
                socket: Some(&socket),
                pod_ending: false,
            };
            let _ = tell.send(clean_target_with_progress(
                &target,
                question,
                jobs,
                &|_, _| (),
            ));
        });
        // About ten late answers' grants: a second and a half.
        let report = told
            .recv_timeout(Duration::from_secs(60))
            .expect("the walk ends within 60 s (it waited for ever)");
        assert_eq!(
            report.outcome,
            Outcome::Emptied,
            "{jobs} workers: {:?}",
            report.outcome
        );
        assert_eq!((report.removed, tree.left()), (20_000, 0), "{jobs} workers");
    }
}

/// What a late `same` allows is bounded: with every answer late, the walk removes at
/// most one grant per `same`, and stops at the first other answer. Here two late `same`
/// then `in-use`, of 20,000 entries: at least half a grant goes (an entry at the top
/// takes a check to be read and one to be removed), and at most two grants. The `in-use`
/// comes 2 s after its question, so that even a walk slowed by a loaded disk uses its
/// last grant whole before it: the lower bound does not depend on the machine.
#[test]
fn a_late_answer_grants_a_bounded_number_of_entries() {
    let _one = one_at_a_time();
    // One worker, and four sharing the grants.
    for jobs in [1, 4] {
        let tree = Tree::new(20_000);
        let agent = Agent::answering(|n| {
            if n < 2 {
                std::thread::sleep(Duration::from_millis(200));
                "same\n".to_owned()
            } else {
                std::thread::sleep(Duration::from_secs(2));
                "in-use: a new pod on the node reaches it\n".to_owned()
            }
        });
        let report = clean_target_with_progress(&tree.target(), agent.question(), jobs, &|_, _| ());
        assert!(
            matches!(&report.outcome, Outcome::Skipped(why)
                if why.contains("stopped during the walk") && why.contains("a new pod on the node reaches it")),
            "{jobs} workers: {:?}",
            report.outcome
        );
        let removed = 20_000 - tree.left();
        assert_eq!(report.removed as usize, removed, "{jobs} workers");
        assert!(
            (2_048..=8_192).contains(&removed),
            "{jobs} workers: {removed} entries removed"
        );
    }
}

/// An agent that answers every question at once keeps the walk going to the end however
/// long it takes: leases are renewed, the walk never waits for long.
#[test]
fn prompt_answers_keep_a_long_walk_going() {
    let _one = one_at_a_time();
    let tree = Tree::new(3_000);
    let questions = Arc::new(AtomicU64::new(0));
    let counted = questions.clone();
    let agent = Agent::start(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        "same\n".to_owned()
    });
    let started = Instant::now();
    let report = clean_target_with_progress(&tree.target(), agent.question(), 1, &slow);
    assert_eq!(report.outcome, Outcome::Emptied, "{:?}", report.outcome);
    assert_eq!((report.removed, tree.left()), (3_000, 0));
    // Asked again about every 50 ms during a walk of at least 660 ms.
    let asked = questions.load(Ordering::SeqCst);
    assert!(asked >= 5, "{asked} questions in {:?}", started.elapsed());
}

/// One target's walk is stopped by the agent (a new user); the next target, walked
/// without the agent's word (as the strict per-pod rule does), must not inherit that
/// stop. Before, the flag stayed set: the second walk stopped at its first entry and was
/// reported `Emptied` with its 10 entries still there.
#[test]
fn a_withdrawn_answer_does_not_stop_the_next_walk() {
    let _one = one_at_a_time();
    let first = Tree::new(3_000);
    let agent = Agent::start(|_| "in-use: a new pod on the node reaches it\n".to_owned());
    let report = clean_target_with_progress(&first.target(), agent.question(), 1, &slow);
    assert!(
        matches!(&report.outcome, Outcome::Skipped(why) if why.contains("stopped during the walk")),
        "{:?}",
        report.outcome
    );
    for jobs in [1, 4] {
        let second = Tree::new(10);
        let report = empty_directory_jobs(second.path().to_str().expect("utf-8"), jobs);
        assert_eq!(report.outcome, Outcome::Emptied, "{jobs} workers");
        assert_eq!((report.removed, second.left()), (10, 0), "{jobs} workers");
    }
}
