//! The node agent's wire protocol, one request per connection on a unix stream socket:
//! - request: `prestop-identity 2 <N> <HOST>\n`, `N` the byte length of `HOST` in decimal
//!   (no leading zero), the whole request at most [`MAX_REQUEST`] bytes, with **exactly one**
//!   descriptor in `SCM_RIGHTS`: the cleaner's opened target directory;
//!   `prestop-identity 2 <N> <HOST> ending\n` asks besides whether the asking pod is
//!   ending (issue 31: a pod the kubelet can restart in place is cleaned only on the
//!   node's word that it is); an agent that predates it refuses the line, so no such
//!   cleanup ever runs on an older agent's `same`;
//! - the version word is 2 since `same` also means "no other container and no other pod
//!   bound to the node uses it" (issues 31 and 38): an agent of an earlier release, whose
//!   `same` meant only "it is the node's directory", refuses a version 2 line as not its
//!   protocol, so today's cleaner never reads that older `same` as "nobody else uses it"
//!   (issue 38, class 7). The agent still answers version 1 lines of older cleaners, by
//!   today's stricter rule;
//! - answer: one line, `same`, `in-use: <sentence>`, `not-ending: <sentence>`,
//!   `differs: <sentence>`, `refused: <sentence>` or `busy`;
//!   every path in a sentence is escaped ([`escape`](crate::escape)), so an answer is
//!   always one line.

use std::time::Duration;

use crate::report::escape;

/// The longest request, header and newline included.
pub const MAX_REQUEST: usize = 4096;
/// How long either side waits for the other, for a whole request or a whole answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// What every request starts with; the version word follows.
const PROTOCOL: &[u8] = b"prestop-identity ";
/// The version word this cleaner sends.
pub(super) const MAGIC: &[u8] = b"prestop-identity 2 ";
/// The version words this agent answers: an older cleaner's, and today's.
const VERSIONS: [&[u8]; 2] = [b"1 ", b"2 "];
const ENDING: &[u8] = b" ending\n";

/// One whole request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// The host path asked about.
    pub host: &'a [u8],
    /// Whether the answer `same` must also mean that the asking pod is ending.
    pub ending: bool,
}

/// What the node agent said about an opened directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It is the node's directory at the host path, and no other container on the node
    /// uses it: the pod may empty it now.
    Same,
    /// It is the node's directory, but another container on the node reaches it (by any
    /// name, or a directory above or inside it): a sibling, a native sidecar, a Job's
    /// replacement pod. The sentence names none of them; nothing is removed, and the
    /// directory is left to the node reaper.
    InUse(String),
    /// Asked with [`encode_ending_request`]: it is the node's directory and nobody else
    /// uses it, but the node does not say that the asking pod is ending (its deletion has
    /// not begun and it has not finished for good): a sandbox recreation, or a restart in
    /// place, which starts the pod again on the same volumes. Nothing is removed.
    NotEnding(String),
    /// It is not. The sentence speaks only of the pod's own directory: what the node has
    /// at a path the pod does not hold is none of the pod's business (issue 32, the
    /// oracle); the agent's log says it for the operator.
    Differs(String),
    /// The agent would not say (a path outside `--allow`, a descriptor on a network or
    /// FUSE filesystem, …), or answered something that is not the protocol: the target
    /// is not cleaned.
    Refused(String),
    /// Every place the agent gives the asking pod is taken: ask again later. `busy` is
    /// not no ([`ask`](super::ask) retries within its patience).
    Busy,
    /// No agent answered (no socket, nobody listening, no answer within [`TIMEOUT`]):
    /// the caller applies the rule that needs no node's word.
    Unreachable(String),
}

/// `prestop-identity 2 <N> <HOST>\n`.
pub fn encode_request(host: &[u8]) -> Vec<u8> {
    let mut request = MAGIC.to_vec();
    request.extend_from_slice(format!("{} ", host.len()).as_bytes());
    request.extend_from_slice(host);
    request.push(b'\n');
    request
}

/// `prestop-identity 2 <N> <HOST> ending\n`: [`encode_request`], and is the asking pod ending?
pub fn encode_ending_request(host: &[u8]) -> Vec<u8> {
    let mut request = encode_request(host);
    request.pop();
    request.extend_from_slice(ENDING);
    request
}

/// `same\n`, `in-use: …\n`, `differs: …\n`, `refused: …\n` or `busy\n` (and an earlier agent's
/// `refused: busy\n`, which meant the same); anything else is `None`, including a control
/// character in the line (the agent escapes every path), so that whatever answers on the
/// socket cannot forge a line of the cleaner's output.
pub fn parse_answer(answer: &[u8]) -> Option<Verdict> {
    let line = std::str::from_utf8(answer.strip_suffix(b"\n")?).ok()?;
    if line.chars().any(char::is_control) {
        return None;
    }
    match line {
        "same" => return Some(Verdict::Same),
        "busy" | "refused: busy" => return Some(Verdict::Busy),
        _ => {}
    }
    if let Some(why) = line.strip_prefix("in-use: ") {
        return Some(Verdict::InUse(why.to_owned()));
    }
    if let Some(why) = line.strip_prefix("not-ending: ") {
        return Some(Verdict::NotEnding(why.to_owned()));
    }
    if let Some(why) = line.strip_prefix("differs: ") {
        return Some(Verdict::Differs(why.to_owned()));
    }
    line.strip_prefix("refused: ")
        .map(|why| Verdict::Refused(why.to_owned()))
}

/// A whole request, `None` while incomplete, `Err` when it cannot become one.
pub fn parse_request(bytes: &[u8]) -> Result<Option<Request<'_>>, String> {
    let not_ours = || "not a prestop-identity 1 or 2 request".to_owned();
    let Some(rest) = bytes.strip_prefix(PROTOCOL) else {
        return if PROTOCOL.starts_with(bytes) {
            Ok(None)
        } else {
            Err(not_ours())
        };
    };
    let Some(rest) = VERSIONS
        .iter()
        .find_map(|version| rest.strip_prefix(*version))
    else {
        return if VERSIONS.iter().any(|version| version.starts_with(rest)) {
            Ok(None)
        } else {
            Err(not_ours())
        };
    };
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
    let body = &rest[digits + 1..];
    if body.len() <= length {
        return Ok(None);
    }
    let (host, end) = body.split_at(length);
    let ending = match end {
        [b'\n'] => false,
        _ if end == ENDING => true,
        [b'\n', ..] => return Err("bytes follow the request".to_owned()),
        _ if ENDING.starts_with(end) => return Ok(None),
        _ if end.starts_with(ENDING) => return Err("bytes follow the request".to_owned()),
        _ => return Err(not_ours()),
    };
    Ok(Some(Request { host, ending }))
}

/// Absolute, no empty, `.` or `..` component, no trailing `/` (except `/` itself), no NUL:
/// what a cleaner sends (it renders host paths from the webhook's normalized form).
pub(super) fn is_normalized(path: &[u8]) -> bool {
    path == b"/"
        || (path.starts_with(b"/")
            && !path.contains(&0)
            && path[1..]
                .split(|&b| b == b'/')
                .all(|c| !matches!(c, b"" | b"." | b"..")))
}

/// `path` is `prefix` or below it, component-wise.
pub(super) fn at_or_below(path: &[u8], prefix: &[u8]) -> bool {
    prefix == b"/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

/// `host` escaped for a sentence.
pub(super) fn shown(host: &[u8]) -> String {
    escape(host)
}
