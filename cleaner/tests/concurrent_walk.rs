//! The concurrent walk (issue 28) at full concurrency — `PRESTOP_CLEAN_JOBS=8` or more,
//! whatever the CPUs — keeps every rule of the sequential one: symlink swaps at several
//! depths and swapped intermediate directories never reach a canary; a descriptor limit
//! of 16 still empties a deep tree; deep and wide trees are emptied with exact counts;
//! mounts inside the target survive; a cleanup killed half way leaves a tree that a
//! second run (the reaper's library call) empties completely; one large directory
//! shared between the workers in batches keeps them all, and its counts.

mod support;

use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustix::fs::{mkdirat, openat, renameat_with, Mode, OFlags, RenameFlags, CWD};
use support::agent::NodeAgent;
use support::{assert_canary, plant_canary, stderr, unshare, Sandbox, BIN};

/// The node agent every cleanup here asks: the targets lie under their own path on a
/// filesystem mounted whole (`/dev/shm`, the machine's `/`), which the identity check
/// accepts only with the node's word (tests/identity.rs tests that rule itself).
/// One agent per test thread, stopped when the test ends (a thread-local is dropped at
/// the thread's exit; a static would outlive the test binary).
fn agent_socket() -> PathBuf {
    thread_local! {
        static AGENT: NodeAgent = NodeAgent::start();
    }
    AGENT.with(|agent| agent.socket.clone())
}

/// More workers than this machine has CPUs, so that they interleave.
const JOBS: &str = "8";

/// `prestop-clean hook` on `target` with `jobs` workers.
fn clean_with_jobs(target: &Path, jobs: &str) -> Output {
    Command::new(BIN)
        .args(["hook", "--node-agent"])
        .arg(agent_socket())
        .arg("--target")
        .arg(target)
        .args(support::on_whole_filesystem(target))
        .env("PRESTOP_CLEAN_JOBS", jobs)
        .stdin(Stdio::null())
        .output()
        .expect("run prestop-clean")
}

/// `dir` holding `files` files named like the canary's, so following a swapped link
/// would delete the canary's.
fn fill(dir: &Path, files: usize) {
    let _ = fs::create_dir_all(dir.join("sub"));
    for i in 0..files {
        let _ = fs::write(dir.join(format!("f{i}")), "junk");
    }
    let _ = fs::write(dir.join("sub/f0"), "junk");
}

fn plant_named_canary(dir: &Path, files: usize) {
    fs::create_dir_all(dir.join("sub")).expect("mkdir");
    for i in 0..files {
        fs::write(dir.join(format!("f{i}")), "canary").expect("write");
    }
    fs::write(dir.join("sub/f0"), "canary").expect("write");
}

fn assert_named_canary(dir: &Path, files: usize, run: usize) {
    for i in 0..files {
        assert_eq!(
            fs::read_to_string(dir.join(format!("f{i}")))
                .ok()
                .as_deref(),
            Some("canary"),
            "run {run}: canary {}/f{i} deleted",
            dir.display()
        );
    }
    assert!(dir.join("sub/f0").is_file(), "run {run}: canary sub/f0");
}

/// Exchanges each pair in turn until `stop`; recreates a side the cleaner removed (the
/// symlink → `link_to`, or an empty directory). Returns the number of exchanges.
fn swapper(
    pairs: Vec<(PathBuf, PathBuf)>,
    link_to: PathBuf,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            for (dir, link) in &pairs {
                match renameat_with(CWD, dir, CWD, link, RenameFlags::EXCHANGE) {
                    Ok(()) => {
                        swaps += 1;
                        thread::yield_now();
                    }
                    Err(_) => {
                        if fs::symlink_metadata(link).is_err() && fs::symlink_metadata(dir).is_ok()
                        {
                            let _ = symlink(&link_to, link);
                        } else if fs::symlink_metadata(dir).is_err() {
                            let _ = fs::create_dir_all(dir);
                        }
                    }
                }
            }
        }
        swaps
    })
}

