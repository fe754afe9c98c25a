//! `prestop-injector reap`: the node reaper (docs/REAPER.md).
//!
//! preStop hooks and the cleanup sidecar run only when the kubelet terminates a pod
//! gracefully. When a pod is force-deleted, garbage-collected for a lost node, or its
//! node crashes, its scratch files stay. One reaper per node watches the node's pods and,
//! once an injected pod is gone and nothing on the node uses its directory any more,
//! empties that directory with the cleaner program's fd-relative walk.
//!
//! Contract:
//! - Acts only on pods the webhook sealed ([`crate::mutation::seal`]) with a key of
//!   `--seal-key-file`, and refuses to start without one.
//! - Runs only with `allowedHostPathPrefixes` set, and never empties anything the webhook's
//!   rule ([`crate::mutation::targets::check_target`]) would refuse: targets are
//!   re-derived from the pod spec ([`derive`]), checked again with the config of the
//!   moment just before the walk, and must lie below a prefix mounted in the reaper.
//! - A directory is emptied only when the pods that recorded it are gone from the API, no
//!   pod on the node uses it, a directory above it or one below it, the watch is in sync
//!   and the delay has passed ([`ledger`]), and, just before the walk, no container on
//!   the node has it, or a directory on its line, mounted, and no pod bound to the node
//!   (running or not) reaches it through its hostPaths or its claims' volumes resolved on
//!   the node — by identity ([`users`], [`in_use`], [`on_node`], [`claims`], [`reach`]);
//!   the same check runs again during the walk, which stops when it fails. The directory
//!   itself is never removed.
//! - The walk has the rights of the gone pod's own user and no capability
//!   ([`user`], `prestop-clean empty`): a directory whose user is unknown, or that pods
//!   of different users recorded, is not emptied.
//! - Records survive restarts in an atomically written state file ([`state`]); at start
//!   the first complete list reconciles them.
//! - `--dry-run` reports instead of emptying. Every action is a log line, a metric and an
//!   Event on the Node ([`metrics`], [`events`]); the Events carry counts and reasons,
//!   never a path, file or pod name of a tenant (the log line names them).
//! - The walk uses bounded memory, and the state file names the directory under walk: a
//!   reaper that dies during one walk walks that directory last, and gives it up after
//!   [`state::MAX_WALK_ATTEMPTS`].
//!
//! Layers: [`expand`], [`derive`], [`ledger`] and [`reach`] are pure; [`node`] is the loop.

pub mod claims;
pub mod derive;
pub mod events;
pub mod expand;
pub use prestop_clean::in_use;
pub mod ledger;
pub mod metrics;
pub mod node;
pub mod on_node;
pub mod reach;
pub mod state;
pub mod user;
pub mod users;
pub mod views;

