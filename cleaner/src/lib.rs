//! `prestop-clean`: the program that prestop-injector's hooks and sidecar run.
//!
//! This library holds what the webhook and the program must agree on — the argv format
//! ([`argv`]) — and the cleaning itself, in two entry points:
//! - [`clean_target`], for the hook and the sidecar inside a pod: checks the target's
//!   identity first ([`identity`]: the opened directory must be the node's directory at
//!   the whole expected host path, by the node agent's word ([`agent`]) or else by the
//!   strict rule on its mount in `/proc/self/mountinfo`; not a whole filesystem unless
//!   allowed, and not another mount's root), then empties it and never enters another
//!   mount's root;
//! - [`empty_directory`], for the node reaper, which works on host paths through its own
//!   host-root mount and has no expected identity to check (it decides by identity on its
//!   own side, from the pods' mounts): the walk alone.
//!
//! Both remove everything below a directory without ever following a symlink or entering
//! a mount, and return a [`Report`] of what they did.
//!
//! ```no_run
//! let report = prestop_clean::empty_directory("/scratch");
//! eprintln!("prestop-clean: {}", report.summary());
//! std::process::exit(if report.is_clean() { 0 } else { 1 });
//! ```

pub mod agent;
pub mod argv;
pub mod as_user;
mod expand;
mod hold;
pub mod host_path;
pub mod identity;
pub mod in_use;
mod jobs;
mod lease;
pub mod mountinfo;
mod pod_cgroup;
pub mod prefix;
pub mod protected;
mod report;
mod target;
mod walk;
pub mod wire;

use std::os::fd::{AsFd, BorrowedFd};
use std::time::Instant;

use rustix::fs::{fstatvfs, StatVfsMountFlags};

pub use jobs::{
    default_jobs, jobs_from_env, JOBS_ENV, MAX_DEFAULT_JOBS, MAX_JOBS, WORKERS_PER_CPU,
};
pub use pod_cgroup::is_pod_uid;
pub use prefix::resolve_prefix;
pub use report::{
    escape, size, thousands, Outcome, Reason, Report, Survivor, MAX_DEPTH, MAX_NAMED,
};
pub use target::check_target;
pub use walk::WINDOW;

/// The file a cleanup cut off by its deadline leaves in its target (created through the
/// target's checked descriptor, empty, never following a link), so that the node reaper
/// can count the directories it finishes after a cut-off (docs/REAPER.md). Anyone who can
/// write the directory can forge it: it is good for counting and nothing else.
pub const CUT_OFF_MARKER: &str = ".prestop-clean-cut-off";

/// Stops every walk of this process at its next entry, for good (the `--deadline` of the
/// hook and the sidecar): what is left stays for the node reaper, and [`walks_stopped`]
/// tells the caller that the reports it gets are cut off.
pub fn stop_walks() {
    walk::STOP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`stop_walks`] was called.
pub fn walks_stopped() -> bool {
    walk::STOP.load(std::sync::atomic::Ordering::SeqCst)
}

/// Passes over a tree that keeps changing (a concurrent writer, a moved directory) before
/// the survivors are reported.
pub const MAX_PASSES: u32 = 3;

/// Empties the directory `path` (absolute and normalized, see [`check_target`]): removes
/// every entry below it, dot-files included, never the directory itself.
///
/// Never follows a symlink (in `path` or below it), never enters a mount (bind mounts of
/// the same filesystem included), survives concurrent renames and symlink swaps. A
/// missing target is [`Outcome::Missing`]; a symlink or non-directory anywhere in `path`,
/// an invalid path or a kernel without `openat2` is [`Outcome::Skipped`] and nothing is
/// touched; survivors (mount points, permission denied, a read-only filesystem, …) make
/// it [`Outcome::Incomplete`] and are named in [`Report::survivors`].
pub fn empty_directory(path: &str) -> Report {
    empty_directory_jobs(path, default_jobs())
}

/// [`empty_directory`] with `jobs` workers (1: one thread, the walk as it always was;
/// fewer than asked when the descriptor limit cannot hold that many).
pub fn empty_directory_jobs(path: &str, jobs: usize) -> Report {
    clean(path, None, jobs, &|_, _| {})
}

/// [`empty_directory_jobs`], telling `progress` the entries removed and bytes freed so
/// far, from whichever worker removed the latest few hundred (`prestop-clean empty`
/// writes them for the node reaper, which may kill the walk halfway).
pub fn empty_directory_with_progress(
    path: &str,
    jobs: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    clean(path, None, jobs, progress)
}

/// Empties `target.path` after checking its identity on the node (docs/DESIGN.md#targets; see
/// [`identity`]): what [`empty_directory`] does, for the hook and the sidecar. A target
/// without `--host`, whose mount shows another host directory than `--host`, that is a
/// whole filesystem without `--whole-filesystem`, or that is another mount's root, is
/// [`Outcome::Skipped`] with one sentence naming both paths, and nothing is touched;
/// directories inside it that are other mounts' roots survive ([`Reason::OtherMount`]).
/// `$(VAR)` in `--host` is expanded from this process's environment. With a socket in
/// `question` (`--node-agent SOCKET`), the node agent's word decides the identity
/// ([`agent`]).
pub fn clean_target(target: &argv::Target, question: agent::Question<'_>) -> Report {
    clean_target_jobs(target, question, default_jobs())
}

/// [`clean_target_jobs`], telling `progress` the entries removed and bytes freed so far,
/// as [`empty_directory_with_progress`] (the hook's report when its walk cannot stop in
/// time).
pub fn clean_target_with_progress(
    target: &argv::Target,
    question: agent::Question<'_>,
    jobs: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    clean(
        &target.path,
        Some((target, &expand::from_env, question)),
        jobs,
        progress,
    )
}