/// Cleans `target` at [`JOBS`] workers while [`swapper`] exchanges `pairs` (recreating
/// links to `link_to`), adding its exchanges to `swaps`. The cleanup either emptied
/// everything or left only what the writer recreated meanwhile; returns whether it left
/// something.
fn clean_while_swapping(
    target: &Path,
    pairs: Vec<(PathBuf, PathBuf)>,
    link_to: &Path,
    swaps: &AtomicU64,
    run: usize,
) -> bool {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = swapper(pairs, link_to.to_path_buf(), stop.clone());
    let output = clean_with_jobs(target, JOBS);
    stop.store(true, Ordering::Relaxed);
    swaps.fetch_add(handle.join().expect("swapper"), Ordering::Relaxed);
    let err = stderr(&output);
    match output.status.code() {
        Some(0) => {
            assert!(err.contains("emptied"), "run {run}: {err}");
            false
        }
        Some(1) => {
            // Only what the writer recreated during the cleanup may be left.
            assert!(
                err.contains("kept changing") || err.contains(" left: "),
                "run {run}: {err}"
            );
            true
        }
        other => panic!("run {run}: {other:?} {err}"),
    }
}

/// Directory ↔ symlink-to-canary exchanges at depths 1, 3 and 5, plus an intermediate
/// directory (holding a victim and more directories) exchanged with a symlink to the
/// canary's parent, while eight workers walk a tree wide enough that every worker has
/// directories handed to it. Nothing outside the target is ever removed.
#[test]
fn symlink_swaps_at_every_depth_never_reach_a_canary_at_full_concurrency() {
    const RUNS: usize = 120;
    const FILES: usize = 40;
    let sandbox = Sandbox::on_tmpfs();
    let canary = sandbox.path("named-canary");
    plant_named_canary(&canary, FILES);
    // The parent of a canary whose layout is the intermediate directory's.
    let canary_parent = sandbox.path("canary-parent");
    plant_named_canary(&canary_parent.join("victim"), FILES);
    let t = sandbox.target.clone();
    let swap_points = [
        t.join("victim"),
        t.join("a/b/victim"),
        t.join("c/d/e/f/victim"),
    ];
    let middle = t.join("m");
    let (swaps, mut incomplete) = (AtomicU64::new(0), 0);
    let started = Instant::now();
    for run in 0..RUNS {
        // Where the swapper stopped with a symlink under a directory's name, remove it
        // first: filling through it would write into the canary.
        for dir in swap_points.iter().chain([&middle]) {
            if fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
                fs::remove_file(dir).expect("rm symlink");
            }
        }
        for w in 0..12 {
            fill(&t.join(format!("wide{w}")), FILES);
        }
        let mut pairs = Vec::new();
        for victim in &swap_points {
            fill(victim, FILES);
            let link = victim.with_file_name(".swap");
            let _ = symlink(&canary, &link);
            pairs.push((victim.clone(), link));
        }
        fill(&middle.join("victim"), FILES);
        fill(&middle.join("x/y"), FILES);
        let _ = symlink(&canary_parent, t.join(".m-swap"));
        pairs.push((middle.clone(), t.join(".m-swap")));
        if clean_while_swapping(&t, pairs, &canary, &swaps, run) {
            incomplete += 1;
        }
        assert_named_canary(&canary, FILES, run);
        assert_named_canary(&canary_parent.join("victim"), FILES, run);
        sandbox.assert_canary();
    }
    eprintln!(
        "{RUNS} runs at {JOBS} workers in {:.1?}, {} exchanges during the runs, {incomplete} \
         left something the writer recreated",
        started.elapsed(),
        swaps.load(Ordering::Relaxed)
    );
    assert!(swaps.load(Ordering::Relaxed) > 0, "the swapper never ran");
}