use crate::config::Config;
use crate::seal_keys::SealKeys;
use crate::server::{duration, logging, shutdown};
use anyhow::{bail, Context as _};
use axum::{extract::State, http::StatusCode, response::IntoResponse, routing::get, Router};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Flags of `prestop-injector reap`; each is also an environment variable.
#[derive(Debug, clap::Args)]
#[command(after_help = "Try it against a cluster (reports only):\n  \
prestop-injector reap --node-name NODE --config reaper-config.yaml \\\n    \
--seal-key-file seal.key --state-file /tmp/reaper-state.json --dry-run\n  \
(seal.key: the webhook's, from its Secret prestop-injector-seal)\n\n\
Durations accept 30s, 5m, 1m30s, 200ms or a bare number of seconds.")]
pub struct ReapArgs {
    /// The node whose pods are watched (in a DaemonSet: the downward API's spec.nodeName).
    #[arg(long, env = "PRESTOP_INJECTOR_NODE_NAME")]
    pub node_name: String,
    /// The reaper's own pod, which mounts the allowed prefixes but does not use them.
    #[arg(long, env = "PRESTOP_INJECTOR_POD_NAME", requires = "pod_namespace")]
    pub pod_name: Option<String>,
    #[arg(long, env = "PRESTOP_INJECTOR_POD_NAMESPACE", requires = "pod_name")]
    pub pod_namespace: Option<String>,
    /// The configuration file of the webhook (docs/CONFIG.md); allowedHostPathPrefixes must be set.
    #[arg(long, env = "PRESTOP_INJECTOR_CONFIG", value_name = "FILE")]
    pub config: PathBuf,
    /// The webhook's seal key file (docs/REAPER.md#the-seal): only pods sealed with one
    /// of its keys are emptied. Required: without it the reaper refuses to start.
    #[arg(long, env = "PRESTOP_INJECTOR_SEAL_KEY_FILE", value_name = "FILE")]
    pub seal_key_file: Option<PathBuf>,
    /// Where the node's filesystem is mounted in this container: host path P is
    /// HOST_ROOT/P (the DaemonSet mounts each allowed prefix below /host).
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_HOST_ROOT",
        default_value = "/",
        value_name = "DIR"
    )]
    pub host_root: PathBuf,
    /// The node's `/`, mounted read-only (HostToContainer) in this container: pods' host
    /// paths are resolved there, symlinks followed inside it, to tell who reaches a
    /// directory. Unusable: nothing is emptied (in_use_unknown).
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_NODE_ROOT",
        default_value = "/node",
        value_name = "DIR"
    )]
    pub node_root: PathBuf,
    /// A read-only mount of a directory above every allowed prefix (node-exporter's `/`,
    /// a `kubectl debug node/…` pod) keeps every directory below it, as any use does. By
    /// default it does not: a read-only view cannot write what the walk removes
    /// (docs/REAPER.md#when).
    #[arg(long, env = "PRESTOP_INJECTOR_KEEP_FOR_READ_ONLY_VIEWS")]
    pub keep_for_read_only_views: bool,
    /// The state file (written atomically), on the node, so records survive a restart.
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_STATE_FILE",
        default_value = "/var/lib/prestop-injector/reaper/state.json",
        value_name = "FILE"
    )]
    pub state_file: PathBuf,
    /// How long a directory must be free (its pods gone, no pod using it) before it is
    /// emptied, so a hook still running gets its chance.
    #[arg(long, env = "PRESTOP_INJECTOR_DELAY", default_value = "60s", value_name = "DURATION", value_parser = duration::parse_flag)]
    pub delay: Duration,
    /// The cleaner program, run for each walk as the gone pod's user (`prestop-clean
    /// empty`); by default `prestop-clean` beside this executable.
    #[arg(long, env = "PRESTOP_INJECTOR_CLEANER", value_name = "FILE")]
    pub cleaner: Option<PathBuf>,
    /// Only report (log, metric, Event) what would be emptied; touch nothing.
    #[arg(long, env = "PRESTOP_INJECTOR_DRY_RUN")]
    pub dry_run: bool,
    /// Plain-HTTP address of /metrics, /healthz and /readyz.
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_METRICS_LISTEN",
        default_value = "0.0.0.0:9102"
    )]
    pub metrics_listen: SocketAddr,
    /// Namespace of the Events about the Node (the kubelet uses `default`).
    #[arg(
        long,
        env = "PRESTOP_INJECTOR_EVENT_NAMESPACE",
        default_value = "default"
    )]
    pub event_namespace: String,
    #[command(flatten)]
    pub log: logging::LogArgs,
}

