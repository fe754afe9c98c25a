//! What the agent counts, for its metrics and its probes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::ending::Told;

/// What the agent counts.
#[derive(Default)]
pub struct Stats {
    same: AtomicU64,
    differs: AtomicU64,
    refused: AtomicU64,
    /// `refused` answers that say the agent itself could not judge ([`could_not`]).
    unknown: AtomicU64,
    busy: AtomicU64,
    in_use: AtomicU64,
    not_ending: AtomicU64,
    /// Cleanup reports, by what became of them.
    reports_recorded: AtomicU64,
    reports_logged: AtomicU64,
    reports_dropped: AtomicU64,
    pub in_flight: AtomicUsize,
    pub stuck: AtomicUsize,
    /// The accepting loop's last beat, in milliseconds since [`epoch`]; 0 before the
    /// first.
    heartbeat: AtomicU64,
}

/// A `refused` answer that says the agent itself could not judge: past its deadline,
/// too many judgements stuck, no thread, a use of the directory it cannot tell. Counted
/// as the verdict `unknown`, apart from refusals of what a request asks (a path outside
/// the allow-list, a descriptor on a network filesystem, a line that is no request), which
/// any pod can cause at will: an alert on `unknown` is one no tenant can trip by asking
/// (issue 39). To the cleaner both are `refused`: the protocol is unchanged.
pub(super) fn could_not(why: impl std::fmt::Display) -> String {
    format!("{COULD_NOT}{why}")
}

const COULD_NOT: &str = "refused: the node agent ";

/// The agent's own clock, for the heartbeat (monotonic: a clock step is no stall).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Stats {
    /// Counts one answer line by its verdict.
    pub fn count(&self, answer: &str) {
        let counter = if answer == "same" {
            &self.same
        } else if answer == "busy" {
            &self.busy
        } else if answer.starts_with("in-use: ") {
            &self.in_use
        } else if answer.starts_with("not-ending: ") {
            &self.not_ending
        } else if answer.starts_with("differs: ") {
            &self.differs
        } else if answer.starts_with(COULD_NOT) {
            &self.unknown
        } else {
            &self.refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one cleanup report by what became of it.
    pub fn count_report(&self, told: &Told) {
        let counter = match told {
            Told::Recorded => &self.reports_recorded,
            Told::Logged(_) => &self.reports_logged,
            Told::Dropped(_) => &self.reports_dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The accepting loop is alive now.
    pub fn beat(&self) {
        // At least 1, so that the first beat is never read as none.
        let now = epoch().elapsed().as_millis().max(1);
        self.heartbeat
            .store(u64::try_from(now).unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Since the accepting loop's last beat; `None` before the first.
    pub fn since_beat(&self) -> Option<Duration> {
        match self.heartbeat.load(Ordering::SeqCst) {
            0 => None,
            at => Some(epoch().elapsed().saturating_sub(Duration::from_millis(at))),
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut text = String::from(
            "# HELP prestop_injector_node_agent_answers_total Answers given to cleaners, by verdict.\n\
             # TYPE prestop_injector_node_agent_answers_total counter\n",
        );
        for (verdict, counter) in [
            ("same", &self.same),
            ("differs", &self.differs),
            ("refused", &self.refused),
            ("unknown", &self.unknown),
            ("busy", &self.busy),
            ("in_use", &self.in_use),
            ("not_ending", &self.not_ending),
        ] {
            text.push_str(&format!(
                "prestop_injector_node_agent_answers_total{{verdict=\"{verdict}\"}} {}\n",
                counter.load(Ordering::Relaxed)
            ));
        }
        text.push_str(
            "# HELP prestop_injector_node_agent_reports_total Cleanup reports received, by what became of them (recorded as an Event, only logged, dropped over the rate).\n\
             # TYPE prestop_injector_node_agent_reports_total counter\n",
        );
        for (result, counter) in [
            ("recorded", &self.reports_recorded),
            ("logged", &self.reports_logged),
            ("dropped", &self.reports_dropped),
        ] {
            text.push_str(&format!(
                "prestop_injector_node_agent_reports_total{{result=\"{result}\"}} {}\n",
                counter.load(Ordering::Relaxed)
            ));
        }
        text.push_str(&format!(
            "# HELP prestop_injector_node_agent_requests_in_flight Connections being served (read, waiting for a turn, or judged).\n\
             # TYPE prestop_injector_node_agent_requests_in_flight gauge\n\
             prestop_injector_node_agent_requests_in_flight {}\n\
             # HELP prestop_injector_node_agent_judgements_stuck Judgements past their deadline that have not ended.\n\
             # TYPE prestop_injector_node_agent_judgements_stuck gauge\n\
             prestop_injector_node_agent_judgements_stuck {}\n",
            self.in_flight.load(Ordering::Relaxed),
            self.stuck.load(Ordering::Relaxed),
        ));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 39: the agent unable to judge is `unknown`; a refusal of what the request
    /// asks stays `refused`. Both reach the cleaner as `refused: …`.
    #[test]
    fn the_agent_unable_to_judge_is_counted_apart_from_refused_requests() {
        let stats = Stats::default();
        for answer in [
            could_not("could not judge /mnt/x within 3 s"),
            could_not("has too many judgements stuck"),
            could_not("cannot tell whether another container uses the node's /mnt/x"),
            "refused: the host path /etc is not at or below an allowed prefix (/mnt)".to_owned(),
            "refused: not a request line".to_owned(),
        ] {
            assert!(answer.starts_with("refused: "), "{answer}");
            stats.count(&answer);
        }
        let text = stats.render();
        for line in [
            "prestop_injector_node_agent_answers_total{verdict=\"unknown\"} 3\n",
            "prestop_injector_node_agent_answers_total{verdict=\"refused\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }
}
