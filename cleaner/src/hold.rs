//! The walk holds its answer (issue 38, class 3): the node agent's `same` is true at the
//! instant it is given, and a walk takes longer. A Job's replacement pod bound to the
//! node half way through a one-second walk lost every file it wrote. So while the hook or
//! the sidecar walks a target the agent cleared, the same question is asked again every
//! [`GUARD_INTERVAL`]; the first answer that is not `same` — a new pod bound to the node
//! whose spec reaches the directory, a new mount of it, the pod no longer ending, the
//! agent gone or busy — stops the walk at its next entry, as the deadline does, and what
//! is left stays for the node reaper. The node reaper's walk is guarded the same way.
//!
//! Only a target the agent cleared is guarded: without an agent (the strict per-pod rule)
//! there is nobody to ask, and the rule never depended on the instant.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::agent::{self, Question, Verdict};
use crate::report::{size, thousands};
use crate::{Outcome, Report};

/// How often the question is asked again during a walk: a new user loses at most what
/// the walk removes in this time plus one answer.
pub const GUARD_INTERVAL: Duration = Duration::from_millis(100);

/// How long one asking again may wait for a `busy` agent: the walk does not outlast its
/// guard's silence by more than this.
const PATIENCE: Duration = Duration::from_millis(500);

/// Set when the agent withdrew its answer: every walk stops at its next entry. Reset
/// before each guarded target (the program walks one target at a time).
pub(crate) static WITHDRAWN: AtomicBool = AtomicBool::new(false);

/// Runs `walk` while asking `question` about `host` (the opened target `dir`) again every
/// [`GUARD_INTERVAL`] on a thread of its own; a walk stopped by an answer other than
/// `same` is reported as such. Where no thread can be started (a container whose pids
/// limit is the program alone), the walk's own progress reports ask instead, at most
/// every [`GUARD_INTERVAL`]: between two of them it removes at most
/// [`PROGRESS_EVERY`](crate::walk::PROGRESS_EVERY) entries.
pub(crate) fn walk_holding(
    question: Question<'_>,
    host: &str,
    dir: BorrowedFd<'_>,
    progress: &(dyn Fn(u64, u64) + Sync),
    walk: impl FnOnce(&(dyn Fn(u64, u64) + Sync)) -> Report,
) -> Report {
    WITHDRAWN.store(false, Ordering::SeqCst);
    let guard = Guard {
        question,
        host,
        dir,
        last: Mutex::new(Instant::now()),
        why: Mutex::new(None),
    };
    let done = AtomicBool::new(false);
    let report = std::thread::scope(|scope| {
        let asking = std::thread::Builder::new()
            .name("hold".to_owned())
            .spawn_scoped(scope, || {
                while !done.load(Ordering::SeqCst) && !WITHDRAWN.load(Ordering::SeqCst) {
                    std::thread::park_timeout(GUARD_INTERVAL);
                    if !done.load(Ordering::SeqCst) {
                        guard.ask_if_due();
                    }
                }
            });
        let report = match &asking {
            Ok(_) => walk(progress),
            Err(_) => walk(&|removed, bytes| {
                progress(removed, bytes);
                guard.ask_if_due();
            }),
        };
        done.store(true, Ordering::SeqCst);
        if let Ok(asking) = asking {
            asking.thread().unpark();
        }
        report
    });
    let why = guard.why.into_inner().unwrap_or_else(|e| e.into_inner());
    match why {
        // A walk that stops early reports what it removed, not what is left: count it.
        Some(why) => match crate::walk::entry_count(dir) {
            Ok(0) => report,
            Ok(left) => withdrawn(report, left, &why),
            Err(_) => withdrawn(report, 1, &why),
        },
        None => report,
    }
}

/// The question asked again, and what the last asking found.
struct Guard<'a> {
    question: Question<'a>,
    host: &'a str,
    dir: BorrowedFd<'a>,
    /// When it was last asked (from the walk's start).
    last: Mutex<Instant>,
    why: Mutex<Option<String>>,
}

impl Guard<'_> {
    /// Asks again when [`GUARD_INTERVAL`] has passed since the last time and no other
    /// thread is asking; an answer other than `same` stops every walk.
    fn ask_if_due(&self) {
        let Ok(mut last) = self.last.try_lock() else {
            return;
        };
        if last.elapsed() < GUARD_INTERVAL || WITHDRAWN.load(Ordering::SeqCst) {
            return;
        }
        *last = Instant::now();
        if let Some(why) = ask_again(self.question, self.host, self.dir) {
            *self.why.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            WITHDRAWN.store(true, Ordering::SeqCst);
        }
    }
}

/// `None` while the answer is still `same`; else why not, as the cleaner's line says it.
fn ask_again(question: Question<'_>, host: &str, dir: BorrowedFd<'_>) -> Option<String> {
    let socket = question.socket?;
    let verdict = if question.pod_ending {
        agent::ask_ending(socket, host, dir)
    } else {
        agent::ask_with_patience(socket, host, dir, PATIENCE)
    };
    match verdict {
        Verdict::Same => None,
        Verdict::InUse(why) | Verdict::NotEnding(why) | Verdict::Differs(why) => {
            Some(format!("the node agent says: {why}"))
        }
        Verdict::Refused(why) => Some(format!("the node agent refused: {why}")),
        Verdict::Busy => Some("the node agent was busy and did not judge it again".to_owned()),
        Verdict::Unreachable(why) => Some(format!("the node agent was not reachable: {why}")),
    }
}

/// The report of a walk stopped because the answer changed: what it removed, and why it
/// stopped; the rest is the node reaper's.
fn withdrawn(mut report: Report, left: u64, why: &str) -> Report {
    report.left = left;
    report.outcome = Outcome::Skipped(format!(
        "stopped during the walk after removing {} {}, {}: {why}; the rest is left for the \
         node reaper",
        thousands(report.removed),
        if report.removed == 1 {
            "entry"
        } else {
            "entries"
        },
        size(report.bytes),
    ));
    report
}
