//! Prometheus metrics (OpenMetrics text on the probe port's `/metrics`).
//!
//! Label values are `&'static str` chosen from closed sets (endpoint, known kinds,
//! operation, outcome, denial reason), so cardinality is bounded whatever the API server
//! sends and recording a request costs a hash of a few pointers, not an allocation.

use crate::admission::Reviewed;
use crate::mutation::Endpoint;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    endpoint: &'static str,
    kind: &'static str,
    operation: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// Every metric the server exports.
pub struct Metrics {
    registry: Registry,
    requests: Family<ReviewLabels, Counter>,
    duration: Family<EndpointLabels, Histogram>,
    rejected: Family<CodeLabels, Counter>,
    patches: Counter,
    denials: Family<ReasonLabels, Counter>,
    warnings: Counter,
    tls_reloads: Family<ResultLabels, Counter>,
    tls_handshake_failures: Counter,
    cert_expiry: Gauge,
    kubernetes_version_known: Gauge,
    kubernetes_minor_version: Gauge,
    allowed_host_path_prefixes: Gauge,
    seal_keys: Gauge,
    pub in_flight: Gauge,
    pub open_connections: Gauge,
}

/// The HTTP codes a request can be refused with before a review (`server::router`).
const REFUSAL_CODES: [u16; 5] = [400, 413, 415, 500, 504];

/// 50µs to 1s: a review takes tens of microseconds, so the interesting buckets are tiny.
const BUCKETS: [f64; 14] = [
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("prestop_injector");
        let metrics = Metrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
            rejected: Family::default(),
            patches: Counter::default(),
            denials: Family::default(),
            warnings: Counter::default(),
            tls_reloads: Family::default(),
            tls_handshake_failures: Counter::default(),
            cert_expiry: Gauge::default(),
            kubernetes_version_known: Gauge::default(),
            kubernetes_minor_version: Gauge::default(),
            allowed_host_path_prefixes: Gauge::default(),
            seal_keys: Gauge::default(),
            in_flight: Gauge::default(),
            open_connections: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "Admission reviews answered, by endpoint, object kind, operation and outcome",
            metrics.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from request headers to response, by endpoint",
            metrics.duration.clone(),
        );
        registry.register(
            "rejected_requests",
            "Requests refused before a review (400, 413, 415, 500, 504), by HTTP code",
            metrics.rejected.clone(),
        );
        registry.register(
            "patches",
            "Reviews answered with a JSON patch",
            metrics.patches.clone(),
        );
        registry.register(
            "denials",
            "Reviews denied, by reason",
            metrics.denials.clone(),
        );
        registry.register(
            "warnings",
            "Warnings returned to the API server",
            metrics.warnings.clone(),
        );
        registry.register(
            "tls_reloads",
            "Attempts to load a changed serving certificate, by result (success, error)",
            metrics.tls_reloads.clone(),
        );
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed or timed out",
            metrics.tls_handshake_failures.clone(),
        );
        registry.register(
            "tls_cert_expiry_timestamp_seconds",
            "Expiry (notAfter) of the serving certificate, unix seconds",
            metrics.cert_expiry.clone(),
        );
        registry.register(
            "kubernetes_version_known",
            "1 when the cluster's Kubernetes version is known (from the API server or \
             kubernetesVersion), 0 while the oldest supported release is assumed",
            metrics.kubernetes_version_known.clone(),
        );
        registry.register(
            "kubernetes_minor_version",
            "Minor version of Kubernetes 1.x the mutations are decided for (assumed or known)",
            metrics.kubernetes_minor_version.clone(),
        );
        registry.register(
            "allowed_host_path_prefixes",
            "Entries of allowedHostPathPrefixes; 0: nothing that deletes is injected",
            metrics.allowed_host_path_prefixes.clone(),
        );
        registry.register(
            "seal_keys",
            "Keys of --seal-key-file; 0: nothing is sealed, and the reaper empties nothing",
            metrics.seal_keys.clone(),
        );
        registry.register(
            "in_flight_requests",
            "Requests being handled",
            metrics.in_flight.clone(),
        );
        registry.register(
            "open_connections",
            "Open TLS connections",
            metrics.open_connections.clone(),
        );
        // Counters an alert reads are exported at 0 from the start, as Prometheus
        // recommends: a counter born at 1 on its first event shows no increase(), so the
        // first failed reload of a pod's life would not fire TLSReloadFailed, and a
        // missing family empties WebhookErrors' sums (docs/RUNBOOKS.md).
        for result in ["success", "error"] {
            metrics
                .tls_reloads
                .get_or_create(&ResultLabels { result })
                .get();
        }
        for code in REFUSAL_CODES {
            metrics.rejected.get_or_create(&CodeLabels { code }).get();
        }
        Metrics {
            registry,
            ..metrics
        }
    }

    /// Records one answered review.
    pub fn review(&self, endpoint: Endpoint, reviewed: &Reviewed, elapsed: Duration) {
        let labels = ReviewLabels {
            endpoint: endpoint.as_str(),
            kind: kind_label(&reviewed.request.kind.kind),
            operation: reviewed.request.operation.as_str(),
            outcome: reviewed.outcome.as_str(),
        };
        self.requests.get_or_create(&labels).inc();
        self.observe(endpoint, elapsed);
        if reviewed.decision.patch.is_some() {
            self.patches.inc();
        }
        if let Some(denial) = &reviewed.decision.denial {
            self.denials
                .get_or_create(&ReasonLabels {
                    reason: denial.reason,
                })
                .inc();
        }
        if !reviewed.decision.warnings.is_empty() {
            self.warnings
                .inc_by(reviewed.decision.warnings.len() as u64);
        }
    }

    /// Records a request answered with an HTTP error before or instead of a review.
    pub fn rejected(&self, endpoint: Endpoint, code: u16, elapsed: Duration) {
        self.rejected.get_or_create(&CodeLabels { code }).inc();
        self.observe(endpoint, elapsed);
    }

    fn observe(&self, endpoint: Endpoint, elapsed: Duration) {
        self.duration
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.as_str(),
            })
            .observe(elapsed.as_secs_f64());
    }

    pub fn tls_reload(&self, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.tls_reloads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    pub fn tls_handshake_failed(&self) {
        self.tls_handshake_failures.inc();
    }

    pub fn set_cert_expiry(&self, unix_seconds: i64) {
        self.cert_expiry.set(unix_seconds);
    }

    /// The Kubernetes version mutations are decided for, and whether it is known.
    pub fn set_kubernetes_version(&self, minor: u32, known: bool) {
        self.kubernetes_minor_version.set(i64::from(minor));
        self.kubernetes_version_known.set(i64::from(known));
    }

    /// How many host path prefixes the cleanup may delete below (0: none, nothing is).
    pub fn set_allowed_host_path_prefixes(&self, count: usize) {
        self.allowed_host_path_prefixes
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// How many seal keys were loaded (0: no pod is sealed for the reaper).
    pub fn set_seal_keys(&self, count: usize) {
        self.seal_keys.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::with_capacity(8192);
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// Kinds we know map to themselves; anything else is `other`, keeping label sets bounded.
fn kind_label(kind: &str) -> &'static str {
    match kind {
        "Job" => "Job",
        "CronJob" => "CronJob",
        "Pod" => "Pod",
        "Deployment" => "Deployment",
        "StatefulSet" => "StatefulSet",
        "DaemonSet" => "DaemonSet",
        "ReplicaSet" => "ReplicaSet",
        _ => "other",
    }
}
