//! Per-connection bookkeeping: age, requests in flight, and when the client last started
//! sending something we have not answered yet. A small watchdog reads it to enforce the
//! header-read timeout, the idle timeout and the maximum connection age.
//!
//! hyper's own `header_read_timeout` also runs while a keep-alive connection sits idle
//! between requests, which would make it an idle timeout too; we want a short limit on a
//! half-sent request and a long one on an idle connection, hence our own tracking.

use super::metrics::Metrics;
use super::router::Readiness;
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, Request, Response};
use axum::Router;
use hyper::body::Incoming;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tower::ServiceExt as _;

/// Time limits applied to every TLS connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// TLS handshake, and a request's headers from its first byte.
    pub header_timeout: Duration,
    /// A connection with nothing in flight and nothing pending is closed after this.
    pub idle_timeout: Duration,
    /// Older connections are closed after their current request (docs/DESIGN.md#server).
    pub max_age: Duration,
    /// Once a graceful close has started, how long the connection may take to finish
    /// (a client that stops reading its response would otherwise hold it forever).
    pub close_grace: Duration,
}

impl ConnLimits {
    /// How often the watchdog looks: often enough that a limit is overrun by at most a
    /// quarter, rarely enough to cost nothing.
    pub fn tick(&self) -> Duration {
        let shortest = self.header_timeout.min(self.idle_timeout).min(self.max_age);
        (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

/// What the watchdog decides for a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Keep,
    /// Finish what is in flight, then close (HTTP/2: GOAWAY).
    Graceful,
    /// Close now: the client is stuck half-way through a request.
    Drop,
}

#[derive(Debug)]
pub struct ConnState {
    born: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds since `born` (+1, so 0 means "none") of the first byte received since
    /// the last request started or finished.
    pending_since: AtomicU64,
    /// Milliseconds since `born` when the last request finished.
    last_done: AtomicU64,
}

impl ConnState {
    pub fn new() -> ConnState {
        ConnState {
            born: Instant::now(),
            in_flight: AtomicUsize::new(0),
            pending_since: AtomicU64::new(0),
            last_done: AtomicU64::new(0),
        }
    }

    pub fn age(&self) -> Duration {
        self.born.elapsed()
    }

    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64 + 1
    }

    fn note_read(&self) {
        if self.pending_since.load(Relaxed) == 0 {
            self.pending_since.store(self.now_ms(), Relaxed);
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Relaxed);
        self.pending_since.store(0, Relaxed);
    }

    fn request_done(&self) {
        self.in_flight.fetch_sub(1, Relaxed);
        self.pending_since.store(0, Relaxed);
        self.last_done.store(self.now_ms(), Relaxed);
    }

    pub fn verdict(&self, limits: &ConnLimits, http2: bool) -> Verdict {
        let now = self.now_ms();
        // HTTP/1.1 is told by `Connection: close` on its next response instead, so that an
        // idle keep-alive connection is never closed under a request the client just sent.
        if http2 && self.age() >= limits.max_age {
            return Verdict::Graceful;
        }
        if self.in_flight.load(Relaxed) > 0 {
            return Verdict::Keep;
        }
        let pending = self.pending_since.load(Relaxed);
        if pending != 0 {
            if now.saturating_sub(pending) >= limits.header_timeout.as_millis() as u64 {
                // An HTTP/2 client's stray frames also count as pending; GOAWAY is kinder.
                return if http2 {
                    Verdict::Graceful
                } else {
                    Verdict::Drop
                };
            }
        } else if now.saturating_sub(self.last_done.load(Relaxed))
            >= limits.idle_timeout.as_millis() as u64
        {
            return Verdict::Graceful;
        }
        Verdict::Keep
    }
}

impl Default for ConnState {
    fn default() -> Self {
        ConnState::new()
    }
}

/// The socket, noting when bytes arrive.
pub struct Tracked<T> {
    pub inner: T,
    pub state: Arc<ConnState>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.state.note_read();
        }
        result
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The router as seen by one connection: counts requests in flight and, on HTTP/1.1,
/// adds `Connection: close` once the connection is older than the maximum age or the
/// server is shutting down (hyper closes the connection after writing such a response).
/// During the shutdown delay that moves every busy keep-alive client off the connection
/// while we still serve, instead of closing it later under a request it has just written
/// — which Go's client, the API server's, does not retry.
#[derive(Clone)]
pub struct ConnService {
    pub router: Router,
    pub state: Arc<ConnState>,
    pub metrics: Arc<Metrics>,
    /// `Some` on HTTP/1.1.
    pub close_after: Option<Duration>,
    pub readiness: Arc<Readiness>,
}

struct InFlight {
    state: Arc<ConnState>,
    metrics: Arc<Metrics>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.request_done();
        self.metrics.in_flight.dec();
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<axum::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.state.request_started();
        self.metrics.in_flight.inc();
        let guard = InFlight {
            state: self.state.clone(),
            metrics: self.metrics.clone(),
        };
        let response = self.router.clone().oneshot(request);
        let close_after = self.close_after;
        let readiness = self.readiness.clone();
        Box::pin(async move {
            let mut response = response.await?;
            let old = close_after
                .is_some_and(|age| guard.state.age() >= age || readiness.is_shutting_down());
            drop(guard);
            if old {
                response
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ConnLimits = ConnLimits {
        header_timeout: Duration::from_millis(0),
        idle_timeout: Duration::from_secs(3600),
        max_age: Duration::from_secs(3600),
        close_grace: Duration::from_secs(3600),
    };

    #[test]
    fn half_sent_request_is_dropped_but_idle_is_kept() {
        let state = ConnState::new();
        assert_eq!(state.verdict(&LIMITS, false), Verdict::Keep);
        state.note_read();
        assert_eq!(state.verdict(&LIMITS, false), Verdict::Drop);
        assert_eq!(state.verdict(&LIMITS, true), Verdict::Graceful);
        state.request_started();
        assert_eq!(state.verdict(&LIMITS, false), Verdict::Keep);
        state.request_done();
        assert_eq!(state.verdict(&LIMITS, false), Verdict::Keep);
    }

    #[test]
    fn idle_and_old_connections_are_closed_gracefully() {
        let state = ConnState::new();
        let idle = ConnLimits {
            idle_timeout: Duration::ZERO,
            ..LIMITS
        };
        assert_eq!(state.verdict(&idle, false), Verdict::Graceful);
        let old = ConnLimits {
            max_age: Duration::ZERO,
            ..LIMITS
        };
        assert_eq!(state.verdict(&old, true), Verdict::Graceful);
        // HTTP/1.1 learns it from `Connection: close` instead.
        assert_eq!(state.verdict(&old, false), Verdict::Keep);
    }

    #[test]
    fn tick_is_bounded() {
        assert_eq!(LIMITS.tick(), Duration::from_millis(10));
        let slow = ConnLimits {
            header_timeout: Duration::from_secs(60),
            ..LIMITS
        };
        assert_eq!(slow.tick(), Duration::from_secs(1));
    }
}
