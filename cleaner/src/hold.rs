//! The walk holds its answer (issue 38, class 3): the node agent's `same` is true at the
//! instant it is given, and a walk takes longer. A Job's replacement pod bound to the
//! node half way through a one-second walk lost every file it wrote. So while the hook or
//! the sidecar walks a target the agent cleared, the same question is asked again every
//! [`GUARD_INTERVAL`]; the first answer that is not `same` — a new pod bound to the node
//! whose spec reaches the directory, a new mount of it, the pod no longer ending, the
//! agent gone or busy — stops the walk at its next entry, as the deadline does, and what
//! is left stays for the node reaper. The node reaper's walk is guarded the same way.
//!
//! An answer is a lease, not a licence: a `same` holds for [`LEASE`] from the instant its
//! question was asked. An answer that is late (an agent slowed by a busy node, a client
//! waiting out a `busy`) pauses the walk at its next entry until it comes, so a new user
//! never loses more than the walk removes in one lease, however slow the agent is
//! (SPEC §4: "stopped within 100 ms of a new user"), and a bounded number of entries
//! besides: a `same` that comes after its own lease ran out lets the walk remove
//! [`LATE_GRANT`](crate::lease::LATE_GRANT) entries. Before, the walk went on for as long
//! as the question was on its way (seconds); and then, with leases but no grant, a walk
//! whose agent answered slower than one lease removed nothing at all, a directory never
//! emptied (docs/ROBUSTNESS.md, 6.1).
//!
//! Only a target the agent cleared is guarded: without an agent (the strict per-pod rule)
//! there is nobody to ask, and the rule never depended on the instant.

