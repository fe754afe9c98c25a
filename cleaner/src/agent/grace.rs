//! How long the asking pod has until the kubelet's kill (issue 39: the sidecar's deadline
//! from what the kubelet really leaves it).
//!
//! The cleanup sidecar is signalled only after the app containers have stopped, and the
//! kubelet gives it what is left of the pod's grace period then, at least 2 s
//! (`killContainer`: the grace period less the wait for its turn). Its `--deadline` is its
//! share of the grace period as the webhook planned it; an app that uses more of the
//! grace period leaves less, and the kubelet's kill would come before the deadline's line.
//! The pod's object says when the grace period ends: the API server sets
//! `metadata.deletionTimestamp` to the deletion's time plus the grace period, and the
//! kubelet, which starts counting when it sees the deletion, kills no earlier. No
//! downward-API field carries it; the node agent's watch has it.
//!
//! Request, one per connection, **no** descriptor: `prestop-grace 1\n`. Answer, one line:
//! `ends-in <MS>`, the milliseconds until the deletion's grace period ends (0 once it
//! has), or `unknown: <why>` (not being deleted: the kubelet ends the pod on its own, with
//! a grace period the pod's object does not show; no API server). The pod is the one the
//! kernel names ([`super::peer`]); the request names none. An agent that predates it
//! refuses the line as not its protocol.
//!
//! The answer can only shorten the sidecar's deadline, never lengthen it: whatever answers
//! on the socket can at worst make the sidecar stop early, and the node reaper finishes.

use std::time::Duration;

use super::reporting::send_within;

/// The whole request.
pub(super) const GRACE_REQUEST: &[u8] = b"prestop-grace 1\n";
/// How long the sidecar waits for the answer, connecting included: it has just been
/// signalled, and this comes out of its time.
pub const GRACE_PATIENCE: Duration = Duration::from_millis(500);
/// The kubelet's least grace period for a container it stops
/// (`minimumGracePeriodInSeconds`): a sidecar signalled after the pod's grace period
/// ended still gets this.
pub const KUBELET_MINIMUM_GRACE: Duration = Duration::from_secs(2);

/// How long before the kubelet's kill the sidecar stops itself: for its workers to stop
/// and its line to be written and reported. The webhook leaves the same between a
/// `--deadline` and the kill (`DEADLINE_MARGIN_SECONDS`, docs/CLEANUP.md#the-deadline).
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// What the node agent says of the asking pod's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GraceLeft {
    /// The deletion's grace period ends this much later (zero: it has).
    EndsIn(Duration),
    /// The agent cannot say, and why.
    Unknown(String),
}

/// `ends-in <MS>` or `unknown: <why>`, the line without its newline.
pub fn grace_answer(left: &GraceLeft) -> String {
    match left {
        GraceLeft::EndsIn(left) => format!("ends-in {}", left.as_millis()),
        GraceLeft::Unknown(why) => format!("unknown: {}", why.replace(char::is_control, " ")),
    }
}

/// The answer line (without its newline); `None` for anything else: a number with a sign,
/// a leading zero or more than 10 digits, a control character.
pub fn parse_grace_answer(line: &str) -> Option<GraceLeft> {
    if line.chars().any(char::is_control) {
        return None;
    }
    if let Some(why) = line.strip_prefix("unknown: ") {
        return Some(GraceLeft::Unknown(why.to_owned()));
    }
    let ms = line.strip_prefix("ends-in ")?;
    let canonical = !ms.is_empty()
        && ms.len() <= 10
        && ms.bytes().all(|b| b.is_ascii_digit())
        && (ms == "0" || !ms.starts_with('0'));
    if !canonical {
        return None;
    }
    ms.parse()
        .ok()
        .map(|ms| GraceLeft::EndsIn(Duration::from_millis(ms)))
}

/// Whether the bytes so far are (`Some(true)`) or may still become (`None`) the request.
pub(super) fn is_grace_request(bytes: &[u8]) -> Option<bool> {
    if bytes == GRACE_REQUEST {
        Some(true)
    } else if GRACE_REQUEST.starts_with(bytes) {
        None
    } else {
        Some(false)
    }
}

