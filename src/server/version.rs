//! Which Kubernetes version the mutations are decided for (docs/KUBERNETES.md).
//!
//! `kubernetesVersion` in the config wins. Otherwise `serve` asks the API server's
//! `/version` (the `kube` client with the in-cluster config, or the kubeconfig outside a
//! cluster) before it reports ready, and again every `--kubernetes-version-refresh`, so an
//! upgrade to 1.29 enables sidecar mode without a restart. Until a first answer, or when
//! there never is one, it behaves as on the oldest supported release (fail closed: no
//! sidecar mode, no sleep action), says so in a log line and in
//! `prestop_injector_kubernetes_version_known 0`. A failed refresh keeps the last
//! answer: a flaky API server must not switch features off and on.
//!
//! The version is swapped into [`AppState::config`] as a whole new `Config`, so a request
//! reads one consistent config without a lock.

use super::router::AppState;
use crate::config::Config;
use crate::kube_version::{self, KubeVersion};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Where the version comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSource {
    /// Leave the config as it is, no log, no metric (tests and embedding).
    Config,
    /// `kubernetesVersion` from the config file.
    Fixed(KubeVersion),
    /// `serve --dev` without `kubernetesVersion`: no cluster is asked.
    Assumed(KubeVersion),
    /// Ask the API server, at start and every `refresh`.
    Discover { refresh: Duration },
}

/// Longest wait for one `/version` answer; at start, readiness waits this long at most.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Sets the version before the server reports ready; returns the refresh task to spawn,
/// if any.
pub async fn start(
    state: &Arc<AppState>,
    source: VersionSource,
    shutdown: watch::Receiver<bool>,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    match source {
        VersionSource::Config => None,
        VersionSource::Fixed(version) => {
            set(state, version, true);
            tracing::info!(kubernetes_version = %version, "Kubernetes version from kubernetesVersion in the config; {}", features(version));
            None
        }
        VersionSource::Assumed(version) => {
            set(state, version, false);
            tracing::info!("--dev: assuming Kubernetes {version} (set kubernetesVersion in --config to change it)");
            None
        }
        VersionSource::Discover { refresh } => {
            Some(discover(state.clone(), refresh, shutdown, ask).await)
        }
    }
}

/// The first answer (awaited), then a task that asks again every `refresh`.
async fn discover<F, A>(
    state: Arc<AppState>,
    refresh: Duration,
    mut shutdown: watch::Receiver<bool>,
    ask: A,
) -> impl std::future::Future<Output = ()> + Send + 'static
where
    A: Fn() -> F + Send + 'static,
    F: std::future::Future<Output = anyhow::Result<KubeVersion>> + Send,
{
    let mut known = ask_and_set(&state, None, ask()).await;
    async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(refresh) => {}
                _ = super::shutdown::signalled(&mut shutdown) => return,
            }
            known = ask_and_set(&state, known, ask()).await.or(known);
        }
    }
}

/// Asks once; sets and logs what it learned, or, with nothing known yet, the oldest
/// supported release. Returns the version learned.
async fn ask_and_set(
    state: &AppState,
    known: Option<KubeVersion>,
    answer: impl std::future::Future<Output = anyhow::Result<KubeVersion>>,
) -> Option<KubeVersion> {
    match tokio::time::timeout(ASK_TIMEOUT, answer).await {
        Ok(Ok(version)) => {
            if known != Some(version) {
                set(state, version, true);
                match known {
                    None => {
                        tracing::info!(kubernetes_version = %version, "Kubernetes version learned from the API server; {}", features(version))
                    }
                    Some(before) => {
                        tracing::info!(kubernetes_version = %version, previous = %before, "the API server's Kubernetes version changed; {}", features(version))
                    }
                }
            }
            Some(version)
        }
        failed => {
            let error = match failed {
                Ok(Err(error)) => format!("{error:#}"),
                _ => format!("no answer within {ASK_TIMEOUT:?}"),
            };
            match known {
                Some(version) => {
                    tracing::warn!(%error, kubernetes_version = %version, "cannot refresh the Kubernetes version; keeping the last one learned")
                }
                None => {
                    let oldest = kube_version::OLDEST_SUPPORTED;
                    set(state, oldest, false);
                    tracing::warn!(%error, assumed = %oldest, "cannot learn the Kubernetes version from the API server; behaving as on {oldest}, the oldest supported: sidecar mode refused, no sleep action (set kubernetesVersion in the config to override)");
                }
            }
            None
        }
    }
}