/// A large directory is emptied by every worker, in batches of its files removed
/// through the directory's descriptor. While they do, one such directory is exchanged
/// whole with a symlink to a canary holding the same names, and in another some files
/// are exchanged with symlinks to the canary's files or, once removed, come back as
/// directories (a name listed as a file that is a directory when a batch gets to it).
/// Nothing in the canary is ever removed.
#[test]
fn a_large_directory_shared_between_workers_never_reaches_a_canary() {
    const RUNS: usize = 40;
    const FILES: usize = 3_000;
    let sandbox = Sandbox::on_tmpfs();
    let canary = sandbox.path("flat-canary");
    plant_named_canary(&canary, FILES);
    let t = sandbox.target.clone();
    // Exchanged whole; and the one whose files are exchanged (never through the first:
    // the swapper would then exchange the canary's own files).
    let (flat, files) = (t.join("flat"), t.join("files"));
    let (swaps, mut incomplete) = (AtomicU64::new(0), 0);
    for run in 0..RUNS {
        if fs::symlink_metadata(&flat).is_ok_and(|m| m.file_type().is_symlink()) {
            fs::remove_file(&flat).expect("rm symlink");
        }
        // Filling through a symlink left by the swapper would write into the canary.
        let _ = fs::remove_dir_all(&files);
        fill(&flat, FILES);
        fill(&files, FILES);
        let _ = symlink(&canary, t.join(".flat-swap"));
        let mut pairs = vec![(flat.clone(), t.join(".flat-swap"))];
        for i in (7..FILES).step_by(401) {
            let link = files.join(format!(".l{i}"));
            let _ = symlink(canary.join(format!("f{i}")), &link);
            pairs.push((files.join(format!("f{i}")), link));
        }
        if clean_while_swapping(&t, pairs, &canary, &swaps, run) {
            incomplete += 1;
        }
        assert_named_canary(&canary, FILES, run);
        sandbox.assert_canary();
    }
    eprintln!(
        "{RUNS} runs of {FILES} files at {JOBS} workers, {} exchanges, {incomplete} left \
         something the writer recreated",
        swaps.load(Ordering::Relaxed)
    );
    assert!(swaps.load(Ordering::Relaxed) > 0, "the swapper never ran");
}

/// A directory of many files at full concurrency, nothing racing: every file is
/// counted once, bytes included, whichever worker removed it.
#[test]
fn a_large_directory_shared_between_workers_is_counted_exactly() {
    let sandbox = Sandbox::on_tmpfs();
    let flat = sandbox.target.join("flat");
    fs::create_dir_all(&flat).expect("mkdir");
    for i in 0..10_000 {
        fs::write(flat.join(format!("f{i}")), "xy").expect("write");
    }
    let output = clean_with_jobs(&sandbox.target, JOBS);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    // 10,000 files of 2 bytes and their directory.
    assert!(err.contains(": 10,001 entries, 19.5 KiB in "), "{err}");
    assert_eq!(fs::read_dir(&sandbox.target).expect("ls").count(), 0);
    sandbox.assert_canary();
}

/// Directories moved between two places inside the target, and one moved out next to a
/// canary and back, while eight workers walk: whatever the walk had opened may be
/// emptied where it went, but nothing beside it outside is touched.
#[test]
fn directories_moved_during_a_concurrent_walk_take_nothing_beside_them() {
    let sandbox = Sandbox::on_tmpfs();
    let outside = sandbox.path("outside");
    fs::create_dir(&outside).expect("mkdir");
    plant_canary(&outside.join("canary"));
    for run in 0..30 {
        let t = &sandbox.target;
        for w in 0..8 {
            fill(&t.join(format!("w{w}/x/y")), 30);
        }
        let (from, to, away) = (t.join("w3/x"), t.join("w5/moved"), outside.join("moved"));
        let stop = Arc::new(AtomicBool::new(false));
        let mover = {
            let (from, to, away, stop) = (from.clone(), to.clone(), away.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = fs::rename(&from, &to);
                    let _ = fs::rename(&to, &away);
                    let _ = fs::rename(&away, &from);
                }
            })
        };
        let output = clean_with_jobs(t, JOBS);
        stop.store(true, Ordering::Relaxed);
        mover.join().expect("mover");
        let err = stderr(&output);
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "run {run}: {err}"
        );
        assert_canary(&outside.join("canary"));
        let mut beside = support::entries(&outside);
        beside.retain(|name| name != "moved");
        assert_eq!(beside, ["canary"], "run {run}: {err}");
        let _ = fs::remove_dir_all(&away);
        let _ = fs::remove_dir_all(t);
        fs::create_dir(t).expect("reset");
    }
}

