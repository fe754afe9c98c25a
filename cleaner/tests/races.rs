//! A concurrent writer swaps directories for symlinks to canaries while the cleaner runs
//! (`renameat2(RENAME_EXCHANGE)`, so at every instant the name is one or the other), for
//! hundreds of runs: the canaries survive every one. Also swaps of an intermediate
//! directory of the target path, and directories moved away during a deep walk.

mod support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use rustix::fs::{renameat_with, RenameFlags, CWD};
use support::agent::NodeAgent;
use support::{stderr, Sandbox, BIN};

const RUNS: usize = 200;
const FILES: usize = 100;

/// A canary directory whose file names are the victim's, so following the link would
/// delete them.
fn plant_named_canary(dir: &Path) {
    fs::create_dir_all(dir.join("sub")).expect("mkdir");
    for i in 0..FILES {
        fs::write(dir.join(format!("f{i}")), "canary").expect("write");
    }
    fs::write(dir.join("sub/f0"), "canary").expect("write");
}

fn assert_named_canary(dir: &Path, run: usize) {
    for i in 0..FILES {
        assert!(
            dir.join(format!("f{i}")).is_file(),
            "run {run}: canary f{i} deleted"
        );
    }
    assert!(
        dir.join("sub/f0").is_file(),
        "run {run}: canary sub/f0 deleted"
    );
}

fn fill_victim(dir: &Path) {
    let _ = fs::create_dir_all(dir.join("sub"));
    for i in 0..FILES {
        let _ = fs::write(dir.join(format!("f{i}")), "junk");
    }
    let _ = fs::write(dir.join("sub/f0"), "junk");
}

/// Exchanges each pair `(a, b)` in turn until `stop`, recreating the symlink `b` →
/// `link_to` when the cleaner removed it. Returns the number of exchanges.
fn swapper(
    pairs: Vec<(PathBuf, PathBuf)>,
    link_to: PathBuf,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            for (a, b) in &pairs {
                match renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
                    // Yield so that, on a loaded machine, the cleaner still gets the
                    // CPU between exchanges (a busy loop starves it into long runs).
                    Ok(()) => {
                        swaps += 1;
                        thread::yield_now();
                    }
                    Err(_) => {
                        // One side is gone: put back whichever is missing.
                        if fs::symlink_metadata(b).is_err() && fs::symlink_metadata(a).is_ok() {
                            let _ = symlink(&link_to, b);
                        } else if fs::symlink_metadata(a).is_err() {
                            let _ = fs::create_dir(a);
                        }
                    }
                }
            }
        }
        swaps
    })
}

/// Runs the cleaner on `target` while the pairs are exchanged: its status, its stderr
/// and the number of exchanges.
fn clean_while_swapping(
    agent: &NodeAgent,
    target: &Path,
    pairs: Vec<(PathBuf, PathBuf)>,
    link_to: &Path,
) -> (Option<i32>, String, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = swapper(pairs, link_to.to_owned(), stop.clone());
    let output = Command::new(BIN)
        .arg("hook")
        .args(agent.args())
        .arg("--target")
        .arg(target)
        .args(support::on_whole_filesystem(target))
        .stdin(Stdio::null())
        .output()
        .expect("run prestop-clean");
    stop.store(true, Ordering::Relaxed);
    let swaps = handle.join().expect("swapper");
    (output.status.code(), stderr(&output), swaps)
}

#[test]
fn swapping_a_directory_for_a_symlink_never_reaches_the_canary() {
    let sandbox = Sandbox::on_tmpfs();
    // /dev/shm is its own filesystem: its prefixes are cleaned with the node's word.
    let agent = NodeAgent::start();
    let canary = sandbox.path("named-canary");
    plant_named_canary(&canary);
    let swaps = AtomicU64::new(0);
    let mut incomplete = 0;
    let started = Instant::now();
    for run in 0..RUNS {
        // Two swap points: at the top, and two levels down.
        let victim = sandbox.target.join("victim");
        let deep = sandbox.target.join("a/b/victim");
        fill_victim(&victim);
        fill_victim(&deep);
        let _ = symlink(&canary, sandbox.target.join(".swap"));
        let _ = symlink(&canary, sandbox.target.join("a/b/.swap"));
        let pairs = vec![
            (victim.clone(), sandbox.target.join(".swap")),
            (deep.clone(), sandbox.target.join("a/b/.swap")),
        ];
        let (status, err, n) = clean_while_swapping(&agent, &sandbox.target, pairs, &canary);
        swaps.fetch_add(n, Ordering::Relaxed);
        assert!(matches!(status, Some(0 | 1)), "run {run}: {status:?} {err}");
        if status == Some(1) {
            // Only a writer that kept recreating entries may leave something.
            assert!(
                err.contains("kept changing")
                    || err.contains("entries left")
                    || err.contains("entry left"),
                "run {run}: {err}"
            );
            incomplete += 1;
        }
        assert_named_canary(&canary, run);
        sandbox.assert_canary();
    }
    eprintln!(
        "{RUNS} runs in {:.1?}, {} exchanges during the runs, {incomplete} runs left \
         something the writer recreated",
        started.elapsed(),
        swaps.load(Ordering::Relaxed)
    );
    assert!(
        swaps.load(Ordering::Relaxed) > 0,
        "the swapper never ran during a cleanup"
    );
}