pub fn run(args: ReapArgs) -> anyhow::Result<ExitCode> {
    args.log.init()?;
    let mut config = Config::load(&args.config)?;
    check_setup(&args, &config)?;
    config.seal = seal_keys(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(reap(args, config))?;
    Ok(ExitCode::SUCCESS)
}

/// The keys that prove a pod was injected by the webhook. Without them the reaper could
/// empty nothing, so it does not start: a crash-looping DaemonSet with this sentence is
/// clearer than one that runs and refuses every pod.
fn seal_keys(args: &ReapArgs) -> anyhow::Result<SealKeys> {
    let Some(path) = &args.seal_key_file else {
        bail!(
            "the reaper needs --seal-key-file (the webhook's seal key Secret): it empties only \
             pods the webhook sealed, and without a key it could prove none"
        );
    };
    let keys = SealKeys::load(path)?;
    tracing::info!(keys = keys.len(), file = %path.display(), "accepting pods sealed with any of these keys");
    Ok(keys)
}

/// Refuses to start when the reaper could clean outside what the operator allowed.
fn check_setup(args: &ReapArgs, config: &Config) -> anyhow::Result<()> {
    if config.allowed_host_path_prefixes.is_empty() {
        bail!(
            "the reaper runs only with allowedHostPathPrefixes set in {}: it empties nothing \
             outside them",
            args.config.display()
        );
    }
    if args.node_name.is_empty() {
        bail!("--node-name is empty");
    }
    let root = args.host_root.to_str().unwrap_or("");
    if root != "/" && prestop_clean::check_target(root).is_err() {
        bail!("--host-root {root:?} is not an absolute, normalized path");
    }
    if let Err(why) = on_node::NodeRoot::open(&args.node_root) {
        tracing::warn!(node_root = %args.node_root.display(), "{why}; nothing is emptied (in_use_unknown)");
    }
    for prefix in &config.allowed_host_path_prefixes {
        let inside = args.host_root.join(prefix.trim_start_matches('/'));
        if !inside.is_dir() {
            tracing::warn!(prefix, path = %inside.display(), "an allowed prefix is not mounted in the reaper; nothing below it is emptied");
        }
    }
    let cleaner = args.cleaner.clone().unwrap_or_else(node::default_cleaner);
    if !args.dry_run && !cleaner.is_file() {
        tracing::warn!(cleaner = %cleaner.display(), "the cleaner program is missing; nothing is emptied until it is there (--cleaner)");
    }
    if let Some(dir) = args
        .state_file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the state directory {}", dir.display()))?;
    }
    Ok(())
}

async fn reap(args: ReapArgs, config: Config) -> anyhow::Result<()> {
    let loaded = state::load(&args.state_file, &args.node_name);
    for problem in &loaded.problems {
        tracing::warn!(state_file = %args.state_file.display(), "{problem}");
    }
    let mut ledger = ledger::Ledger::new(args.delay);
    let restored = loaded.records.len();
    ledger.restore(loaded.records);
    ledger.restore_dealt_with(loaded.dealt_with);
    let interrupted = loaded.walking;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server (in-cluster config or kubeconfig)")?;
    let (events, send_events) =
        events::Events::new(client.clone(), &args.event_namespace, &args.node_name);
    tokio::spawn(send_events);
    let metrics = Arc::new(metrics::Metrics::new());
    let own_pod = args.pod_namespace.clone().zip(args.pod_name.clone());
    let mut reaper = node::Reaper::new(
        config,
        args.node_name.clone(),
        own_pod,
        args.host_root.clone(),
        args.state_file.clone(),
        args.dry_run,
        ledger,
        metrics.clone(),
        events,
    );
    reaper.node_root = Some(args.node_root.clone());
    reaper.read_only_views_keep = args.keep_for_read_only_views;
    if let Some(cleaner) = &args.cleaner {
        reaper.cleaner = cleaner.clone();
    }
    reaper.restore_interrupted(interrupted);
    let probes = Probes {
        metrics,
        ready: reaper.ready.clone(),
    };
    let listener = tokio::net::TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| format!("binding --metrics-listen {}", args.metrics_listen))?;
    let metrics_addr = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, probe_router(probes)).await {
            tracing::error!(%error, "the metrics server stopped");
        }
    });
    tracing::info!(
        node = args.node_name,
        dry_run = args.dry_run,
        delay = ?args.delay,
        restored,
        metrics = %metrics_addr,
        host_root = %args.host_root.display(),
        node_root = %args.node_root.display(),
        cleaner = %reaper.cleaner.display(),
        "reaping the node's gone pods' scratch directories"
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut watch = tokio::spawn(reaper.run(client, stopped));
    tokio::select! {
        signal = shutdown::signal() => {
            tracing::info!(signal = signal?, "stopping: the state is saved");
            let _ = stop.send(true);
            watch.await?;
        }
        result = &mut watch => result?,
    }
    Ok(())
}

#[derive(Clone)]
struct Probes {
    metrics: Arc<metrics::Metrics>,
    ready: Arc<AtomicBool>,
}

fn probe_router(probes: Probes) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(probes)
}

async fn readyz(State(probes): State<Probes>) -> impl IntoResponse {
    if probes.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ok\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "waiting for the first list of the node's pods\n",
        )
    }
}

async fn metrics_text(State(probes): State<Probes>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        probes.metrics.encode(),
    )
}
