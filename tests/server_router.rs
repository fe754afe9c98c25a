//! Handler tests through the router, without a socket: the error table row by row, the
//! `?timeout=` handling, and the probe endpoints.

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt as _;
use hyper::body::Frame;
use prestop_injector::config::Config;
use prestop_injector::server::{probe_router, router, AppState};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tower::ServiceExt as _;

#[path = "support/server.rs"]
mod support;

fn state() -> Arc<AppState> {
    Arc::new(AppState {
        max_body_bytes: 1024,
        ..AppState::new(Config::default())
    })
}

async fn call(app: Router, request: Request<Body>) -> (StatusCode, String, Option<String>) {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        String::from_utf8_lossy(&body).into_owned(),
        content_type,
    )
}

fn post(path: &str, content_type: Option<&str>, body: impl Into<Body>) -> Request<Body> {
    let mut builder = Request::post(path);
    if let Some(content_type) = content_type {
        builder = builder.header("content-type", content_type);
    }
    builder.body(body.into()).unwrap()
}

const JSON: Option<&str> = Some("application/json");

#[tokio::test]
async fn a_valid_review_is_answered_with_its_uid_on_every_endpoint() {
    for path in ["/mutate", "/mutate/auto", "/validate"] {
        let (status, body, content_type) =
            call(router(state()), post(path, JSON, support::review("uid-1"))).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert_eq!(content_type.as_deref(), Some("application/json"));
        let review: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
        assert_eq!(review["response"]["uid"], "uid-1");
        assert!(review["response"]["allowed"].is_boolean());
    }
}

#[tokio::test]
async fn a_large_review_is_answered_too() {
    // Big enough to be reviewed off the runtime thread.
    let mut review: serde_json::Value = serde_json::from_slice(&support::review("big")).unwrap();
    review["request"]["object"]["metadata"]["annotations"] =
        serde_json::json!({ "filler": "x".repeat(1 << 20) });
    let state = Arc::new(AppState::new(Config::default()));
    let request = post("/mutate", JSON, serde_json::to_vec(&review).unwrap());
    let (status, body, _) = call(router(state), request).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains(r#""uid":"big""#));
}

#[tokio::test]
async fn content_type_parameters_and_case_are_accepted() {
    let request = post(
        "/mutate",
        Some("Application/JSON; charset=utf-8"),
        support::review("u"),
    );
    assert_eq!(call(router(state()), request).await.0, StatusCode::OK);
}

/// Each row: request → status and a phrase of the plain-text message.
#[tokio::test]
async fn error_table() {
    let review_v1beta1 = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u"}}"#;
    let rows: Vec<(&str, Request<Body>, StatusCode, &str)> = vec![
        (
            "empty body",
            post("/mutate", JSON, Body::empty()),
            StatusCode::BAD_REQUEST,
            "empty",
        ),
        (
            "empty body with content-length 0",
            Request::post("/mutate")
                .header("content-length", "0")
                .body(Body::empty())
                .unwrap(),
            StatusCode::BAD_REQUEST,
            "empty",
        ),
        (
            "malformed JSON",
            post("/mutate", JSON, "{not json"),
            StatusCode::BAD_REQUEST,
            "not a valid AdmissionReview",
        ),
        (
            "not JSON content type",
            post("/mutate", Some("text/plain"), support::review("u")),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
        (
            "no content type",
            post("/mutate", None, support::review("u")),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "got none",
        ),
        (
            "content-length over the limit",
            Request::post("/mutate")
                .header("content-type", "application/json")
                .header("content-length", "4096")
                .body(Body::from(vec![b' '; 4096]))
                .unwrap(),
            StatusCode::PAYLOAD_TOO_LARGE,
            "4096 bytes is over the limit of 1024",
        ),
        (
            "streamed body over the limit",
            post(
                "/mutate",
                JSON,
                Body::new(Chunks(vec![vec![b' '; 600], vec![b' '; 600]])),
            ),
            StatusCode::PAYLOAD_TOO_LARGE,
            "over the limit of 1024",
        ),
        (
            "v1beta1 review",
            post("/mutate", JSON, &review_v1beta1[..]),
            StatusCode::BAD_REQUEST,
            "admission.k8s.io/v1",
        ),
        (
            "no request",
            post(
                "/mutate",
                JSON,
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            ),
            StatusCode::BAD_REQUEST,
            "no request",
        ),
        (
            "no uid",
            post(
                "/mutate",
                JSON,
                r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}"#,
            ),
            StatusCode::BAD_REQUEST,
            "no uid",
        ),
        (
            "unparsable timeout",
            post("/mutate?timeout=soon", JSON, support::review("u")),
            StatusCode::BAD_REQUEST,
            "timeout",
        ),
        (
            "GET on an endpoint",
            Request::get("/mutate").body(Body::empty()).unwrap(),
            StatusCode::METHOD_NOT_ALLOWED,
            "",
        ),
        (
            "unknown path",
            post("/nope", JSON, support::review("u")),
            StatusCode::NOT_FOUND,
            "/mutate",
        ),
    ];
    for (name, request, status, phrase) in rows {
        let (got, body, content_type) = call(router(state()), request).await;
        assert_eq!(got, status, "{name}: {body}");
        assert!(body.contains(phrase), "{name}: {body:?} lacks {phrase:?}");
        if !phrase.is_empty() {
            assert_eq!(
                content_type.as_deref(),
                Some("text/plain; charset=utf-8"),
                "{name}"
            );
        }
    }
}

/// A body of the given chunks without a length, as a chunked or HTTP/2 request sends.
struct Chunks(Vec<Vec<u8>>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        if self.0.is_empty() {
            return Poll::Ready(None);
        }
        let chunk = self.0.remove(0);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))))
    }
}

