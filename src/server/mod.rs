//! The HTTPS admission server: a thin adapter over [`crate::admission::review`].
//!
//! Module map: [`router`] (endpoints and the error table), [`listener`] (accept loop,
//! TLS handshake, HTTP/1.1 and HTTP/2), [`connection`] (per-connection time limits and
//! maximum age), [`tls`] (reloading certificate), [`serve`] (start-up and the shutdown
//! sequence), [`metrics`], [`logging`], [`dev`] (`--dev` certificates), [`shutdown`]
//! (signals), [`duration`] (flag and `?timeout=` parsing), [`x509`] (certificate expiry),
//! [`version`] (the cluster's Kubernetes version, learned from the API server).

use crate::config::Config;
use crate::kube_version;
use crate::seal_keys::SealKeys;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

pub mod connection;
pub mod dev;
pub mod duration;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod router;
pub mod serve;
pub mod shutdown;
pub mod tls;
pub mod version;
pub mod x509;

pub use router::{probe_router, router, AppState};
pub use serve::{Server, Settings, TlsSource};
pub use version::VersionSource;

/// Flags of `prestop-injector serve`, boxed so the CLI's command enum stays small.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub flags: Box<ServeFlags>,
}

/// Every flag can also be set with the environment variable shown, e.g.
/// `PRESTOP_INJECTOR_LISTEN=0.0.0.0:9443`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Durations accept 30s, 5m, 1m30s, 200ms or a bare number of seconds.\n\n\
Try it locally:  prestop-injector serve --dev --config examples/config.yaml\n\
In a cluster:    prestop-injector serve --tls-cert /tls/tls.crt --tls-key /tls/tls.key"
)]
pub struct ServeFlags {
    /// Address of the HTTPS admission endpoints (/mutate, /mutate/auto, /validate)
    /// [default: 0.0.0.0:8443; 127.0.0.1:8443 with --dev].
    #[arg(long, env = "PRESTOP_INJECTOR_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Address of the plain-HTTP probe port (/healthz, /readyz, /metrics)
    /// [default: 0.0.0.0:8080; 127.0.0.1:8080 with --dev].
    #[arg(long, env = "PRESTOP_INJECTOR_PROBE_LISTEN")]
    pub probe_listen: Option<SocketAddr>,
    /// Serving certificate (PEM, leaf first). Reloaded when it changes, without restart.
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM). Reloaded together with --tls-cert.
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Generate a throwaway CA and serving certificate in memory (for trying it out);
    /// the CA is written to --dev-ca-file.
    #[arg(long, env = "PRESTOP_INJECTOR_DEV", conflicts_with_all = ["tls_cert", "tls_key"])]
    pub dev: bool,
    /// Where --dev writes its CA certificate [default: $TMPDIR/prestop-injector-dev-ca.pem].
    #[arg(long, env = "PRESTOP_INJECTOR_DEV_CA_FILE", value_name = "FILE")]
    pub dev_ca_file: Option<PathBuf>,
    /// Configuration file (YAML); defaults apply when absent.
    #[arg(long, env = "PRESTOP_INJECTOR_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The seal's keys (one a line, hex or base64, at least 32 bytes each; the first
    /// seals): the reaper empties only pods sealed with one of its keys. Without it
    /// nothing is sealed (docs/REAPER.md#the-seal).
    #[arg(long, env = "PRESTOP_INJECTOR_SEAL_KEY_FILE", value_name = "FILE")]
    pub seal_key_file: Option<PathBuf>,
    #[command(flatten)]
    pub log: logging::LogArgs,
    /// Close a connection after its current request once it is older than this, so the
    /// API server's keep-alive connections rebalance across replicas.
    #[arg(long, env = "PRESTOP_INJECTOR_MAX_CONNECTION_AGE", default_value = "5m", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub max_connection_age: Duration,
    /// Request bodies larger than this are refused with 413.
    #[arg(long, env = "PRESTOP_INJECTOR_MAX_BODY_BYTES", default_value_t = 16 << 20)]
    pub max_body_bytes: usize,
    /// At most this many open TLS connections; more wait in the listen backlog.
    #[arg(long, env = "PRESTOP_INJECTOR_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// Longest time for a TLS handshake, and for a request's headers once they start.
    #[arg(long, env = "PRESTOP_INJECTOR_HEADER_READ_TIMEOUT", default_value = "10s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub header_read_timeout: Duration,
    /// Close connections idle for this long (keep it above the client's idle timeout,
    /// 90s for the API server, so the client closes first).
    #[arg(long, env = "PRESTOP_INJECTOR_IDLE_TIMEOUT", default_value = "120s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub idle_timeout: Duration,
    /// Upper bound on handling one request; the API server's ?timeout= can only shorten it.
    #[arg(long, env = "PRESTOP_INJECTOR_REQUEST_TIMEOUT", default_value = "30s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub request_timeout: Duration,
    /// How often the certificate files are checked, besides file-change events.
    #[arg(long, env = "PRESTOP_INJECTOR_CERT_POLL_INTERVAL", default_value = "10s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub cert_poll_interval: Duration,
    /// After SIGTERM, keep serving (while /readyz says 503) for this long, so endpoints
    /// update before we stop accepting.
    #[arg(long, env = "PRESTOP_INJECTOR_SHUTDOWN_DELAY", default_value = "5s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub shutdown_delay: Duration,
    /// After the delay, wait at most this long for in-flight requests, then exit.
    #[arg(long, env = "PRESTOP_INJECTOR_DRAIN_TIMEOUT", default_value = "10s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub drain_timeout: Duration,
    /// How often the API server's version is asked again (at start too, unless the config
    /// sets kubernetesVersion), so an upgrade enables new features without a restart.
    #[arg(long, env = "PRESTOP_INJECTOR_KUBERNETES_VERSION_REFRESH", default_value = "10m", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub kubernetes_version_refresh: Duration,
    /// Runtime worker threads [default: the CPUs this process may use].
    #[arg(long, env = "PRESTOP_INJECTOR_WORKER_THREADS")]
    pub worker_threads: Option<usize>,
}

