//! Serving certificate: loaded from PEM files, swapped atomically when they change.
//!
//! Kubernetes updates a Secret volume by writing a new timestamped directory and renaming
//! the `..data` symlink over the old one, so the files' own inodes never change: we watch
//! the *directories* (inotify via `notify`) and also poll, and compare file contents
//! rather than trusting events. A new pair replaces the old only when it parses and the key
//! matches the certificate; handshakes in progress keep the `Arc` they already hold, so no
//! request fails during a rotation.

use super::metrics::Metrics;
use super::shutdown::signalled;
use super::x509;
use anyhow::Context as _;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Where the PEM files live.
#[derive(Debug, Clone)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A parsed, consistent certificate and key.
pub struct Loaded {
    pub key: Arc<CertifiedKey>,
    /// `notAfter` of the leaf certificate, unix seconds.
    pub expiry: Option<i64>,
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM chain (leaf first) and a PEM private key, and checks they belong together.
pub fn parse_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> anyhow::Result<Loaded> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("certificate file is not valid PEM")?;
    let leaf = chain
        .first()
        .context("certificate file holds no CERTIFICATE block")?;
    let expiry = x509::not_after(leaf);
    let key_der = PrivateKeyDer::from_pem_slice(key_pem)
        .context("key file holds no valid PEM private key")?;
    let signing_key = provider
        .key_provider
        .load_private_key(key_der)
        .context("private key is not usable (unsupported algorithm?)")?;
    let key = CertifiedKey::new(chain, signing_key);
    // `CertifiedKey::from_der` would let an "unknown" consistency pass; we insist.
    key.keys_match()
        .context("private key does not match the certificate's public key")?;
    Ok(Loaded {
        key: Arc::new(key),
        expiry,
    })
}

/// Reads and parses the files.
pub fn load(
    files: &CertFiles,
    provider: &CryptoProvider,
) -> anyhow::Result<(Loaded, Vec<u8>, Vec<u8>)> {
    let cert = std::fs::read(&files.cert)
        .with_context(|| format!("cannot read --tls-cert {}", files.cert.display()))?;
    let key = std::fs::read(&files.key)
        .with_context(|| format!("cannot read --tls-key {}", files.key.display()))?;
    let loaded = parse_pair(&cert, &key, provider).with_context(|| {
        format!(
            "invalid TLS pair {} / {}",
            files.cert.display(),
            files.key.display()
        )
    })?;
    Ok((loaded, cert, key))
}

/// The certificate handed to every handshake; replaced as a whole on reload.
#[derive(Debug)]
pub struct Resolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Resolver {
    pub fn new(key: Arc<CertifiedKey>) -> Resolver {
        Resolver {
            current: RwLock::new(key),
        }
    }

    pub fn current(&self) -> Arc<CertifiedKey> {
        // A poisoned lock still holds a complete Arc (the writer only assigns it).
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn replace(&self, key: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut guard) => *guard = key,
            Err(poisoned) => *poisoned.into_inner() = key,
        }
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// TLS 1.3 and 1.2, ALPN `h2` and `http/1.1`, certificate from `resolver`.
pub fn server_config(
    resolver: Arc<Resolver>,
    provider: Arc<CryptoProvider>,
) -> anyhow::Result<Arc<ServerConfig>> {
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Keeps `resolver` in step with `files` until the runtime stops.
pub struct Reloader {
    pub files: CertFiles,
    pub resolver: Arc<Resolver>,
    pub metrics: Arc<Metrics>,
    pub provider: Arc<CryptoProvider>,
    pub poll: Duration,
    /// Also react to file events (inotify); polling alone still catches every change.
    pub watch: bool,
    /// Contents last tried (good or bad), so a bad pair is reported once, not every poll.
    pub seen: (Vec<u8>, Vec<u8>),
}

/// Events arriving within this window are handled together: a non-atomic update writes
/// the certificate and the key separately, and half an update is a mismatched pair.
const DEBOUNCE: Duration = Duration::from_millis(50);

impl Reloader {
    /// Runs until the server shuts down.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let (tx, mut rx) = mpsc::unbounded_channel();
        // Kept alive for the life of the loop; dropping it stops the inotify watches.
        let watcher = if self.watch {
            watch_dirs(&self.files, tx)
        } else {
            None
        };
        let mut watching = watcher.is_some();
        let mut ticker = tokio::time::interval(self.poll);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            tokio::select! {
                event = rx.recv(), if watching => {
                    if event.is_none() {
                        watching = false;
                        continue;
                    }
                    tokio::time::sleep(DEBOUNCE).await;
                    while rx.try_recv().is_ok() {}
                }
                _ = ticker.tick() => {}
                _ = signalled(&mut shutdown) => return,
            }
            self.check();
        }
    }

    /// Reloads when the files' contents differ from what was last tried.
    fn check(&mut self) {
        let read = std::fs::read(&self.files.cert).and_then(|cert| {
            let key = std::fs::read(&self.files.key)?;
            Ok((cert, key))
        });
        let (cert, key) = match read {
            Ok(pair) => pair,
            // Mid-rotation a file can be briefly missing; the next event or poll retries.
            Err(error) => {
                tracing::debug!(%error, "cannot read TLS files; keeping the current certificate");
                return;
            }
        };
        if (&cert, &key) == (&self.seen.0, &self.seen.1) {
            return;
        }
        match parse_pair(&cert, &key, &self.provider) {
            Ok(loaded) => {
                self.resolver.replace(loaded.key);
                self.metrics.tls_reload(true);
                if let Some(expiry) = loaded.expiry {
                    self.metrics.set_cert_expiry(expiry);
                }
                tracing::info!(cert = %self.files.cert.display(), expiry = loaded.expiry, "loaded new TLS certificate");
            }
            Err(error) => {
                self.metrics.tls_reload(false);
                tracing::error!(cert = %self.files.cert.display(), key = %self.files.key.display(),
                    error = format!("{error:#}"), "ignoring changed TLS files; still serving the previous certificate");
            }
        }
        self.seen = (cert, key);
    }
}

fn watch_dirs(
    files: &CertFiles,
    tx: mpsc::UnboundedSender<()>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let mut watcher = match notify::recommended_watcher(move |_event| {
        let _ = tx.send(());
    }) {
        Ok(watcher) => watcher,
        Err(error) => {
            tracing::warn!(%error, "cannot watch TLS files; relying on polling");
            return None;
        }
    };
    let mut dirs: Vec<&Path> = [&files.cert, &files.key]
        .into_iter()
        .map(|path| {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
        })
        .collect();
    dirs.dedup();
    for dir in dirs {
        if let Err(error) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(%error, dir = %dir.display(), "cannot watch directory; relying on polling");
        }
    }
    Some(watcher)
}
