//! The walk itself: the cleaner program (`prestop-clean empty`) as the gone pod's user, in
//! its own process, guarded by the in-use check while it runs (issue 26, items 2 and 4).
//!
//! - **Whose rights.** The child starts as root (the reaper), becomes the pod's uid, gid
//!   and groups with no capability, verifies that with the kernel, and only then walks
//!   ([`prestop_clean::as_user`]). It gets no environment, `/` as its directory and no
//!   descriptor of the reaper's but its three standard ones (Rust opens every other with
//!   `O_CLOEXEC`).
//! - **Guarded.** The in-use check runs once more before the child starts (the last full
//!   check was made before the walk's own watch listed the node, which can take
//!   seconds: a pod bound meanwhile must not lose one interval of removals), and again
//!   every [`GUARD_INTERVAL`] while it walks;
//!   as soon as it finds a user (or cannot tell), the walk is stopped: the reaper closes
//!   the child's stdin, a pipe on which the child waits in a thread of its own and then
//!   sends itself `SIGKILL` (a process may always signal itself; the reaper, root without
//!   `CAP_KILL`, may not signal a process of another uid), and also sends `SIGKILL`
//!   itself, which works where it has `CAP_KILL`. A reaper that dies closes the pipe
//!   too: no walk outlives its guard. The directory then stays recorded, and the entries
//!   removed so far are known from the child's last progress line. A user that arrives
//!   mid-walk loses at most what the walk removes in one interval plus one check
//!   (docs/REAPER.md gives the figures).
//! - **Bounded.** The report is read up to [`MAX_REPORT`] bytes (64 named survivors of
//!   any path length fit), stderr up to [`MAX_STDERR`]; the rest is drained and dropped,
//!   so a child can never block on a full pipe nor make the reaper's memory grow.

use crate::reaper::in_use::Busy;
use crate::reaper::user::PodUser;
use prestop_clean::argv::EmptyArgs;
use prestop_clean::{wire, Report};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often the in-use check runs again during a walk.
pub const GUARD_INTERVAL: Duration = Duration::from_millis(100);
/// The longest report read from the child.
const MAX_REPORT: usize = 16 << 20;
/// The longest stderr kept from the child (its summary line, or why it refused).
const MAX_STDERR: usize = 64 << 10;

/// How a guarded walk ended.
#[derive(Debug)]
pub enum Walked {
    /// The walk finished; its report.
    Done(Report),
    /// A user arrived (or whether one did could not be told): the child was killed.
    Stopped {
        busy: Busy,
        /// Entries removed and bytes freed before (the child's last progress line).
        removed: u64,
        bytes: u64,
        elapsed: Duration,
    },
    /// The cleaner did not walk, or its report cannot be read: one sentence.
    Failed(String),
}

/// Runs `cleaner empty` on `location` as `user` once `in_use` finds no user, with
/// `in_use` again every `interval`.
pub fn walk_as(
    cleaner: &Path,
    user: &PodUser,
    location: &str,
    interval: Duration,
    in_use: &dyn Fn() -> Result<(), Busy>,
) -> Walked {
    let start = Instant::now();
    if let Err(busy) = in_use() {
        return Walked::Stopped {
            busy,
            removed: 0,
            bytes: 0,
            elapsed: start.elapsed(),
        };
    }
    let args = EmptyArgs {
        user: user.into(),
        path: location.to_owned(),
    };
    let spawned = Command::new(cleaner)
        .args(args.render())
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            return Walked::Failed(format!(
                "cannot run the cleaner program {}: {error}",
                cleaner.display()
            ))
        }
    };
    let (Some(stop), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Walked::Failed("the cleaner's output pipes are missing".to_owned());
    };
    // The child's stdout closes when it exits: that, not a poll, ends the guard.
    let (closed, finished) = mpsc::channel();
    let report = std::thread::spawn(move || {
        let text = read_bounded(stdout, MAX_REPORT);
        let _ = closed.send(());
        text
    });
    let errors = std::thread::spawn(move || read_bounded(stderr, MAX_STDERR));
    let mut stopped = None;
    while let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(interval) {
        if let Err(busy) = in_use() {
            stopped = Some(busy);
            break;
        }
    }
    drop(stop);
    if stopped.is_some() {
        // EPERM without CAP_KILL: the closed pipe stops it then.
        let _ = child.kill();
    }
    let status = child.wait();
    let (text, overflow) = report.join().unwrap_or_default();
    let (errors, _) = errors.join().unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    if let Some(busy) = stopped {
        let (removed, bytes) = wire::last_progress(&text);
        return Walked::Stopped {
            busy,
            removed,
            bytes,
            elapsed: start.elapsed(),
        };
    }
    let said = String::from_utf8_lossy(&errors);
    let said = said.lines().last().unwrap_or("").trim();
    let status = match status {
        Ok(status) => status,
        Err(error) => return Walked::Failed(format!("cannot wait for the cleaner: {error}")),
    };
    if overflow {
        return Walked::Failed(format!(
            "the cleaner's report is longer than {MAX_REPORT} bytes ({status})"
        ));
    }
    match (status.code(), wire::decode(&text)) {
        (Some(0 | 1), Ok(report)) => Walked::Done(report),
        (Some(0 | 1), Err(why)) => {
            Walked::Failed(format!("the cleaner's report is not valid: {why}"))
        }
        _ => Walked::Failed(format!("the cleaner did not walk ({status}): {said}")),
    }
}

/// Everything `from` gives until its end: the first `max` bytes, and whether there was
/// more (drained and dropped).
fn read_bounded(mut from: impl Read, max: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    let mut overflow = false;
    loop {
        match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                let room = max.saturating_sub(kept.len());
                kept.extend_from_slice(&buffer[..n.min(room)]);
                overflow |= n > room;
            }
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    (kept, overflow)
}