async fn ask() -> anyhow::Result<KubeVersion> {
    let config = kube::Config::infer().await?;
    let client = kube::Client::try_from(config)?;
    let info = client.apiserver_version().await?;
    KubeVersion::from_version_info(&info.major, &info.minor, &info.git_version).ok_or_else(|| {
        anyhow::anyhow!(
            "the API server reports no usable version (major {:?}, minor {:?}, gitVersion {:?})",
            info.major,
            info.minor,
            info.git_version
        )
    })
}

/// Swaps in a config that differs only in the version.
pub fn set(state: &AppState, version: KubeVersion, known: bool) {
    let current = state.config.load_full();
    if current.kubernetes_version != Some(version) {
        state.config.store(Arc::new(Config {
            kubernetes_version: Some(version),
            ..(*current).clone()
        }));
    }
    state.metrics.set_kubernetes_version(version.minor, known);
}

/// What a version rules out, for the log line.
fn features(version: KubeVersion) -> String {
    let mut off = Vec::new();
    if !version.has(kube_version::NATIVE_SIDECARS) {
        off.push(format!(
            "sidecar mode off (needs {})",
            kube_version::NATIVE_SIDECARS
        ));
    }
    if !version.has(kube_version::SLEEP_ACTION) {
        off.push(format!(
            "no preStop sleep action (needs {})",
            kube_version::SLEEP_ACTION
        ));
    }
    if off.is_empty() {
        "every feature available".to_owned()
    } else {
        off.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn state() -> Arc<AppState> {
        Arc::new(AppState::new(Config::default()))
    }

    fn metric(state: &AppState, name: &str) -> String {
        let text = state.metrics.encode();
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{name} ")).map(str::to_owned))
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn the_config_file_wins_and_counts_as_known() {
        let state = state();
        let (_tx, rx) = watch::channel(false);
        let task = start(&state, VersionSource::Fixed(KubeVersion::new(1, 29)), rx).await;
        assert!(task.is_none());
        assert_eq!(
            state.config.load().kubernetes_version,
            Some(KubeVersion::new(1, 29))
        );
        assert_eq!(
            metric(&state, "prestop_injector_kubernetes_version_known"),
            "1"
        );
        assert_eq!(
            metric(&state, "prestop_injector_kubernetes_minor_version"),
            "29"
        );
    }

    #[tokio::test]
    async fn unreachable_means_the_oldest_until_an_answer_then_refreshes() {
        let state = state();
        let (tx, rx) = watch::channel(false);
        // Each ask takes the next answer the test sends; `calls` counts the asks started.
        let (answers, queue) = tokio::sync::mpsc::unbounded_channel::<Option<KubeVersion>>();
        let queue = Arc::new(tokio::sync::Mutex::new(queue));
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let ask = move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let queue = queue.clone();
            async move {
                match queue.lock().await.recv().await.flatten() {
                    Some(version) => Ok(version),
                    None => anyhow::bail!("connection refused"),
                }
            }
        };
        answers.send(None).unwrap();
        let refresh = Duration::from_millis(1);
        let task = tokio::spawn(discover(state.clone(), refresh, rx, ask).await);
        let version = || state.config.load().kubernetes_version;
        assert_eq!(version(), Some(kube_version::OLDEST_SUPPORTED));
        assert_eq!(
            metric(&state, "prestop_injector_kubernetes_version_known"),
            "0"
        );
        // Sends one answer and waits (with a deadline) until the next ask has started,
        // which is after the answer was applied.
        let answer = |value: Option<KubeVersion>| {
            let (answers, calls) = (answers.clone(), calls.clone());
            async move {
                let next = calls.load(Ordering::SeqCst) + 1;
                answers.send(value).unwrap();
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                while calls.load(Ordering::SeqCst) < next {
                    assert!(tokio::time::Instant::now() < deadline, "no ask {next}");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        };
        answer(Some(KubeVersion::new(1, 28))).await;
        assert_eq!(version(), Some(KubeVersion::new(1, 28)));
        assert_eq!(
            metric(&state, "prestop_injector_kubernetes_version_known"),
            "1"
        );
        answer(None).await;
        assert_eq!(
            version(),
            Some(KubeVersion::new(1, 28)),
            "a failed refresh keeps it"
        );
        assert_eq!(
            metric(&state, "prestop_injector_kubernetes_version_known"),
            "1"
        );
        answer(Some(KubeVersion::new(1, 29))).await;
        assert_eq!(
            version(),
            Some(KubeVersion::new(1, 29)),
            "an upgrade is picked up"
        );
        assert_eq!(
            metric(&state, "prestop_injector_kubernetes_minor_version"),
            "29"
        );
        // The ask in flight fails once no answer can come; then the task sees shutdown.
        drop(answers);
        tx.send(true).unwrap();
        task.await.unwrap();
    }
}