/// A body that never ends, as from a stalled client.
struct Stalled;

impl hyper::body::Body for Stalled {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Pending
    }
}

#[tokio::test]
async fn the_api_servers_timeout_bounds_the_request() {
    let request = post("/mutate?timeout=100ms", JSON, Body::new(Stalled));
    let started = std::time::Instant::now();
    let (status, body, _) = call(router(state()), request).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn the_server_bound_caps_a_longer_timeout() {
    let state = Arc::new(AppState {
        request_timeout: Duration::from_millis(100),
        ..AppState::new(Config::default())
    });
    let request = post("/mutate?timeout=30s", JSON, Body::new(Stalled));
    let (status, _, _) = call(router(state), request).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
}

#[tokio::test]
async fn probes() {
    let state = state();
    let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
    assert_eq!(
        call(probe_router(state.clone()), get("/healthz")).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(probe_router(state.clone()), get("/readyz")).await.0,
        StatusCode::OK
    );
    state.readiness.set_shutting_down();
    let (status, body, _) = call(probe_router(state.clone()), get("/readyz")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("shutting down"));
    assert_eq!(
        call(probe_router(state.clone()), get("/healthz")).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn metrics_count_reviews_and_refusals() {
    let state = state();
    let scrape = |state: Arc<AppState>| async move {
        let request = Request::get("/metrics").body(Body::empty()).unwrap();
        let (status, body, content_type) = call(probe_router(state), request).await;
        assert_eq!(status, StatusCode::OK);
        assert!(content_type
            .unwrap()
            .starts_with("application/openmetrics-text"));
        support::parse_metrics(&body)
    };
    let reviews = r#"prestop_injector_requests_total{endpoint="mutate",kind="Pod",operation="CREATE",outcome="unchanged"}"#;
    let refused = r#"prestop_injector_rejected_requests_total{code="415"}"#;
    let before = scrape(state.clone()).await;
    assert_eq!(support::sample(&before, reviews), 0.0);
    for i in 0..3 {
        let request = post("/mutate", JSON, support::review(&format!("u{i}")));
        assert_eq!(call(router(state.clone()), request).await.0, StatusCode::OK);
    }
    let request = post("/mutate", Some("text/plain"), "x");
    call(router(state.clone()), request).await;
    let after = scrape(state.clone()).await;
    assert_eq!(support::sample(&after, reviews), 3.0);
    assert_eq!(support::sample(&after, refused), 1.0);
    assert_eq!(
        support::sample(
            &after,
            r#"prestop_injector_request_duration_seconds_count{endpoint="mutate"}"#
        ),
        4.0
    );
}
