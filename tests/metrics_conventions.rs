//! Every `/metrics` page we serve follows Prometheus' naming conventions, as
//! `promtool check metrics` (Debian's `prometheus` package) reads them: units in the name,
//! `_total` on counters, help text, no reserved or clashing names. Each page is rendered
//! after traffic, so labelled families have series and the check sees their labels too.
//! Without promtool the tests skip, or fail under PRESTOP_REQUIRE_TOOLS=1.

#[path = "support/deploy.rs"]
mod common;
#[path = "support/promtool.rs"]
mod promtool;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use prestop_injector::config::Config;
use prestop_injector::server::{probe_router, router, AppState};
use std::sync::Arc;
use tower::ServiceExt as _;

fn review(uid: &str, annotations: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "p",
            "object": {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "annotations": annotations},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }
    }))
    .unwrap()
}

async fn send(app: axum::Router, request: Request<Body>) -> String {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    assert!(
        status.is_success() || status.is_client_error(),
        "{status}: {body}"
    );
    body
}

fn post(path: &str, content_type: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header("content-type", content_type)
        .body(body.into())
        .unwrap()
}

/// Label names whose values come from closed sets (docs/SERVER.md#metrics): promtool
/// cannot see cardinality, so a label such as `pod`, `namespace` or `path` fails here.
const BOUNDED_LABELS: [&str; 8] = [
    "endpoint",
    "kind",
    "operation",
    "outcome",
    "code",
    "reason",
    "result",
    "le",
];

fn assert_bounded_labels(page: &str) {
    for line in page.lines().filter(|line| !line.starts_with('#')) {
        let Some((_, labels)) = line.split_once('{') else {
            continue;
        };
        let labels = labels.split_once('}').map_or(labels, |(labels, _)| labels);
        for pair in labels.split("\",").filter(|pair| !pair.is_empty()) {
            let name = pair.split_once('=').map_or(pair, |(name, _)| name);
            assert!(
                BOUNDED_LABELS.contains(&name),
                "label {name} in {line} is not from a closed set"
            );
        }
    }
}

/// The webhook server's page, served by its probe router after reviews that leave a pod
/// unchanged, patch one, deny one, a refused request and the TLS events.
#[tokio::test]
async fn server_metrics_pass_promtool_check_metrics() {
    let Some(promtool) = promtool::promtool() else {
        return;
    };
    let state = Arc::new(AppState::new(Config::default()));
    let reviews = [
        ("plain", serde_json::json!({})),
        (
            "custom",
            serde_json::json!({"prestop-injector.io/command": "sleep 1"}),
        ),
        (
            "malformed",
            serde_json::json!({"prestop-injector.io/cleanup": "scratch"}),
        ),
    ];
    for (uid, annotations) in reviews {
        for path in ["/mutate", "/mutate/auto", "/validate"] {
            let request = post(path, "application/json", review(uid, annotations.clone()));
            send(router(state.clone()), request).await;
        }
    }
    send(router(state.clone()), post("/mutate", "text/plain", "x")).await;
    state.metrics.tls_reload(true);
    state.metrics.tls_reload(false);
    state.metrics.tls_handshake_failed();
    state.metrics.set_cert_expiry(1_900_000_000);

    let request = Request::get("/metrics").body(Body::empty()).unwrap();
    let response = probe_router(state.clone()).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let page = String::from_utf8_lossy(&body).into_owned();
    // The traffic above reached every labelled family, so its labels are checked too.
    for series in [
        "prestop_injector_requests_total{",
        "prestop_injector_request_duration_seconds_bucket{",
        "prestop_injector_rejected_requests_total{",
        "prestop_injector_denials_total{",
        "prestop_injector_tls_reloads_total{",
        "prestop_injector_patches_total ",
    ] {
        assert!(page.contains(series), "no {series} after traffic:\n{page}");
    }
    promtool::check_metrics(&promtool, "the webhook server's /metrics", &page);
    assert_bounded_labels(&page);
}

/// The reaper's page after it emptied, refused and restarted its watch.
#[test]
fn reaper_metrics_pass_promtool_check_metrics() {
    let Some(promtool) = promtool::promtool() else {
        return;
    };
    let metrics = prestop_injector::reaper::metrics::Metrics::new();
    metrics.emptied.inc();
    metrics.already_empty.inc();
    metrics.entries_removed.inc_by(12);
    metrics.bytes_freed.inc_by(4096);
    metrics.refused("seal_mismatch");
    metrics.watch_restarts.inc();
    metrics.recorded.set(3);
    metrics.pending.set(1);
    metrics.pods.set(5);
    metrics.synced.set(1);
    let page = metrics.encode();
    assert!(
        page.contains(r#"prestop_injector_reaper_refusals_total{reason="seal_mismatch"} 1"#),
        "{page}"
    );
    promtool::check_metrics(&promtool, "the reaper's /metrics", &page);
    assert_bounded_labels(&page);
}

/// The check itself catches what it is here for: a counter without `_total` and a
/// duration in milliseconds are findings, so a clean page above means something.
#[test]
fn promtool_check_metrics_flags_a_bad_name() {
    let Some(promtool) = promtool::promtool() else {
        return;
    };
    let bad = "# HELP prestop_injector_hits Hits.\n# TYPE prestop_injector_hits counter\n\
               prestop_injector_hits 1\n\
               # HELP prestop_injector_wait_milliseconds Wait.\n\
               # TYPE prestop_injector_wait_milliseconds gauge\n\
               prestop_injector_wait_milliseconds 3\n";
    let findings = promtool::metrics_findings(&promtool, bad);
    assert!(findings.contains("_total"), "{findings}");
    assert!(findings.contains("base unit"), "{findings}");
}

/// The OpenMetrics page is read as Prometheus stores it: a counter family `x` becomes
/// `x_total` on its HELP and TYPE lines only, gauges and samples are untouched.
#[test]
fn openmetrics_counters_are_named_as_prometheus_stores_them() {
    let page = "# HELP a_hits Hits.\n# TYPE a_hits counter\na_hits_total 1\n\
                # HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n# EOF\n";
    assert_eq!(
        promtool::openmetrics_to_text(page),
        "# HELP a_hits_total Hits.\n# TYPE a_hits_total counter\na_hits_total 1\n\
         # HELP a_up Up.\n# TYPE a_up gauge\na_up 1\n"
    );
}
