//! What the agent counts, for its metrics and its probes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// What the agent counts.
#[derive(Default)]
pub struct Stats {
    same: AtomicU64,
    differs: AtomicU64,
    refused: AtomicU64,
    busy: AtomicU64,
    in_use: AtomicU64,
    not_ending: AtomicU64,
    pub in_flight: AtomicUsize,
    pub stuck: AtomicUsize,
    pub connections: AtomicUsize,
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
        } else {
            &self.refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
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
            ("busy", &self.busy),
            ("in_use", &self.in_use),
            ("not_ending", &self.not_ending),
        ] {
            text.push_str(&format!(
                "prestop_injector_node_agent_answers_total{{verdict=\"{verdict}\"}} {}\n",
                counter.load(Ordering::Relaxed)
            ));
        }
        text.push_str(&format!(
            "# HELP prestop_injector_node_agent_requests_in_flight Requests being answered.\n\
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
