//! The cleanup's report (issue 39): the program hands its final line to the node agent,
//! which records it where the user looks (`prestop-injector node-agent`: an Event on the
//! pod the kernel names). Since kubelet 1.26 the `FailedPreStopHook` Event says only
//! "PreStopHook failed", and an exec hook's output is in no container log: without this,
//! a `skipped …`, a `refused …` or the deadline's line is only in the kubelet's log.
//!
//! Request, one per connection, **no** descriptor: `prestop-report 2 <OUTCOME> <N>
//! <LINE>\n`, `OUTCOME` one of [`Outcome`]'s words, `N` the byte length of `LINE` in
//! decimal (no leading zero, at most [`MAX_REPORT_LINE`]), `LINE` UTF-8 without a control
//! character (the cleaner escapes every path). Answer, one line: `recorded`,
//! `logged: <why>` (kept in the agent's log only), `dropped: <why>` (over the rate) or
//! `refused: <why>`. An agent that predates it refuses the line as not its protocol.
//!
//! The report changes nothing: the cleaner ignores every failure to report, waits at most
//! [`REPORT_PATIENCE`] and keeps its exit status. The pod the report is about is the one
//! the kernel names ([`super::peer`]); the line names none.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// What every report request starts with, version word included.
pub(super) const REPORT_MAGIC: &[u8] = b"prestop-report 2 ";
/// The longest line a report carries; the cleaner cuts a longer one (the Event keeps
/// 1,024 bytes of it anyway).
pub const MAX_REPORT_LINE: usize = 2048;
/// How long the cleaner gives its report, all told: connecting, sending, the answer. It
/// waits for the answer because the agent names the pod from the asking process while it
/// still lives (`/proc/PID/cgroup`); a process gone before the agent accepted it is no
/// pod's. Within the margin the webhook leaves between `--deadline` and the kill.
pub const REPORT_PATIENCE: Duration = Duration::from_millis(800);

/// The cleanup's outcome, in one word of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every target emptied or missing.
    Emptied,
    /// A target was skipped by the cleaner's own rules (no `--host`, a symlink, no agent
    /// reachable, …).
    Skipped,
    /// The node's word kept a target: the agent refused, said another pod uses it, that
    /// it is not the node's directory, or that the pod is not ending.
    Refused,
    /// Entries survived (mount points, permissions, a writer).
    Incomplete,
    /// `--deadline` stopped the cleanup.
    CutOff,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Emptied,
        Outcome::Skipped,
        Outcome::Refused,
        Outcome::Incomplete,
        Outcome::CutOff,
    ];

    pub fn word(self) -> &'static str {
        match self {
            Outcome::Emptied => "emptied",
            Outcome::Skipped => "skipped",
            Outcome::Refused => "refused",
            Outcome::Incomplete => "incomplete",
            Outcome::CutOff => "cut-off",
        }
    }

    fn from_word(word: &[u8]) -> Option<Outcome> {
        Outcome::ALL
            .into_iter()
            .find(|o| o.word().as_bytes() == word)
    }

    /// How much it says: a cleanup of several targets reports its gravest outcome.
    fn gravity(self) -> u8 {
        match self {
            Outcome::Emptied => 0,
            Outcome::Skipped => 1,
            Outcome::Incomplete => 2,
            Outcome::Refused => 3,
            Outcome::CutOff => 4,
        }
    }

    /// The graver of two.
    pub fn worse(self, other: Outcome) -> Outcome {
        if other.gravity() > self.gravity() {
            other
        } else {
            self
        }
    }
}

/// The outcome of one target's cleanup. A skip is the node's refusal when the node agent
/// said no: the sentences of `identity::check` and of the walk's guard (`hold`) say
/// "the node agent says", "… refused" or "… was busy" then, and only then
/// (`outcome_of_each_sentence` pins them).
pub fn outcome_of(report: &crate::Report) -> Outcome {
    match &report.outcome {
        crate::Outcome::Emptied | crate::Outcome::Missing => Outcome::Emptied,
        crate::Outcome::Incomplete => Outcome::Incomplete,
        crate::Outcome::Skipped(why)
            if [
                "the node agent says",
                "the node agent refused",
                "the node agent was busy",
            ]
            .iter()
            .any(|said| why.contains(said)) =>
        {
            Outcome::Refused
        }
        crate::Outcome::Skipped(_) => Outcome::Skipped,
    }
}

/// One whole report request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupReport<'a> {
    pub outcome: Outcome,
    /// UTF-8 without a control character, at most [`MAX_REPORT_LINE`] bytes.
    pub line: &'a str,
}