use std::os::fd::{AsFd as _, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::agent::{self, Question, Verdict};
use crate::lease;
use crate::report::{size, thousands};
use crate::{Outcome, Report};

/// How often the question is asked again during a walk, from the start of one asking to
/// the next: twice per [`LEASE`], so that an agent answering within one interval never
/// pauses the walk. A slower one does: the walk then goes at the agent's pace.
pub const GUARD_INTERVAL: Duration = Duration::from_millis(50);

/// How long a `same` holds, from the instant its question was asked: a new user loses at
/// most what the walk removes in this time.
pub const LEASE: Duration = Duration::from_millis(100);

/// How long one asking again may wait for a `busy` agent: the walk does not outlast its
/// guard's silence by more than this.
const PATIENCE: Duration = Duration::from_millis(500);

/// How long the guard may go without a descriptor of its own to ask with (`EMFILE`: a
/// container with a low `ulimit -n`, whose walk holds every descriptor it can) before
/// the walk stops: the walk frees descriptors as it climbs, and a guard that cannot ask
/// for this long is no guard. Meanwhile its lease runs on (a paused walk would free none).
const STARVED: Duration = Duration::from_secs(1);

/// Runs `walk` while asking `question` about `host` (the opened target `dir`) again every
/// [`GUARD_INTERVAL`] on a thread of its own; a walk stopped by an answer other than
/// `same` is reported as such. Where no thread can be started (a container whose pids
/// limit is the program alone), the walk's own progress reports ask instead, at most
/// every [`GUARD_INTERVAL`]: between two of them it removes at most
/// [`PROGRESS_EVERY`](crate::walk::PROGRESS_EVERY) entries.
///
/// The thread is never waited for: once the walk is over (done, or stopped by the
/// deadline, which must report within its straggler's second) an answer still on its way
/// is of no use, and waiting for it could outlast the kubelet's patience.
pub(crate) fn walk_holding(
    question: Question<'_>,
    host: &str,
    asked: Instant,
    dir: BorrowedFd<'_>,
    progress: &(dyn Fn(u64, u64) + Sync),
    walk: impl FnOnce(&(dyn Fn(u64, u64) + Sync)) -> Report,
) -> Report {
    // The answer the walk starts on holds from the instant it was asked for.
    let generation = lease::begin(asked + LEASE);
    lease::grant(generation, late_grant(asked));
    let guard = Arc::new(Guard {
        generation,
        socket: question.socket.unwrap_or_default().to_owned(),
        pod_ending: question.pod_ending,
        host: host.to_owned(),
        last: Mutex::new((asked, None)),
        why: Mutex::new(None),
        done: AtomicBool::new(false),
    });
    // The thread asks with a descriptor of its own, a duplicate of the walk's target.
    let asking = dir.try_clone_to_owned().and_then(|own| {
        let guard = guard.clone();
        std::thread::Builder::new()
            .name("hold".to_owned())
            .spawn(move || {
                while !guard.done.load(Ordering::SeqCst) && !guard.withdrawn() {
                    // Every GUARD_INTERVAL from the last asking's start, not from its
                    // answer: an agent answering within one interval keeps a lease in
                    // force.
                    std::thread::park_timeout(GUARD_INTERVAL.saturating_sub(guard.since_asked()));
                    guard.ask_if_due(own.as_fd());
                }
            })
    });
    let report = match &asking {
        Ok(_) => walk(progress),
        // No thread: the walk asks itself, between two entries, so its answer is never
        // late; the lease holds for the whole walk.
        Err(_) => {
            lease::for_the_whole_walk(generation);
            walk(&|removed, bytes| {
                progress(removed, bytes);
                guard.ask_if_due(dir);
            })
        }
    };
    guard.done.store(true, Ordering::SeqCst);
    // No walk is guarded any more: a later walk (another target, unguarded) is not
    // stopped by this one's answer, whatever its thread still hears.
    lease::end(generation);
    if let Ok(asking) = asking {
        asking.thread().unpark();
    }
    let why = guard.why.lock().unwrap_or_else(|e| e.into_inner()).take();
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

/// The question asked again, and what the last asking found; shared with the thread
/// that asks, which may outlive the walk by one answer.
struct Guard {
    generation: u64,
    socket: String,
    pod_ending: bool,
    host: String,
    /// When it was last asked (first: the question the walk started on), and since when
    /// every asking found no descriptor free.
    last: Mutex<(Instant, Option<Instant>)>,
    why: Mutex<Option<String>>,
    /// The walk is over: an answer from now on changes nothing.
    done: AtomicBool,
}

impl Guard {
    fn withdrawn(&self) -> bool {
        lease::is_withdrawn(self.generation)
    }

    /// How long since the last asking started (zero while one is under way).
    fn since_asked(&self) -> Duration {
        self.last
            .try_lock()
            .map_or(Duration::ZERO, |last| last.0.elapsed())
    }

    /// Asks again when [`GUARD_INTERVAL`] has passed since the last time and no other
    /// thread is asking; a `same` renews the lease from the instant it was asked, an
    /// answer other than `same` stops the walk.
    fn ask_if_due(&self, dir: BorrowedFd<'_>) {
        let Ok(mut last) = self.last.try_lock() else {
            return;
        };
        let (asked, starved) = &mut *last;
        if asked.elapsed() < GUARD_INTERVAL || self.withdrawn() || self.done.load(Ordering::SeqCst)
        {
            return;
        }
        *asked = Instant::now();
        let question = Question {
            socket: Some(&self.socket),
            pod_ending: self.pod_ending,
        };
        let why = match ask_again(question, &self.host, dir) {
            None => {
                *starved = None;
                lease::renew(self.generation, *asked + LEASE);
                lease::grant(self.generation, late_grant(*asked));
                return;
            }
            Some(Withdrawn::NoDescriptor(why)) => {
                let since = *starved.get_or_insert(*asked);
                if since.elapsed() < STARVED {
                    // The walk frees descriptors as it climbs, which a paused walk would
                    // not: it goes on until the guard can ask, within [`STARVED`].
                    lease::renew(self.generation, since + STARVED);
                    return;
                }
                format!(
                    "the node agent could not be asked again for {} s: {why}",
                    STARVED.as_secs()
                )
            }
            Some(Withdrawn::Answer(why)) => why,
        };
        if !self.done.load(Ordering::SeqCst) {
            *self.why.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            lease::withdraw(self.generation);
        }
    }
}

/// What a `same` asked at `asked` grants beyond its lease: [`lease::LATE_GRANT`] entries
/// when it came after the lease ran out, so that a walk goes on at the agent's pace
/// however slow it is; none when it came in time (what was left of an earlier grant
/// goes too).
fn late_grant(asked: Instant) -> u64 {
    if asked.elapsed() > LEASE {
        lease::LATE_GRANT
    } else {
        0
    }
}

/// Why the guard's asking did not hear `same`.
enum Withdrawn {
    /// An answer, or the agent's silence: the walk stops.
    Answer(String),
    /// This process had no descriptor free to ask with (`EMFILE`, `ENFILE`): not the
    /// agent's word; asked again at the next interval, within [`STARVED`].
    NoDescriptor(String),
}

/// `None` while the answer is still `same`; else why not, as the cleaner's line says it.
fn ask_again(question: Question<'_>, host: &str, dir: BorrowedFd<'_>) -> Option<Withdrawn> {
    let socket = question.socket?;
    let verdict = if question.pod_ending {
        agent::ask_ending(socket, host, dir)
    } else {
        agent::ask_with_patience(socket, host, dir, PATIENCE)
    };
    let why = match verdict {
        Verdict::Same => return None,
        Verdict::InUse(why) | Verdict::NotEnding(why) | Verdict::Differs(why) => {
            format!("the node agent says: {why}")
        }
        Verdict::Refused(why) => format!("the node agent refused: {why}"),
        Verdict::Busy => "the node agent was busy and did not judge it again".to_owned(),
        // The client's sentence ends with the error's own words (std's `io::Error`).
        Verdict::Unreachable(why)
            if why.ends_with("(os error 24)") || why.ends_with("(os error 23)") =>
        {
            return Some(Withdrawn::NoDescriptor(why));
        }
        Verdict::Unreachable(why) => format!("the node agent was not reachable: {why}"),
    };
    Some(Withdrawn::Answer(why))
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
