//! HTTP routing: the admission endpoints (TLS port) and the probes (plain-HTTP port).
//!
//! The transport checks run in the order of docs/DESIGN.md#server's error table: empty body (by
//! Content-Length) 400, content type 415, size 413 (Content-Length first, then a capped
//! read), then whatever [`review`] refuses as 400. Every refusal is a plain-text sentence.

use super::metrics::Metrics;
use crate::admission::{review, Outcome, Reviewed};
use crate::config::Config;
use crate::mutation::Endpoint;
use arc_swap::ArcSwap;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether `/readyz` answers 200: TLS material loaded and not shutting down.
#[derive(Debug, Default)]
pub struct Readiness {
    tls_loaded: AtomicBool,
    shutting_down: AtomicBool,
}

impl Readiness {
    pub fn set_tls_loaded(&self) {
        self.tls_loaded.store(true, Ordering::Release);
    }

    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// `Err` carries the reason shown by `/readyz`.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.is_shutting_down() {
            Err("shutting down")
        } else if !self.tls_loaded.load(Ordering::Acquire) {
            Err("TLS certificate not loaded yet")
        } else {
            Ok(())
        }
    }
}

/// What the handlers share; built once, behind an `Arc`.
pub struct AppState {
    /// Swapped whole when the cluster's Kubernetes version is learned or changes
    /// ([`super::version`]); a request loads it without a lock.
    pub config: ArcSwap<Config>,
    pub metrics: Arc<Metrics>,
    pub readiness: Arc<Readiness>,
    /// Bodies larger than this are refused with 413 (`--max-body-bytes`).
    pub max_body_bytes: usize,
    /// Upper bound on handling one request, also when `?timeout=` asks for more.
    pub request_timeout: Duration,
}

impl AppState {
    /// Defaults for tests and embedding: default config, 16 MiB, 30 s, ready.
    pub fn new(config: Config) -> AppState {
        let readiness = Readiness::default();
        readiness.set_tls_loaded();
        AppState {
            config: ArcSwap::from_pointee(config),
            metrics: Arc::new(Metrics::new()),
            readiness: Arc::new(readiness),
            max_body_bytes: 16 << 20,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// The admission endpoints served over TLS.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/mutate/auto", post(mutate_auto))
        .route("/validate", post(validate))
        .fallback(not_found)
        .with_state(state)
}

/// `/healthz`, `/readyz` and `/metrics`, served on the plain-HTTP probe port.
pub fn probe_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn mutate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    handle(&state, Endpoint::Mutate, request).await
}

async fn mutate_auto(State(state): State<Arc<AppState>>, request: Request) -> Response {
    handle(&state, Endpoint::MutateAuto, request).await
}

async fn validate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    handle(&state, Endpoint::Validate, request).await
}

async fn not_found() -> Response {
    plain(
        StatusCode::NOT_FOUND,
        "no such endpoint; POST an AdmissionReview to /mutate, /mutate/auto or /validate".into(),
    )
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    match state.readiness.check() {
        Ok(()) => "ok\n".into_response(),
        Err(reason) => plain(StatusCode::SERVICE_UNAVAILABLE, reason.into()),
    }
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

async fn handle(state: &AppState, endpoint: Endpoint, request: Request) -> Response {
    let started = Instant::now();
    match answer(state, endpoint, request, started).await {
        Ok(reviewed) => {
            let elapsed = started.elapsed();
            state.metrics.review(endpoint, &reviewed, elapsed);
            log_review(endpoint, &reviewed, elapsed);
            let mut response = Response::new(Body::from(reviewed.body));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Err((code, message)) => {
            state
                .metrics
                .rejected(endpoint, code.as_u16(), started.elapsed());
            tracing::debug!(endpoint = endpoint.as_str(), code = code.as_u16(), %message, "request refused");
            plain(code, message)
        }
    }
}

type Refusal = (StatusCode, String);

async fn answer(
    state: &AppState,
    endpoint: Endpoint,
    request: Request,
    started: Instant,
) -> Result<Reviewed, Refusal> {
    let (parts, body) = request.into_parts();
    let timeout = match query_timeout(parts.uri.query()) {
        Ok(Some(timeout)) => timeout.min(state.request_timeout),
        Ok(None) => state.request_timeout,
        Err(message) => return Err((StatusCode::BAD_REQUEST, message)),
    };
    let deadline = started + timeout;
    let length = content_length(&parts.headers);
    if length == Some(0) {
        return Err(empty_body());
    }
    check_content_type(&parts.headers)?;
    let limit = state.max_body_bytes;
    if let Some(length) = length.filter(|&length| length > limit as u64) {
        return Err(too_large(format!(" of {length} bytes"), limit));
    }
    // Capped read: a chunked or HTTP/2 body without a length is cut off at the limit.
    let collected =
        tokio::time::timeout_at(deadline.into(), Limited::new(body, limit).collect()).await;
    let bytes = match collected {
        Err(_) => return Err(too_slow(timeout)),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(too_large(String::new(), limit))
        }
        Ok(Err(error)) => {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("cannot read the request body: {error}"),
            ))
        }
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    if bytes.is_empty() {
        return Err(empty_body());
    }
    // The review itself is synchronous and takes microseconds; do not start it when the
    // API server has already given up on us.
    if Instant::now() >= deadline {
        return Err(too_slow(timeout));
    }
    let reviewed = if bytes.len() <= INLINE_REVIEW_BYTES {
        review(&bytes, endpoint, &state.config.load())
    } else {
        // Parsing megabytes takes milliseconds: off the runtime, so one huge object cannot
        // stall every other connection (with one worker thread, nothing else would run).
        let config = state.config.load_full();
        let task = tokio::task::spawn_blocking(move || review(&bytes, endpoint, &config));
        match task.await {
            Ok(reviewed) => reviewed,
            Err(error) => {
                return Err((
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("review failed internally: {error}"),
                ))
            }
        }
    };
    reviewed.map_err(|bad| (StatusCode::BAD_REQUEST, bad.0))
}