/// `prestop-report 2 <OUTCOME> <N> <LINE>\n`; a line longer than [`MAX_REPORT_LINE`] is
/// cut (at a character, marked `…`), a control character becomes a space.
pub fn encode_report(outcome: Outcome, line: &str) -> Vec<u8> {
    let mut line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if line.len() > MAX_REPORT_LINE {
        let mut end = MAX_REPORT_LINE - '…'.len_utf8();
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push('…');
    }
    let mut request = REPORT_MAGIC.to_vec();
    request.extend_from_slice(format!("{} {} ", outcome.word(), line.len()).as_bytes());
    request.extend_from_slice(line.as_bytes());
    request.push(b'\n');
    request
}

/// A whole report, `None` while incomplete, `Err` when it cannot become one.
pub fn parse_report(bytes: &[u8]) -> Result<Option<CleanupReport<'_>>, String> {
    let not_ours = || "not a prestop-report 2 request".to_owned();
    let Some(rest) = bytes.strip_prefix(REPORT_MAGIC) else {
        return if REPORT_MAGIC.starts_with(bytes) {
            Ok(None)
        } else {
            Err(not_ours())
        };
    };
    let Some(space) = rest.iter().position(|&b| b == b' ') else {
        let longest = Outcome::ALL.iter().map(|o| o.word().len()).max();
        return if Outcome::ALL
            .iter()
            .any(|o| o.word().as_bytes().starts_with(rest))
            && Some(rest.len()) <= longest
        {
            Ok(None)
        } else {
            Err(not_ours())
        };
    };
    let outcome = Outcome::from_word(&rest[..space]).ok_or_else(not_ours)?;
    let rest = &rest[space + 1..];
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == rest.len() {
        return if digits <= 4 {
            Ok(None)
        } else {
            Err(not_ours())
        };
    }
    if digits == 0 || digits > 4 || rest[0] == b'0' || rest[digits] != b' ' {
        return Err(not_ours());
    }
    let length: usize = std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse().ok())
        .ok_or_else(not_ours)?;
    if length > MAX_REPORT_LINE {
        return Err(format!("the report is longer than {MAX_REPORT_LINE} bytes"));
    }
    let body = &rest[digits + 1..];
    if body.len() <= length {
        return Ok(None);
    }
    let (line, end) = body.split_at(length);
    if end != b"\n" {
        return Err("bytes follow the report".to_owned());
    }
    let line = std::str::from_utf8(line).map_err(|_| "the report is not UTF-8".to_owned())?;
    if line.chars().any(char::is_control) {
        return Err("the report holds a control character".to_owned());
    }
    Ok(Some(CleanupReport { outcome, line }))
}

/// Whether the first bytes of a request are a report's rather than a question's (both
/// start `prestop-`): `None` until that can be told.
pub(super) fn is_report(bytes: &[u8]) -> Option<bool> {
    const COMMON: usize = b"prestop-".len();
    match bytes.get(COMMON) {
        Some(&b'r') => Some(bytes.starts_with(&REPORT_MAGIC[..=COMMON])),
        Some(_) => Some(false),
        None if b"prestop-".starts_with(bytes) => None,
        None => Some(false),
    }
}

/// Hands the report to the agent at `socket` and returns its answer line (without the
/// newline); `Err` says why not. Never longer than [`REPORT_PATIENCE`]: the exchange runs
/// on a thread of its own, which is left behind (the program is about to exit) should a
/// connect block on a full backlog.
pub fn send_report(socket: &str, outcome: Outcome, line: &str) -> Result<String, String> {
    send_within(socket, encode_report(outcome, line), REPORT_PATIENCE)
}

/// One request without a descriptor, and its answer line, within `patience` all told (a
/// report, [`super::grace`]'s question).
pub(super) fn send_within(
    socket: &str,
    request: Vec<u8>,
    patience: Duration,
) -> Result<String, String> {
    let (tell, told) = mpsc::channel();
    let socket = socket.to_owned();
    let spawned = std::thread::Builder::new().spawn(move || {
        let _ = tell.send(exchange(&socket, &request, patience));
    });
    if let Err(err) = spawned {
        return Err(format!("cannot start a thread: {err}"));
    }
    told.recv_timeout(patience)
        .unwrap_or_else(|_| Err(format!("no answer within {:.1} s", patience.as_secs_f64())))
}

fn exchange(socket: &str, request: &[u8], patience: Duration) -> Result<String, String> {
    let deadline = Instant::now() + patience;
    let mut stream = UnixStream::connect(socket).map_err(|err| format!("cannot connect: {err}"))?;
    let left = || {
        let left = deadline.saturating_duration_since(Instant::now());
        Some(left.max(Duration::from_millis(1)))
    };
    stream
        .set_write_timeout(left())
        .map_err(|err| err.to_string())?;
    stream
        .write_all(request)
        .map_err(|err| format!("cannot send: {err}"))?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 256];
    while !answer.ends_with(b"\n") && answer.len() < 4096 {
        stream
            .set_read_timeout(left())
            .map_err(|err| err.to_string())?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(format!("cannot read the answer: {err}")),
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    Ok(answer.trim_end_matches('\n').to_owned())
}