#[test]
fn swapping_an_intermediate_directory_of_the_target_path() {
    let sandbox = Sandbox::on_tmpfs();
    // /dev/shm is its own filesystem: its prefixes are cleaned with the node's word.
    let agent = NodeAgent::start();
    // base/mid/t is the target; base/.alt → alt, where alt/t holds the canary.
    let base = sandbox.path("base");
    let alt = sandbox.path("alt");
    plant_named_canary(&alt.join("t"));
    fs::create_dir_all(base.join("mid/t")).expect("mkdir");
    symlink(&alt, base.join(".alt")).expect("symlink");
    let target = base.join("mid/t");
    let (mut emptied, mut skipped) = (0, 0);
    for run in 0..RUNS {
        // The real mid may be either name right now; fill whichever is the directory.
        for mid in [base.join("mid"), base.join(".alt")] {
            if fs::symlink_metadata(&mid).is_ok_and(|m| m.is_dir()) {
                fill_victim(&mid.join("t"));
            }
        }
        let pairs = vec![(base.join("mid"), base.join(".alt"))];
        let (status, err, _) = clean_while_swapping(&agent, &target, pairs, &alt);
        if err.contains("emptied") {
            emptied += 1;
            assert_eq!(status, Some(0), "run {run}: {err}");
        } else {
            // Refused by the cleaner's own walk, or by the agent, which tells the pod only
            // that the node's directory there is not its own (its log says: a symlink).
            assert!(
                err.contains("is a symlink") || err.contains("is not the pod's directory"),
                "run {run}: {err}"
            );
            assert_eq!(status, Some(1), "run {run}: {err}");
            skipped += 1;
        }
        assert_named_canary(&alt.join("t"), run);
    }
    eprintln!("{RUNS} runs: {emptied} emptied the real directory, {skipped} refused the symlink");
}

/// Deeper than the descriptor window, so the walk climbs back by `..`: a writer keeps
/// moving a middle directory out of the target (next to a canary) and back. The walk
/// must notice that `..` is no longer where it came from and never delete beside it.
#[test]
fn moving_a_directory_out_during_a_deep_walk() {
    let sandbox = Sandbox::on_tmpfs();
    // /dev/shm is its own filesystem: its prefixes are cleaned with the node's word.
    let agent = NodeAgent::start();
    let outside = sandbox.path("outside");
    fs::create_dir(&outside).expect("mkdir");
    support::plant_canary(&outside.join("canary"));
    let mut restarted = 0;
    for run in 0..20 {
        let mut dir = sandbox.target.clone();
        let mut middle = None;
        for level in 0..80 {
            dir.push(format!("l{level}"));
            if level == 10 {
                middle = Some(dir.clone());
            }
        }
        fs::create_dir_all(&dir).expect("mkdir -p");
        for i in 0..20 {
            fs::write(dir.join(format!("f{i}")), "junk").expect("write");
        }
        let middle = middle.expect("middle");
        let away = outside.join("moved");
        let stop = Arc::new(AtomicBool::new(false));
        let mover = {
            let (middle, away, stop) = (middle.clone(), away.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = fs::rename(&middle, &away);
                    let _ = fs::rename(&away, &middle);
                }
            })
        };
        let output = Command::new(BIN)
            .arg("hook")
            .args(agent.args())
            .arg("--target")
            .arg(&sandbox.target)
            .args(support::on_whole_filesystem(&sandbox.target))
            .output()
            .expect("run");
        stop.store(true, Ordering::Relaxed);
        mover.join().expect("mover");
        let err = stderr(&output);
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "run {run}: {err}"
        );
        if err.contains("passes: the tree changed") {
            restarted += 1;
        }
        support::assert_canary(&outside.join("canary"));
        // Whatever was moved away may have been emptied (it was the target's), but
        // nothing beside it in `outside`.
        let mut beside: Vec<_> = support::entries(&outside);
        beside.retain(|name| name != "moved");
        assert_eq!(beside, ["canary"], "run {run}");
        let _ = fs::remove_dir_all(&away);
        let _ = fs::remove_dir_all(&sandbox.target);
        fs::create_dir(&sandbox.target).expect("reset");
    }
    eprintln!("20 deep runs with a mover: {restarted} walked the tree again after it moved");
}