/// `depth` nested directories below `top` with `files` files at every level, made by
/// descriptor (the path is longer than PATH_MAX).
fn deep_chain(top: &Path, depth: usize, name: &str, files: usize) {
    let mut fd: OwnedFd = openat(CWD, top, OFlags::DIRECTORY, Mode::empty()).expect("open");
    for _ in 0..depth {
        mkdirat(&fd, name, Mode::from_raw_mode(0o755)).expect("mkdirat");
        fd = openat(&fd, name, OFlags::DIRECTORY, Mode::empty()).expect("openat");
        for f in 0..files {
            let file = openat(
                &fd,
                format!("f{f}").as_str(),
                OFlags::CREATE | OFlags::WRONLY,
                Mode::from_raw_mode(0o644),
            );
            drop(file.expect("create"));
        }
    }
}

/// Sixty-four workers asked for, sixteen descriptors allowed: the walk runs with as
/// many workers as fit (here one) and still empties a deep tree and wide siblings.
#[test]
fn many_workers_under_a_limit_of_sixteen_descriptors() {
    let sandbox = Sandbox::new();
    deep_chain(&sandbox.target, 1_200, &"d".repeat(100), 0);
    for w in 0..20 {
        fill(&sandbox.target.join(format!("w{w}")), 20);
    }
    let output = Command::new("sh")
        .args([
            "-c",
            "ulimit -n 16 && exec \"$0\" hook --node-agent \"$AGENT\" --target \"$1\" --host \"$1\" --whole-filesystem",
        ])
        .arg(BIN)
        .arg(&sandbox.target)
        .env("AGENT", agent_socket())
        .env("PRESTOP_CLEAN_JOBS", "64")
        .output()
        .expect("run");
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    // 1,200 levels; 20 × (w, 20 files, sub, sub/f0).
    assert!(err.contains(": 1,660 entries,"), "{err}");
    sandbox.assert_emptied();
    sandbox.assert_canary();
}

/// 2,500 levels (past PATH_MAX, past the window) with a file at each, and beside it a
/// directory of 100,000 entries, at eight workers: all gone, the counts exact, the same
/// as one worker reports on the same tree. Also under `ulimit -n 200`, where three
/// workers fit with 76 queue slots, so that past the 76th level the rest of the chain is
/// walked in place by one worker.
#[test]
fn a_deep_and_a_wide_tree_at_full_concurrency_with_exact_counts() {
    let sandbox = Sandbox::on_tmpfs();
    let make = |sandbox: &Sandbox| {
        fs::create_dir(sandbox.target.join("deep")).expect("mkdir");
        deep_chain(&sandbox.target.join("deep"), 2_500, "level", 1);
        let wide = sandbox.target.join("wide");
        fs::create_dir(&wide).expect("mkdir");
        let first = wide.join("first");
        fs::write(&first, b"12").expect("write");
        for i in 1..100_000 {
            fs::hard_link(&first, wide.join(format!("entry-{i:06}"))).expect("link");
        }
    };
    let mut lines = Vec::new();
    for (jobs, limit) in [(JOBS, None), (JOBS, Some(200)), ("1", None)] {
        make(&sandbox);
        let started = Instant::now();
        let output = match limit {
            None => clean_with_jobs(&sandbox.target, jobs),
            Some(limit) => Command::new("sh")
                .args([
                    "-c",
                    "ulimit -n \"$2\" && exec \"$0\" hook --node-agent \"$AGENT\" --target \"$1\" --host \"$1\" \
                     --whole-filesystem",
                ])
                .arg(BIN)
                .arg(&sandbox.target)
                .env("AGENT", agent_socket())
                .arg(limit.to_string())
                .env("PRESTOP_CLEAN_JOBS", jobs)
                .output()
                .expect("run"),
        };
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{err}");
        // deep + 2,500 levels + 2,500 files; wide + 100,000 names of 2 bytes.
        assert!(
            err.contains(": 105,002 entries, 195.3 KiB in "),
            "{jobs} workers: {err}"
        );
        sandbox.assert_emptied();
        sandbox.assert_canary();
        lines.push(format!(
            "{jobs} workers (descriptors: {limit:?}) in {:.2?}",
            started.elapsed()
        ));
    }
    eprintln!("{}", lines.join(", "));
}

