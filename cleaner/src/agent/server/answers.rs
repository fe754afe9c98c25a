//! The line every answer is, and the answers that are no verdict on a directory: a
//! cleanup's report and the question of time (issue 39), both about the pod the kernel
//! names and answered from the node's source of pods, without a judgement or a turn.

use super::Shared;
use crate::agent::ending::Told;
use crate::agent::grace::{grace_answer as grace_answer_line, GraceLeft};
use crate::agent::peer::Peer;
use crate::agent::reporting::Outcome;

/// The line a client gets, and what only the log says.
pub(super) struct Answer {
    pub(super) line: String,
    pub(super) on_the_node: Option<String>,
    /// The answer to a report or to a question of time: no verdict, not counted as one.
    pub(super) report: bool,
}

impl Answer {
    pub(super) fn plain(line: String) -> Answer {
        Answer {
            line,
            on_the_node: None,
            report: false,
        }
    }
}

/// How long the asking pod has, from the pod the kernel names (issue 39: the sidecar's
/// deadline). Asks no judgement, takes no turn.
pub(super) fn grace_answer(peer: &Peer, shared: &Shared) -> Answer {
    let left = match (&peer.pod, &shared.pod_ending) {
        (None, _) => GraceLeft::Unknown("the asking process is in no pod's cgroup".to_owned()),
        (Some(_), None) => GraceLeft::Unknown("this node agent has no API server".to_owned()),
        (Some(uid), Some(source)) => source.grace_left(uid),
    };
    Answer {
        line: grace_answer_line(&left),
        on_the_node: None,
        report: true,
    }
}

/// A cleanup's report, about the pod the kernel names: handed to the source of pods
/// (an Event on that pod), or only logged by an agent without one. Counted apart from
/// the answers to questions.
pub(super) fn report_answer(peer: &Peer, shared: &Shared, outcome: Outcome, line: &str) -> Answer {
    let told = match &shared.pod_ending {
        Some(source) => source.report(peer.pod.as_deref(), outcome, line),
        None => Told::Logged("this node agent has no API server".to_owned()),
    };
    shared.stats.count_report(&told);
    let answer = match told {
        Told::Recorded => "recorded".to_owned(),
        Told::Logged(why) => format!("logged: {why}"),
        Told::Dropped(why) => format!("dropped: {why}"),
    };
    Answer {
        on_the_node: Some(format!("report {}: {line}", outcome.word())),
        line: answer,
        report: true,
    }
}