/// Asks the agent at `socket` how long the asking pod has; `Err` says why there is no
/// answer (no agent, an agent that predates the question, no answer in
/// [`GRACE_PATIENCE`], a line that is not the protocol).
pub fn ask_grace(socket: &str) -> Result<GraceLeft, String> {
    let answer = send_within(socket, GRACE_REQUEST.to_vec(), GRACE_PATIENCE)?;
    parse_grace_answer(&answer).ok_or_else(|| {
        format!(
            "the node agent answered {:?}",
            crate::report::escape(answer.as_bytes())
        )
    })
}

/// How long after its signal the sidecar stops itself: its own `--deadline` (`own`), or
/// less when the kubelet's kill comes sooner, `margin` before it. The kill comes when the
/// deletion's grace period ends (`left` after the signal), and never less than
/// [`KUBELET_MINIMUM_GRACE`] after the signal. `None` with neither a deadline nor an
/// answer.
pub fn sidecar_deadline(
    own: Option<Duration>,
    left: Option<Duration>,
    margin: Duration,
) -> Option<Duration> {
    let kill = left.map(|left| left.max(KUBELET_MINIMUM_GRACE).saturating_sub(margin));
    match (own, kill) {
        (Some(own), Some(kill)) => Some(own.min(kill)),
        (own, kill) => own.or(kill),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip_and_nothing_else_parses() {
        for left in [
            GraceLeft::EndsIn(Duration::ZERO),
            GraceLeft::EndsIn(Duration::from_millis(98_765)),
            GraceLeft::Unknown("the pod is not being deleted".to_owned()),
        ] {
            assert_eq!(parse_grace_answer(&grace_answer(&left)), Some(left));
        }
        // A control character in the reason never reaches a line.
        assert_eq!(
            grace_answer(&GraceLeft::Unknown("a\nb".to_owned())),
            "unknown: a b"
        );
        for line in [
            "ends-in",
            "ends-in ",
            "ends-in -1",
            "ends-in +5",
            "ends-in 05",
            "ends-in 1.5",
            "ends-in 12345678901",
            "ends-in 5 ",
            "same",
            "refused: not the protocol",
            "unknown: a\tb",
        ] {
            assert_eq!(parse_grace_answer(line), None, "{line:?}");
        }
    }

    #[test]
    fn the_request_is_told_apart_byte_by_byte() {
        assert_eq!(is_grace_request(b"prestop-"), None);
        assert_eq!(is_grace_request(b"prestop-grace 1"), None);
        assert_eq!(is_grace_request(GRACE_REQUEST), Some(true));
        assert_eq!(is_grace_request(b"prestop-grace 2\n"), Some(false));
        assert_eq!(is_grace_request(b"prestop-grace 1\nx"), Some(false));
    }

    #[test]
    fn the_answer_only_ever_shortens_the_deadline() {
        let s = Duration::from_secs;
        let margin = s(2);
        // The app left the sidecar what it planned: its own deadline stands.
        assert_eq!(
            sidecar_deadline(Some(s(28)), Some(s(60)), margin),
            Some(s(28))
        );
        // The app used 98 s of 100: the kubelet gives the sidecar its least 2 s, and the
        // sidecar stops at once to say so, instead of being killed 26 s into its 28.
        assert_eq!(
            sidecar_deadline(Some(s(28)), Some(s(0)), margin),
            Some(s(0))
        );
        assert_eq!(
            sidecar_deadline(Some(s(28)), Some(s(7)), margin),
            Some(s(5))
        );
        // No answer: the deadline as planned; no deadline planned: the kill's.
        assert_eq!(sidecar_deadline(Some(s(28)), None, margin), Some(s(28)));
        assert_eq!(sidecar_deadline(None, Some(s(9)), margin), Some(s(7)));
        assert_eq!(sidecar_deadline(None, None, margin), None);
    }
}