const MOUNTS: &str = r#"
D=$1 BIN=$2 T=$1/target
mount --make-rprivate /
for w in 0 1 2 3 4 5 6 7 8 9; do
  mkdir -p "$T/w$w/x/y"
  for f in 0 1 2 3 4 5 6 7 8 9; do echo junk > "$T/w$w/x/y/f$f"; echo junk > "$T/w$w/f$f"; done
done
mkdir -p "$T/pv" "$T/w3/x/tmp" "$T/w7/pv2"
mount --bind "$D/pv" "$T/pv"
mount --bind "$D/pv" "$T/w7/pv2"
mount -t tmpfs tmpfs "$T/w3/x/tmp"
echo tmpfs > "$T/w3/x/tmp/file"
touch "$T/w5/bound-file"
mount --bind "$D/canary/keep" "$T/w5/bound-file"
set +e
PRESTOP_CLEAN_JOBS=8 "$BIN" hook --node-agent "$AGENT" --target "$T" --host "$T" --whole-filesystem
echo "status=$?"
test -f "$T/w3/x/tmp/file" && echo tmpfs-kept
mountpoint -q "$T/pv" && echo pv-mounted
mountpoint -q "$T/w7/pv2" && echo pv2-mounted
test -e "$T/w0" || echo w0-gone
test -e "$T/w3/x/y" || echo w3-y-gone
"#;

/// Bind mounts of the same filesystem and a tmpfs, at several depths of a tree the eight
/// workers share, survive untouched and are named; everything else goes.
#[test]
fn mounts_survive_a_concurrent_walk() {
    let Some(unshare) = unshare(&["-m"]) else {
        return;
    };
    let sandbox = Sandbox::new();
    let pv = sandbox.path("pv");
    plant_canary(&pv);
    let output = Command::new(unshare)
        .args(["-m", "sh", "-euc", MOUNTS, "sh"])
        .arg(sandbox.dir.path())
        .arg(BIN)
        .env("AGENT", agent_socket())
        .output()
        .expect("run unshare");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = stderr(&output);
    for line in [
        "status=1",
        "tmpfs-kept",
        "pv-mounted",
        "pv2-mounted",
        "w0-gone",
        "w3-y-gone",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "no {line:?} in {out}\n{err}"
        );
    }
    let target = sandbox.target.display();
    // pv, w7/pv2, w5/bound-file, w3/x/tmp; w7, w5, w3 and w3/x that hold them. The
    // summary names the first three the workers met, in no fixed order.
    assert!(
        err.contains(&format!("{target}: 8 entries left: ")),
        "{err}"
    );
    let named = ["pv", "w7/pv2", "w5/bound-file", "w3/x/tmp"]
        .iter()
        .filter(|named| err.contains(&format!("{target}/{named} is a mount point")))
        .count();
    assert_eq!(named, 3, "{err}");
    assert!(err.contains("(and 1 more)"), "{err}");
    assert_canary(&pv);
    sandbox.assert_canary();
}