const NO_SEAL_KEY: &str = "no --seal-key-file: injected pods are not sealed, so the node \
    reaper empties none of their directories (docs/REAPER.md#the-seal)";

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let args = *args.flags;
    args.log.init()?;
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    match &args.seal_key_file {
        Some(path) => {
            config.seal = SealKeys::load(path)?;
            tracing::info!(keys = config.seal.len(), file = %path.display(), "sealing injected pods for the reaper with the first key");
        }
        // Said once; a --dev server serves no cluster's reaper, so there it is no warning.
        None if args.dev => tracing::info!("{NO_SEAL_KEY}"),
        None => tracing::warn!("{NO_SEAL_KEY}"),
    }
    for warning in config.warnings() {
        tracing::warn!(%warning, "configuration");
    }
    // Said once, first, where an operator looks: with no prefixes nothing is cleaned.
    if config.allowed_host_path_prefixes.is_empty() {
        tracing::warn!("{}", config.allow_list_summary());
    } else {
        tracing::info!("{}", config.allow_list_summary());
    }
    let (listen, probe_listen) = listen_addresses(&args);
    let source = tls_source(&args, listen)?;
    let kubernetes_version = match config.kubernetes_version {
        Some(version) => VersionSource::Fixed(version),
        // A developer's machine has no cluster to ask: say what is assumed, in one line,
        // instead of a warning about a missing kubeconfig.
        None if args.dev => VersionSource::Assumed(kube_version::OLDEST_SUPPORTED),
        None => VersionSource::Discover {
            refresh: args.kubernetes_version_refresh.max(Duration::from_secs(1)),
        },
    };
    let settings = Settings {
        listen,
        probe_listen,
        config,
        max_body_bytes: args.max_body_bytes,
        request_timeout: args.request_timeout,
        header_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        max_connection_age: args.max_connection_age,
        max_connections: args.max_connections,
        cert_poll_interval: args.cert_poll_interval.max(Duration::from_millis(10)),
        watch_cert_files: true,
        shutdown_delay: args.shutdown_delay,
        drain_timeout: args.drain_timeout,
        kubernetes_version,
    };
    let workers = args
        .worker_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // One core: a current-thread runtime skips the work-stealing machinery entirely.
    let runtime = if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    let code = runtime.block_on(async move {
        let server = Server::bind(settings, source).await?;
        tracing::info!(listen = %server.addr(), probe = %server.probe_addr(), workers, "serving admission reviews");
        let signal = shutdown::signal().await?;
        tracing::info!(signal, "shutting down: not ready, draining after the shutdown delay");
        if server.shutdown().await {
            tracing::info!("drained; exiting");
        } else {
            tracing::warn!("drain timeout reached; closing the remaining connections");
        }
        anyhow::Ok(ExitCode::SUCCESS)
    })?;
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(code)
}

/// The HTTPS and probe addresses: every interface in a cluster, loopback only with
/// `--dev` (a throwaway certificate is no reason to serve the network).
fn listen_addresses(args: &ServeFlags) -> (SocketAddr, SocketAddr) {
    let host = if args.dev {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::new(0, 0, 0, 0)) // every interface
    };
    (
        args.listen.unwrap_or(SocketAddr::new(host, 8443)),
        args.probe_listen.unwrap_or(SocketAddr::new(host, 8080)),
    )
}

fn tls_source(args: &ServeFlags, listen: SocketAddr) -> anyhow::Result<TlsSource> {
    if args.dev {
        let path = args
            .dev_ca_file
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join("prestop-injector-dev-ca.pem"));
        return dev::tls(&path, listen);
    }
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Ok(TlsSource::Files(tls::CertFiles {
            cert: cert.clone(),
            key: key.clone(),
        })),
        _ => anyhow::bail!(
            "no TLS certificate: pass --tls-cert and --tls-key (PEM files, e.g. from \
             `prestop-injector certs` or a cert-manager Secret), or --dev to generate a \
             throwaway one for local use"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: ServeFlags,
    }

    fn addresses(args: &[&str]) -> (String, String) {
        let cli = Cli::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
            .expect("flags parse");
        let (listen, probe) = listen_addresses(&cli.flags);
        (listen.to_string(), probe.to_string())
    }

    /// `--dev` serves a throwaway certificate: loopback only, unless told otherwise.
    #[test]
    fn dev_mode_listens_on_loopback_only() {
        // The environment may set the flags (PRESTOP_INJECTOR_LISTEN); these tests
        // are about the defaults.
        if std::env::var_os("PRESTOP_INJECTOR_LISTEN").is_some()
            || std::env::var_os("PRESTOP_INJECTOR_PROBE_LISTEN").is_some()
        {
            panic!(
                "unset PRESTOP_INJECTOR_LISTEN / PRESTOP_INJECTOR_PROBE_LISTEN to run this test"
            );
        }
        assert_eq!(
            addresses(&["--dev"]),
            ("127.0.0.1:8443".into(), "127.0.0.1:8080".into())
        );
        assert_eq!(
            addresses(&[]),
            ("0.0.0.0:8443".into(), "0.0.0.0:8080".into())
        );
        assert_eq!(
            addresses(&["--dev", "--listen", "0.0.0.0:9443"]),
            ("0.0.0.0:9443".into(), "127.0.0.1:8080".into())
        );
    }
}
