//! Starting the server in-process: bind both listeners, load TLS, spawn the tasks, and
//! hand back the bound addresses and a way to shut down. `run` (the CLI) and the tests
//! both go through [`Server::bind`].

use super::connection::ConnLimits;
use super::listener::{accept_loop, Acceptor};
use super::metrics::Metrics;
use super::router::{probe_router, router, AppState, Readiness};
use super::shutdown::signalled;
use super::tls::{self, CertFiles, Reloader, Resolver};
use super::version::{self, VersionSource};
use crate::config::Config;
use anyhow::Context as _;
use arc_swap::ArcSwap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Everything `serve` can be told, with durations already parsed.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub probe_listen: SocketAddr,
    pub config: Config,
    pub max_body_bytes: usize,
    pub request_timeout: Duration,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connection_age: Duration,
    pub max_connections: usize,
    pub cert_poll_interval: Duration,
    /// Watch the certificate directories for events besides polling (off only in tests
    /// that prove polling alone suffices, e.g. on volumes without inotify).
    pub watch_cert_files: bool,
    pub shutdown_delay: Duration,
    pub drain_timeout: Duration,
    /// Where the cluster's Kubernetes version comes from (docs/KUBERNETES.md).
    pub kubernetes_version: VersionSource,
}

impl Default for Settings {
    /// Production defaults, but on loopback ephemeral ports (for tests and embedding).
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            probe_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            config: Config::default(),
            max_body_bytes: 16 << 20,
            request_timeout: Duration::from_secs(30),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connection_age: Duration::from_secs(300),
            max_connections: 1024,
            cert_poll_interval: Duration::from_secs(10),
            watch_cert_files: true,
            shutdown_delay: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(10),
            kubernetes_version: VersionSource::Config,
        }
    }
}

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, watched and reloaded.
    Files(CertFiles),
    /// Fixed PEM text (`--dev`).
    Pem { cert: String, key: String },
}

/// A running server. Dropping it stops accepting and closes connections gracefully
/// (without the shutdown delay); [`Server::shutdown`] is the full SIGTERM sequence.
pub struct Server {
    addr: SocketAddr,
    probe_addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: watch::Sender<bool>,
    shutdown_delay: Duration,
    drain_timeout: Duration,
}

impl Server {
    /// Binds both ports and starts serving; returns once ready.
    pub async fn bind(settings: Settings, source: TlsSource) -> anyhow::Result<Server> {
        let provider = tls::provider();
        let metrics = Arc::new(Metrics::new());
        // 0: nothing that deletes is injected (`serve` also says it in its start-up log).
        metrics.set_allowed_host_path_prefixes(settings.config.allowed_host_path_prefixes.len());
        metrics.set_seal_keys(settings.config.seal.len());
        let (loaded, reloader) = match &source {
            TlsSource::Files(files) => {
                let (loaded, cert, key) = tls::load(files, &provider)?;
                (loaded, Some((files.clone(), cert, key)))
            }
            TlsSource::Pem { cert, key } => (
                tls::parse_pair(cert.as_bytes(), key.as_bytes(), &provider)
                    .context("invalid TLS pair")?,
                None,
            ),
        };
        if let Some(expiry) = loaded.expiry {
            metrics.set_cert_expiry(expiry);
        }
        let resolver = Arc::new(Resolver::new(loaded.key));
        let server_config = tls::server_config(resolver.clone(), provider.clone())?;

        let listener = TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("cannot listen on {} (--listen)", settings.listen))?;
        let probe_listener = TcpListener::bind(settings.probe_listen)
            .await
            .with_context(|| {
                format!(
                    "cannot listen on {} (--probe-listen)",
                    settings.probe_listen
                )
            })?;
        let addr = listener.local_addr()?;
        let probe_addr = probe_listener.local_addr()?;

        let readiness = Arc::new(Readiness::default());
        let state = Arc::new(AppState {
            config: ArcSwap::from_pointee(settings.config),
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            max_body_bytes: settings.max_body_bytes,
            request_timeout: settings.request_timeout,
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        // Before accepting: the first reviews must already be decided for the right version.
        if let Some(refresh) =
            version::start(&state, settings.kubernetes_version, shutdown_rx.clone()).await
        {
            tokio::spawn(refresh);
        }

        if let Some((files, cert, key)) = reloader {
            tokio::spawn(
                Reloader {
                    files,
                    resolver,
                    metrics: metrics.clone(),
                    provider,
                    poll: settings.cert_poll_interval,
                    watch: settings.watch_cert_files,
                    seen: (cert, key),
                }
                .run(shutdown_rx.clone()),
            );
        }
        let acceptor = Arc::new(Acceptor {
            tls: tokio_rustls::TlsAcceptor::from(server_config),
            router: router(state.clone()),
            readiness: state.readiness.clone(),
            metrics,
            limits: ConnLimits {
                header_timeout: settings.header_timeout,
                idle_timeout: settings.idle_timeout,
                max_age: settings.max_connection_age,
                // Whatever is in flight gets the time a request may take anyway.
                close_grace: settings.request_timeout,
            },
            max_connections: settings.max_connections,
        });
        tokio::spawn(accept_loop(listener, acceptor, shutdown_rx.clone()));
        let mut probe_shutdown = shutdown_rx;
        let probe = axum::serve(probe_listener, probe_router(state.clone()))
            .with_graceful_shutdown(async move { signalled(&mut probe_shutdown).await });
        tokio::spawn(async move {
            if let Err(error) = probe.await {
                tracing::error!(%error, "probe server failed");
            }
        });
        readiness.set_tls_loaded();
        Ok(Server {
            addr,
            probe_addr,
            state,
            shutdown,
            shutdown_delay: settings.shutdown_delay,
            drain_timeout: settings.drain_timeout,
        })
    }

    /// The TLS (admission) address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The plain-HTTP probe address actually bound.
    pub fn probe_addr(&self) -> SocketAddr {
        self.probe_addr
    }

    pub fn state(&self) -> &Arc<AppState> {
        &self.state
    }

    /// The SIGTERM sequence: not ready at once; keep serving for the shutdown delay so
    /// the endpoints controller and the API server stop sending us traffic; then stop
    /// accepting, close idle connections and wait (bounded) for in-flight requests.
    /// Returns whether everything finished within the drain timeout.
    pub async fn shutdown(self) -> bool {
        self.state.readiness.set_shutting_down();
        tokio::time::sleep(self.shutdown_delay).await;
        let _ = self.shutdown.send(true);
        // Every connection task and the listeners hold a receiver; `closed` resolves when
        // the last one is gone.
        tokio::time::timeout(self.drain_timeout, self.shutdown.closed())
            .await
            .is_ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}