/// Typical reviews are a few KiB and take microseconds: inline is cheapest.
const INLINE_REVIEW_BYTES: usize = 256 << 10;

/// `?timeout=10s` as the API server sends it. `Ok(None)` when absent.
fn query_timeout(query: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(value) = query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .find_map(|pair| pair.strip_prefix("timeout="))
    else {
        return Ok(None);
    };
    match super::duration::parse_duration(value) {
        Some(timeout) if !timeout.is_zero() => Ok(Some(timeout)),
        _ => Err(format!(
            "invalid timeout query parameter {value:?}; expected a duration such as 10s"
        )),
    }
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn check_content_type(headers: &HeaderMap) -> Result<(), Refusal> {
    let value = headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let media_type = value.split(';').next().unwrap_or("").trim();
    if media_type.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    let got = if value.is_empty() { "none" } else { value };
    Err((
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!("content type must be application/json, got {got}"),
    ))
}

fn empty_body() -> Refusal {
    (
        StatusCode::BAD_REQUEST,
        "request body is empty; expected an admission.k8s.io/v1 AdmissionReview".into(),
    )
}

fn too_large(size: String, limit: usize) -> Refusal {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body{size} is over the limit of {limit} bytes (--max-body-bytes)"),
    )
}

fn too_slow(timeout: Duration) -> Refusal {
    (
        StatusCode::GATEWAY_TIMEOUT,
        format!("request not handled within its timeout of {timeout:?}"),
    )
}

fn plain(code: StatusCode, mut message: String) -> Response {
    message.push('\n');
    (code, [(CONTENT_TYPE, "text/plain; charset=utf-8")], message).into_response()
}

/// One debug span per review; changes and denials are also logged at info with the same
/// fields. Unchanged allows stay at debug: an info line per request costs a webhook a
/// sizeable share of its throughput and tells the operator nothing.
fn log_review(endpoint: Endpoint, reviewed: &Reviewed, elapsed: Duration) {
    let request = &reviewed.request;
    let decision = &reviewed.decision;
    let namespace = request.namespace.as_deref().unwrap_or("");
    let name = request.name.as_deref().unwrap_or("");
    let dry_run = request.dry_run.unwrap_or(false);
    let elapsed_us = elapsed.as_micros() as u64;
    let span = tracing::debug_span!("review", endpoint = endpoint.as_str(), uid = %request.uid,
        kind = %request.kind.kind, namespace, name, operation = request.operation.as_str(), dry_run,
        outcome = reviewed.outcome.as_str());
    let _entered = span.enter();
    macro_rules! decided {
        ($level:ident, $message:literal) => {
            tracing::$level!(endpoint = endpoint.as_str(), uid = %request.uid, kind = %request.kind.kind,
                namespace, name, operation = request.operation.as_str(), dry_run,
                outcome = reviewed.outcome.as_str(),
                patch_ops = decision.patch.as_ref().map_or(0, |patch| patch.0.len()),
                warnings = ?decision.warnings,
                denial = decision.denial.as_ref().map(|denial| denial.message.as_str()),
                elapsed_us, $message)
        };
    }
    match reviewed.outcome {
        Outcome::Unchanged => {
            tracing::debug!(elapsed_us, warnings = ?decision.warnings, "review allowed unchanged")
        }
        Outcome::Patched => decided!(info, "review patched"),
        Outcome::Denied => decided!(info, "review denied"),
        Outcome::Error => decided!(error, "internal error while deciding"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_query() {
        assert_eq!(query_timeout(None), Ok(None));
        assert_eq!(query_timeout(Some("a=b")), Ok(None));
        assert_eq!(
            query_timeout(Some("timeout=5s")),
            Ok(Some(Duration::from_secs(5)))
        );
        assert_eq!(
            query_timeout(Some("x=1&timeout=250ms")),
            Ok(Some(Duration::from_millis(250)))
        );
        assert!(query_timeout(Some("timeout=soon")).is_err());
        assert!(query_timeout(Some("timeout=0s")).is_err());
    }
}
