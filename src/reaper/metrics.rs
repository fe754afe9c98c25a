//! The reaper's Prometheus metrics, served with `/healthz` and `/readyz` on its own
//! plain-HTTP port (`--metrics-listen`). Label values come from closed sets.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The closed set of the `reason` label of `kept_directories` (`node::kept` decides them).
pub const KEPT_REASONS: [&str; 6] = [
    "watch_not_synced",
    "pod_exists",
    "pod_uses",
    "delay",
    "in_use",
    "in_use_unknown",
];

/// Refusal reasons, the closed set of the `reason` label.
pub const REASONS: [&str; 16] = [
    "unsealed",
    "seal_mismatch",
    "host_mismatch",
    "protected",
    "not_allowed",
    "rule",
    "host_path_unknown",
    "not_mounted",
    "user_unknown",
    "user_ambiguous",
    "in_use",
    "in_use_unknown",
    "cleaner_refused",
    "cleaner_failed",
    "survivors",
    "walk_crashed",
];

pub struct Metrics {
    registry: Registry,
    pub emptied: Counter,
    pub already_empty: Counter,
    pub would_empty: Counter,
    pub entries_removed: Counter,
    pub bytes_freed: Counter,
    /// Directories emptied whose hook or sidecar had been cut off by its deadline, by
    /// the marker it left (`prestop_clean::CUT_OFF_MARKER`): anyone who can write the
    /// directory can forge one, so it is counted and never decides anything.
    pub cut_off_finished: Counter,
    /// Per-pod directories removed themselves once emptied (issue 38, class 8).
    pub per_pod_removed: Counter,
    refusals: Family<ReasonLabels, Counter>,
    pub watch_restarts: Counter,
    pub state_write_failures: Counter,
    pub recorded: Gauge,
    pub pending: Gauge,
    pub pods: Gauge,
    pub synced: Gauge,
    kept: Family<ReasonLabels, Gauge>,
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("prestop_injector_reaper");
        let metrics = Metrics {
            emptied: Counter::default(),
            already_empty: Counter::default(),
            would_empty: Counter::default(),
            entries_removed: Counter::default(),
            bytes_freed: Counter::default(),
            cut_off_finished: Counter::default(),
            per_pod_removed: Counter::default(),
            refusals: Family::default(),
            watch_restarts: Counter::default(),
            state_write_failures: Counter::default(),
            recorded: Gauge::default(),
            pending: Gauge::default(),
            pods: Gauge::default(),
            synced: Gauge::default(),
            kept: Family::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "directories_emptied",
            "Directories of gone pods emptied (something was removed)",
            metrics.emptied.clone(),
        );
        r.register(
            "directories_already_empty",
            "Directories of gone pods found empty or missing (their preStop had cleaned)",
            metrics.already_empty.clone(),
        );
        r.register(
            "directories_would_empty",
            "Directories --dry-run reported and left untouched",
            metrics.would_empty.clone(),
        );
        r.register(
            "entries_removed",
            "Files, directories and other entries removed",
            metrics.entries_removed.clone(),
        );
        r.register(
            "bytes_freed",
            "Bytes of regular files removed",
            metrics.bytes_freed.clone(),
        );
        r.register(
            "cut_off_cleanups_finished",
            "Directories emptied after their preStop or sidecar cleanup was cut off by its deadline",
            metrics.cut_off_finished.clone(),
        );
        r.register(
            "per_pod_directories_removed",
            "Emptied directories named by their one gone pod's uid (subPathExpr: $(POD_UID)), removed themselves",
            metrics.per_pod_removed.clone(),
        );
        r.register(
            "refusals",
            "Directories (or injected targets) not emptied, by reason",
            metrics.refusals.clone(),
        );
        r.register(
            "watch_restarts",
            "Times the watch of the node's pods failed and was started again from a full list",
            metrics.watch_restarts.clone(),
        );
        r.register(
            "state_write_failures",
            "Failed writes of the state file",
            metrics.state_write_failures.clone(),
        );
        r.register(
            "recorded_directories",
            "Host directories recorded for injected pods",
            metrics.recorded.clone(),
        );
        r.register(
            "pending_directories",
            "Recorded directories whose pods are gone, waiting for the delay",
            metrics.pending.clone(),
        );
        r.register(
            "pods",
            "Pods of this node known from the watch",
            metrics.pods.clone(),
        );
        r.register(
            "synced",
            "1 when a complete list of the node's pods has been seen since the last watch failure",
            metrics.synced.clone(),
        );
        r.register(
            "kept_directories",
            "Recorded directories not emptied now, by why: watch_not_synced, pod_exists, \
             pod_uses, delay, in_use, in_use_unknown (the last check's verdict)",
            metrics.kept.clone(),
        );
        for reason in KEPT_REASONS {
            metrics.kept.get_or_create(&ReasonLabels { reason }).get();
        }
        for reason in REASONS {
            metrics
                .refusals
                .get_or_create(&ReasonLabels { reason })
                .get();
        }
        Metrics {
            registry,
            ..metrics
        }
    }

    pub fn refused(&self, reason: &'static str) {
        self.refusals.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Sets `kept_directories{reason}`.
    pub fn kept(&self, reason: &'static str, count: i64) {
        self.kept.get_or_create(&ReasonLabels { reason }).set(count);
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}
