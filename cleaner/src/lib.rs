//! `prestop-clean`: the program that prestop-injector's hooks and sidecar run.
//!
//! This library holds what the webhook and the program must agree on — the argv format
//! ([`argv`]) — and, for the program and the node reaper, the cleaning itself:
//! [`empty_directory`] removes everything below a directory without ever following a
//! symlink or entering a mount, and returns a [`Report`] of what it did.
//!
//! ```no_run
//! let report = prestop_clean::empty_directory("/scratch");
//! eprintln!("prestop-clean: {}", report.summary());
//! std::process::exit(if report.is_clean() { 0 } else { 1 });
//! ```

pub mod argv;
mod report;
mod target;
mod walk;

use std::os::fd::AsFd;
use std::time::Instant;

use rustix::fs::{fstatvfs, StatVfsMountFlags};

pub use report::{escape, size, thousands, Outcome, Reason, Report, Survivor, MAX_NAMED};
pub use target::check_target;
pub use walk::WINDOW;

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
    };
    let finish = |mut report: Report| {
        report.elapsed = start.elapsed();
        report
    };
    if let Err(why) = check_target(path) {
        report.outcome = Outcome::Skipped(format!("refused: {why}"));
        return finish(report);
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
    // A read-only mount: say so once instead of one EROFS per entry.
    if fstatvfs(&root).is_ok_and(|vfs| vfs.f_flag.contains(StatVfsMountFlags::RDONLY)) {
        let entries = walk::entry_count(&root).unwrap_or(1);
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
    for pass in 1..=MAX_PASSES {
        let mut walk = walk::Walk::new(path, root.as_fd());
        walk.run();
        report.passes = pass;
        report.removed += walk.removed;
        report.bytes += walk.bytes;
        if !walk.changed || walk.stopped || pass == MAX_PASSES {
            report.left = walk.left;
            report.survivors = walk.survivors;
            report.unnamed = walk.unnamed;
            if report.left > 0 {
                report.outcome = Outcome::Incomplete;
            }
            break;
        }
    }
    finish(report)
}