/// A hook killed (SIGKILL, as at the end of the grace period) in the middle of a large
/// concurrent walk leaves a tree that the reaper's call — the library's
/// `empty_directory`, the same walk — empties completely, touching nothing outside.
#[test]
fn a_walk_killed_half_way_is_finished_by_a_second_run() {
    let sandbox = Sandbox::on_tmpfs();
    for d in 0..200 {
        let dir = sandbox.target.join(format!("d{d}/inner"));
        fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..400 {
            fs::write(dir.join(format!("f{f}")), "x").expect("write");
        }
    }
    let total = 200 * (2 + 400);
    let mut child = Command::new(BIN)
        .args(["hook", "--node-agent"])
        .arg(agent_socket())
        .arg("--target")
        .arg(&sandbox.target)
        .args(support::on_whole_filesystem(&sandbox.target))
        .env("PRESTOP_CLEAN_JOBS", JOBS)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Kill it once some top-level directories are gone, but not all.
    let progressed = support::wait_until(Duration::from_secs(30), || {
        support::entries(&sandbox.target).len() < 190
    });
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert!(progressed, "the walk made no progress");
    let left = support::entries(&sandbox.target).len();
    assert!(
        left > 0,
        "the walk finished before it was killed: try a larger tree"
    );
    let report = prestop_clean::empty_directory(sandbox.target.to_str().expect("utf-8"));
    assert!(report.is_clean(), "{}", report.summary());
    assert!(
        report.removed > 0 && report.removed < total,
        "{}",
        report.summary()
    );
    sandbox.assert_emptied();
    sandbox.assert_canary();
    eprintln!(
        "killed with {left} top-level directories left; then: {}",
        report.summary()
    );
}

/// A container whose pids limit leaves no room for threads (cgroup `pids.max` = 1: the
/// program itself): the workers that cannot be made are workers less, and the one left
/// empties the tree.
#[test]
fn workers_that_cannot_be_started_are_not_a_failure() {
    let base = ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
        .into_iter()
        .map(Path::new)
        .find(|base| base.join("cgroup.procs").is_file() && support::is_root());
    let Some(base) = base else {
        support::skip("no writable pids cgroup");
        return;
    };
    let group = base.join(format!("prestop-clean-test-{}", std::process::id()));
    if fs::create_dir(&group).is_err() || fs::write(group.join("pids.max"), "1").is_err() {
        let _ = fs::remove_dir(&group);
        support::skip("cannot make a pids cgroup with pids.max here");
        return;
    }
    let sandbox = Sandbox::on_tmpfs();
    for w in 0..10 {
        fill(&sandbox.target.join(format!("w{w}/x")), 20);
    }
    let output = Command::new("sh")
        .args([
            "-c",
            "echo $$ > \"$2/cgroup.procs\" && exec \"$0\" hook --node-agent \"$AGENT\" --target \"$1\" --host \"$1\" \
             --whole-filesystem",
        ])
        .arg(BIN)
        .arg(&sandbox.target)
        .env("AGENT", agent_socket())
        .arg(&group)
        .env("PRESTOP_CLEAN_JOBS", JOBS)
        .output()
        .expect("run");
    let _ = fs::remove_dir(&group);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    // 10 × (w, x, 20 files, sub, sub/f0).
    assert!(err.contains(": 240 entries,"), "{err}");
    sandbox.assert_emptied();
    sandbox.assert_canary();
}

/// A `PRESTOP_CLEAN_JOBS` that is not a number of workers from 1 to 256 is a usage
/// error: exit 2, one sentence, and nothing runs — neither the handler nor the cleanup.
#[test]
fn a_bad_number_of_workers_runs_nothing() {
    let sandbox = Sandbox::new();
    fill(&sandbox.target.join("w"), 3);
    let marker = sandbox.path("handler-ran");
    for bad in ["0", "257", "lots", "-1", ""] {
        let output = Command::new(BIN)
            .args(["hook", "--node-agent"])
            .arg(agent_socket())
            .arg("--target")
            .arg(&sandbox.target)
            .args(support::on_whole_filesystem(&sandbox.target))
            .args(["--", "touch"])
            .arg(&marker)
            .env("PRESTOP_CLEAN_JOBS", bad)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {err}");
        assert!(err.contains("PRESTOP_CLEAN_JOBS="), "{bad:?}: {err}");
        assert!(err.contains("nothing was run"), "{bad:?}: {err}");
        assert!(!marker.exists(), "{bad:?}: the handler ran");
        assert!(sandbox.target.join("w/f0").is_file(), "{bad:?}: cleaned");
    }
}
