//! `--deadline S` of the hook and the sidecar (docs/CLEANUP.md#the-deadline): the cleanup
//! stops itself `S` seconds after the start and says how far it got, in one line on
//! stderr, before the kubelet's kill would have made it silent.
//!
//! At the deadline a timer thread stops every walk ([`prestop_clean::stop_walks`]): each
//! worker ends the removal it is in and returns, and the main thread prints the line from
//! the reports. Should a worker not return in [`STRAGGLER`] (a removal stuck on a slow
//! disk), the timer prints the line from the walk's last progress and exits the process
//! itself: a kill then is no worse than the kubelet's, which comes later.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use prestop_clean::agent::reporting::{send_report, Outcome};
use prestop_clean::argv::Target;
use prestop_clean::{escape, size, stop_walks, thousands, walks_stopped, Report};

/// How long the walk has, after the deadline, to stop by itself before the timer reports
/// for it. Half of the margin the webhook leaves between the deadline and the kill
/// (docs/CLEANUP.md#the-deadline).
const STRAGGLER: Duration = Duration::from_secs(1);

pub struct Deadline {
    start: Instant,
    after: Duration,
    targets: Vec<String>,
    /// `--node-agent`: where the timer's own line is reported, when it prints it.
    agent: Option<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The line, once printed (by the main thread or the timer): never twice.
    line: Option<String>,
    /// Entries and bytes of the targets already done.
    removed: u64,
    bytes: u64,
    /// The target being cleaned (an index into `targets`), and its progress so far.
    current: Option<usize>,
    current_removed: u64,
    current_bytes: u64,
}

impl Deadline {
    /// Starts the timer: `after` past `start`, every walk stops.
    pub fn arm(
        start: Instant,
        after: Duration,
        targets: &[Target],
        agent: Option<&str>,
    ) -> &'static Deadline {
        let deadline: &'static Deadline = Box::leak(Box::new(Deadline {
            start,
            after,
            targets: targets.iter().map(|t| escape(t.path.as_bytes())).collect(),
            agent: agent.map(str::to_owned),
            state: Mutex::new(State::default()),
        }));
        std::thread::spawn(move || {
            let at = start + after;
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            stop_walks();
            std::thread::sleep(STRAGGLER);
            if let Some(line) =
                deadline.report(" (a removal had not returned: counts from its last progress)")
            {
                // Within the second the webhook's margin still leaves before the kill.
                if let Some(agent) = &deadline.agent {
                    let _ = send_report(agent, Outcome::CutOff, &line);
                }
                std::process::exit(1);
            }
        });
        deadline
    }

    /// The target at `index` starts.
    pub fn starting(&self, index: usize) {
        let mut state = self.lock();
        state.current = Some(index);
        state.current_removed = 0;
        state.current_bytes = 0;
    }

    /// The current target's progress, as its walk reports it.
    pub fn progress(&self, removed: u64, bytes: u64) {
        let mut state = self.lock();
        state.current_removed = removed;
        state.current_bytes = bytes;
    }

    /// The current target is done, cut off or not: its counts are final.
    pub fn done(&self, report: &Report) {
        let mut state = self.lock();
        state.removed += report.removed;
        state.bytes += report.bytes;
        state.current_removed = 0;
        state.current_bytes = 0;
    }

    /// Prints the cut-off line when the deadline stopped the cleanup, once; true when it
    /// was cut off (whoever printed).
    pub fn report_if_cut_off(&self) -> bool {
        if !walks_stopped() {
            return false;
        }
        self.report("");
        true
    }

    /// The cut-off line, once printed.
    pub fn line(&self) -> Option<String> {
        self.lock().line.clone()
    }

    /// Prints the line unless it was printed already; the line when this call printed it.
    fn report(&self, note: &str) -> Option<String> {
        let mut state = self.lock();
        if state.line.is_some() {
            return None;
        }
        let removed = state.removed + state.current_removed;
        let bytes = state.bytes + state.current_bytes;
        let mut left: Vec<String> = Vec::new();
        let first_left = match state.current {
            Some(index) => {
                left.push(format!("{} (not finished)", self.targets[index]));
                index + 1
            }
            None => 0,
        };
        for target in self.targets.iter().skip(first_left) {
            left.push(format!("{target} (not started)"));
        }
        let line = format!(
            "cut off by its deadline, {} s after the start: removed {} {}, {} in {:.2} \
             s{note}; left for the node reaper: {}",
            seconds(self.after),
            thousands(removed),
            if removed == 1 { "entry" } else { "entries" },
            size(bytes),
            self.start.elapsed().as_secs_f64(),
            if left.is_empty() {
                "nothing".to_owned()
            } else {
                left.join(", ")
            }
        );
        eprintln!("prestop-clean: {line}");
        state.line = Some(line.clone());
        Some(line)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock still holds counts worth reporting.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `38` for whole seconds (every `--deadline`), `1.4` for what the node agent's answer
/// made of it (issue 39).
fn seconds(after: Duration) -> String {
    if after.subsec_millis() == 0 {
        after.as_secs().to_string()
    } else {
        format!("{:.1}", after.as_secs_f64())
    }
}
