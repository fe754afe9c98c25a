//! Shared by the reaper's in-process tests: a node (a temporary directory standing for
//! the host's filesystem, and a state file), reapers on it, and pods as the watch yields
//! them, made from the webhook's own patch.
#![allow(dead_code)]

#[path = "../support/cleaner.rs"]
pub mod cleaner;
pub mod container;

use crate::core_support::{host_path_volume, job, scratch_container};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::admission::Operation;
use prestop_injector::config::Config;
use prestop_injector::mutation::{decide, Endpoint};
use prestop_injector::reaper::events::Events;
use prestop_injector::reaper::ledger::Ledger;
use prestop_injector::reaper::metrics::Metrics;
use prestop_injector::reaper::node::Reaper;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub const PREFIX: &str = "/mnt/scratch";

pub struct Node {
    /// Removed with the node (`None` for a node another process made: see [`Node::at`]).
    _dir: Option<tempfile::TempDir>,
    pub root: PathBuf,
    pub host: PathBuf,
    pub state: PathBuf,
    /// Where Events go: by default an address nothing listens on (they fail and are
    /// logged, as with an API server that is down).
    pub api: String,
}

impl Node {
    pub fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        // The walk runs as the pods' users, who must reach the directories.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut node = Node::at(dir.path());
        std::fs::create_dir_all(node.host.join(PREFIX.trim_start_matches('/'))).unwrap();
        std::fs::create_dir_all(node.state.parent().unwrap()).unwrap();
        node._dir = Some(dir);
        node
    }

    /// The node whose directory is `root` (made by [`Node::new`], maybe in another
    /// process); removed by whoever made it.
    pub fn at(root: &Path) -> Node {
        Node {
            _dir: None,
            root: root.to_path_buf(),
            host: root.join("host"),
            state: root.join("state/state.json"),
            api: "http://127.0.0.1:9".to_owned(),
        }
    }

    /// `host_path` on the node, filled with files, a dot-file and a nested directory.
    pub fn scratch(&self, host_path: &str) -> PathBuf {
        let dir = self.on_host(host_path);
        std::fs::create_dir_all(dir.join("nested/deeper")).unwrap();
        for file in ["out.bin", ".hidden", "nested/deeper/x"] {
            std::fs::write(dir.join(file), b"scratch").unwrap();
        }
        dir
    }

    pub fn on_host(&self, host_path: &str) -> PathBuf {
        self.host.join(host_path.trim_start_matches('/'))
    }

    /// A reaper as `reap` makes one at start: the state file loaded, an interrupted walk
    /// taken up.
    pub fn reaper(&self, config: Config, dry_run: bool) -> Reaper {
        let client = kube::Client::try_from(kube::Config::new(self.api.parse().unwrap())).unwrap();
        let (events, send) = Events::new(client, "default", "node-a");
        tokio::spawn(send);
        let loaded = prestop_injector::reaper::state::load(&self.state, "node-a");
        let mut ledger = Ledger::new(Duration::ZERO);
        ledger.restore(loaded.records);
        ledger.restore_dealt_with(loaded.dealt_with);
        let mut reaper = Reaper::new(
            config,
            "node-a".into(),
            None,
            self.host.clone(),
            self.state.clone(),
            dry_run,
            ledger,
            Arc::new(Metrics::new()),
            events,
        );
        // The node's `/` is the host tree, as `--host-root` is.
        reaper.node_root = Some(self.host.clone());
        reaper.cleaner = cleaner::program()
            .expect("the cleaner program (the reaper's walk runs it)")
            .to_path_buf();
        reaper.restore_interrupted(loaded.walking);
        reaper
    }
}

/// The webhook's and the reaper's config: the same seal key (docs/REAPER.md#the-seal).
pub fn config() -> Config {
    let mut config = Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]\n").unwrap();
    config.seal = prestop_injector::seal_keys::SealKeys::parse(&"5e".repeat(32)).unwrap();
    config
}

pub fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// A Pod made from the template of a Job the webhook injected, on node-a, running as
/// root (uid 0, gid 0: the reaper's walk runs as the pod's user, and the test trees are
/// root's).
pub fn injected_pod(name: &str, host_path: &str) -> Pod {
    injected_pod_with(name, host_path, json!({"runAsUser": 0, "runAsGroup": 0}))
}

/// [`injected_pod`] with `security_context` as its pod's securityContext.
pub fn injected_pod_with(name: &str, host_path: &str, security_context: Value) -> Pod {
    let mut job = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        scratch_container(),
        json!([host_path_volume("scratch", host_path)]),
    );
    job["spec"]["template"]["spec"]["securityContext"] = security_context;
    let job = injected_in("batch", job);
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!("batch");
    pod["metadata"]["uid"] = json!(format!("uid-{name}"));
    pod["spec"]["nodeName"] = json!("node-a");
    serde_json::from_value(pod).unwrap()
}

/// `object` created in `namespace`, with the webhook's patch applied (and checked to be
/// stable): the template is sealed for that namespace (docs/REAPER.md#the-seal).
pub fn injected_in(namespace: &str, object: Value) -> Value {
    let mut request = crate::core_support::request(Operation::Create, object.clone());
    request.namespace = Some(namespace.to_owned());
    let decision = decide(&request, Endpoint::Mutate, &config());
    let mut patched = object;
    if let Some(patch) = &decision.patch {
        json_patch::patch(&mut patched, &patch.to_json_patch()).unwrap();
    }
    request.object = Some(patched.clone().into());
    assert_eq!(decide(&request, Endpoint::Mutate, &config()).patch, None);
    patched
}

/// A pod of someone else that mounts `host_path`, not injected.
pub fn other_pod(name: &str, host_path: &str) -> Pod {
    let pod: Value = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "other", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox",
                 "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                 "volumes": [host_path_volume("v", host_path)]}});
    serde_json::from_value(pod).unwrap()
}

pub fn listed(reaper: &mut Reaper, pods: &[&Pod]) {
    reaper.on_event(Event::Init);
    for pod in pods {
        reaper.on_event(Event::InitApply((*pod).clone()));
    }
    reaper.on_event(Event::InitDone);
}

pub fn metric(reaper: &Reaper, name: &str) -> f64 {
    let text = reaper.metrics.encode();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
}

/// Serves `app`, an API server's stand-in for one test, on 127.0.0.1; its base URL.
pub async fn serve(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

/// A client of the API server stand-in `app` ([`serve`]).
pub async fn client_of(app: axum::Router) -> kube::Client {
    let url = serve(app).await.parse().unwrap();
    kube::Client::try_from(kube::Config::new(url)).unwrap()
}
