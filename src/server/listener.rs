//! The TLS accept loop: TCP accept → TCP_NODELAY → connection cap → TLS handshake with a
//! timeout → HTTP/1.1 or HTTP/2 (by ALPN) serving the router, under a watchdog that
//! enforces the connection's time limits and graceful shutdown.

use super::connection::{ConnLimits, ConnService, ConnState, Tracked, Verdict};
use super::metrics::Metrics;
use super::router::Readiness;
use super::shutdown::signalled;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

/// Everything a connection task needs, shared by all of them.
pub struct Acceptor {
    pub tls: TlsAcceptor,
    pub router: Router,
    pub metrics: Arc<Metrics>,
    /// Set at SIGTERM: from then on HTTP/1.1 responses say `Connection: close`.
    pub readiness: Arc<Readiness>,
    pub limits: ConnLimits,
    pub max_connections: usize,
}

/// Accepts until shutdown. Each connection task holds a clone of `shutdown`, which is how
/// the server learns when all of them have finished.
pub async fn accept_loop(
    listener: TcpListener,
    acceptor: Arc<Acceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(acceptor.max_connections.max(1)));
    loop {
        // At the cap, stop accepting: new clients wait in the kernel backlog instead of
        // each costing us a task and a TLS session.
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            _ = signalled(&mut shutdown) => return,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = signalled(&mut shutdown) => return,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                // Out of descriptors or memory: back off briefly rather than spin. Anything
                // else (a peer that reset before we accepted) concerns one connection only.
                const EMFILE: i32 = 24;
                const ENFILE: i32 = 23;
                const ENOMEM: i32 = 12;
                const ENOBUFS: i32 = 105;
                if matches!(
                    error.raw_os_error(),
                    Some(EMFILE | ENFILE | ENOMEM | ENOBUFS)
                ) {
                    tracing::warn!(%error, "accept failed; pausing accepts briefly");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                } else {
                    tracing::debug!(%error, "accept failed");
                }
                continue;
            }
        };
        tokio::spawn(connection(
            stream,
            permit,
            acceptor.clone(),
            shutdown.clone(),
        ));
    }
}

struct OpenConnection(Arc<Metrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open_connections.dec();
    }
}

async fn connection(
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    acceptor: Arc<Acceptor>,
    shutdown: watch::Receiver<bool>,
) {
    // Without NODELAY, small HTTP/2 frames wait for delayed ACKs: 40 ms stalls.
    let _ = stream.set_nodelay(true);
    acceptor.metrics.open_connections.inc();
    let _open = OpenConnection(acceptor.metrics.clone());
    let limits = acceptor.limits;
    let handshake = tokio::time::timeout(limits.header_timeout, acceptor.tls.accept(stream)).await;
    let tls = match handshake {
        Ok(Ok(tls)) => tls,
        Ok(Err(error)) => {
            acceptor.metrics.tls_handshake_failed();
            tracing::debug!(%error, "TLS handshake failed");
            return;
        }
        Err(_) => {
            acceptor.metrics.tls_handshake_failed();
            tracing::debug!("TLS handshake timed out");
            return;
        }
    };
    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let state = Arc::new(ConnState::new());
    let io = TokioIo::new(Tracked {
        inner: tls,
        state: state.clone(),
    });
    let service = ConnService {
        router: acceptor.router.clone(),
        state: state.clone(),
        metrics: acceptor.metrics.clone(),
        close_after: (!http2).then_some(limits.max_age),
        readiness: acceptor.readiness.clone(),
    };
    if http2 {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            // Each stream may buffer a body up to --max-body-bytes; keep the product sane.
            .max_concurrent_streams(32)
            .serve_connection(io, service);
        drive(
            conn,
            |conn| conn.graceful_shutdown(),
            &state,
            &limits,
            true,
            shutdown,
        )
        .await;
    } else {
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .keep_alive(true)
            // One flat buffer per response: with vectored writes rustls would seal the head
            // and the body as separate TLS records (two encryptions, two syscalls).
            .writev(false)
            .serve_connection(io, service);
        drive(
            conn,
            |conn| conn.graceful_shutdown(),
            &state,
            &limits,
            false,
            shutdown,
        )
        .await;
    }
}

/// Runs a connection to completion, starting a graceful close on shutdown or when the
/// watchdog says so, and dropping it when a client stalls mid-request.
async fn drive<C>(
    conn: C,
    graceful: impl Fn(Pin<&mut C>),
    state: &ConnState,
    limits: &ConnLimits,
    http2: bool,
    mut shutdown: watch::Receiver<bool>,
) where
    C: Future<Output = Result<(), hyper::Error>>,
{
    let mut conn = pin!(conn);
    let mut closing: Option<Instant> = None;
    let mut tick = tokio::time::interval(limits.tick());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            _ = signalled(&mut shutdown), if closing.is_none() => {
                closing = Some(Instant::now());
                graceful(conn.as_mut());
            }
            _ = tick.tick() => {
                if closing.is_some_and(|since| since.elapsed() >= limits.close_grace) {
                    tracing::debug!("connection did not finish closing in time; dropping it");
                    return;
                }
                match state.verdict(limits, http2) {
                    Verdict::Keep => {}
                    Verdict::Graceful => {
                        if closing.is_none() {
                            closing = Some(Instant::now());
                            graceful(conn.as_mut());
                        }
                    }
                    Verdict::Drop => {
                        tracing::debug!("client stalled sending a request; closing");
                        return;
                    }
                }
            }
        }
    }
}