/// [`clean_target`] with `jobs` workers, as [`empty_directory_jobs`].
pub fn clean_target_jobs(
    target: &argv::Target,
    question: agent::Question<'_>,
    jobs: usize,
) -> Report {
    clean_target_with_progress(target, question, jobs, &|_, _| {})
}

type Expected<'t> = (
    &'t argv::Target,
    &'t dyn Fn(&str) -> Option<String>,
    agent::Question<'t>,
);

fn clean(
    path: &str,
    expected: Option<Expected<'_>>,
    jobs: usize,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    let start = Instant::now();
    let mut report = Report {
        target: path.to_owned(),
        outcome: Outcome::Emptied,
        removed: 0,
        bytes: 0,
        left: 0,
        survivors: Vec::new(),
        unnamed: 0,
        passes: 0,
        elapsed: Default::default(),
        without_agent: false,
    };
    let finish = |mut report: Report| {
        report.elapsed = start.elapsed();
        report
    };
    if let Err(why) = check_target(path) {
        report.outcome = Outcome::Skipped(format!("refused: {why}"));
        return finish(report);
    }
    // Before anything else, so that an old hook says why even when the target is gone.
    if let Some((target, lookup, _)) = expected {
        if let Err(why) = identity::expected_host(target, lookup) {
            report.outcome = Outcome::Skipped(why);
            return finish(report);
        }
    }
    let root = match target::open_target(path) {
        Ok(fd) => fd,
        Err(target::NotOpened::Missing) => {
            report.outcome = Outcome::Missing;
            return finish(report);
        }
        Err(target::NotOpened::Skipped(why)) => {
            report.outcome = Outcome::Skipped(why);
            return finish(report);
        }
    };
    let checked = match expected {
        None => None,
        Some((target, lookup, question)) => {
            match identity::check(target, root.as_fd(), lookup, question) {
                Ok(checked) => Some((checked, question)),
                Err(why) => {
                    report.outcome = Outcome::Skipped(why);
                    return finish(report);
                }
            }
        }
    };
    let no_mounts = identity::OtherMounts::default();
    let other_mounts = checked
        .as_ref()
        .map_or(&no_mounts, |(checked, _)| &checked.others);
    let walk = |progress: &(dyn Fn(u64, u64) + Sync)| {
        walk_opened(
            path,
            root.as_fd(),
            other_mounts,
            jobs,
            report,
            start,
            progress,
        )
    };
    let mut report = match &checked {
        Some((checked, question)) if checked.cleared_by_agent => hold::walk_holding(
            *question,
            &checked.host,
            checked.asked,
            root.as_fd(),
            progress,
            walk,
        ),
        _ => walk(progress),
    };
    report.without_agent = checked
        .as_ref()
        .is_some_and(|(checked, _)| !checked.cleared_by_agent);
    if walks_stopped() && !report.is_clean() && expected.is_some() {
        // Cut off (or not started) by the deadline: mark it for the reaper's count. Only
        // the hook and the sidecar, in a target whose identity was checked. An error (an
        // existing marker, a full disk) only loses a count.
        let _ = rustix::fs::openat(
            root.as_fd(),
            CUT_OFF_MARKER,
            rustix::fs::OFlags::CREATE
                | rustix::fs::OFlags::EXCL
                | rustix::fs::OFlags::WRONLY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::from_raw_mode(0o600),
        );
    }
    report
}

/// Empties the opened target `root`, never entering a directory in `other_mounts`, with
/// up to `jobs` workers.
fn walk_opened(
    path: &str,
    root: BorrowedFd<'_>,
    other_mounts: &identity::OtherMounts,
    jobs: usize,
    mut report: Report,
    start: Instant,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Report {
    let finish = |mut report: Report| {
        report.elapsed = start.elapsed();
        report
    };
    // A read-only mount: say so once instead of one EROFS per entry.
    if fstatvfs(root).is_ok_and(|vfs| vfs.f_flag.contains(StatVfsMountFlags::RDONLY)) {
        let entries = walk::entry_count(root).unwrap_or(1);
        if entries > 0 {
            report.outcome = Outcome::Incomplete;
            report.left = entries;
            report.survivors.push(Survivor {
                path: path.as_bytes().to_vec(),
                reason: Reason::ReadOnly,
            });
        }
        return finish(report);
    }
    let (workers, slots) = jobs::plan(jobs, jobs::free_descriptors());
    for pass in 1..=MAX_PASSES {
        // Progress counts from the passes before this one, too.
        let (removed, bytes) = (report.removed, report.bytes);
        let so_far = |r: u64, b: u64| progress(removed + r, bytes + b);
        let walk = if workers == 1 {
            let mut walk = walk::Walk::new(path, root);
            walk.other_mounts = other_mounts;
            let mut report_to = |r: u64, b: u64| so_far(r, b);
            walk.progress = Some(&mut report_to);
            walk.run();
            walk::pool::Tally::from(walk)
        } else {
            walk::pool::run(path, root, other_mounts, workers, slots, &so_far)
        };
        report.passes = pass;
        report.removed += walk.removed;
        report.bytes += walk.bytes;
        if !walk.changed || walk.stopped || pass == MAX_PASSES {
            report.left = walk.left;
            report.survivors = walk.survivors;
            report.unnamed = walk.unnamed;
            if walk.stopped && walks_stopped() {
                // Cut off by the deadline: the rest was never reached, so never counted,
                // but the target is not empty.
                report.left = report.left.max(1);
            }
            if report.left > 0 {
                report.outcome = Outcome::Incomplete;
            }
            break;
        }
    }
    finish(report)
}
