//! Issue 38, class 4: the node agent's "does anyone else use it?" also counts the pods
//! bound to the node that have no process at the instant — bound but not started, between
//! two init containers, crash-looping — from its watch, resolved on a real node tree (a
//! temp directory standing in for the node's `/`, symlinks and all). Each test that
//! expects a refusal fails on the agent before it, which looked at processes only.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::config::Config;
use prestop_injector::node::pods::NodePods;
use prestop_injector::node_agent::others::Others;
use prestop_injector::reaper::in_use::Busy;
use serde_json::{json, Value};
use std::path::Path;

const DIR: &str = "/mnt/scratch/job";

struct Node {
    root: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
}

impl Node {
    fn new() -> Node {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join(&DIR[1..])).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Node { root, runtime }
    }

    fn link(&self, link: &str, target: &str) {
        let at = self.root.path().join(&link[1..]);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, at).unwrap();
    }

    /// The agent's question for DIR with `pods` bound to the node (the watch in sync).
    fn ask(&self, asker: &str, pods: Vec<Pod>) -> Result<(), Busy> {
        let watch = NodePods::new();
        watch.change(|picture| {
            picture.apply(Event::Init);
            for pod in pods {
                picture.apply(Event::InitApply(pod));
            }
            picture.apply(Event::InitDone);
        });
        self.others(watch).check(Some(asker), DIR)
    }

    fn others(&self, pods: NodePods) -> Others {
        Others {
            pods,
            own: Some("uid-agent".into()),
            node_root: self.root.path().to_path_buf(),
            config: Config {
                allowed_host_path_prefixes: vec!["/mnt/scratch".into()],
                ..Config::default()
            },
            client: None,
            runtime: self.runtime.handle().clone(),
            bound: Default::default(),
        }
    }
}

fn pod(name: &str, host_path: &str, status: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "batch", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "node-a", "restartPolicy": "OnFailure",
            "initContainers": [{"name": "stage", "image": "busybox",
                "volumeMounts": [{"name": "scratch", "mountPath": "/in"}]}],
            "containers": [{"name": "app", "image": "busybox",
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
            "volumes": [{"name": "scratch", "hostPath": {"path": host_path}}]},
        "status": status,
    }))
    .unwrap()
}

fn in_use(answer: Result<(), Busy>, who: &str) {
    match answer {
        Err(Busy::InUse(why)) => assert!(why.contains(who), "{why}"),
        other => panic!("expected in use by {who}, got {other:?}"),
    }
}

/// The asker: the ending pod whose cleanup asks about its own directory.
fn asker() -> Pod {
    pod("old", DIR, json!({"phase": "Running"}))
}

#[test]
fn a_replacement_pod_bound_but_not_started_keeps_the_directory() {
    let node = Node::new();
    let replacement = pod(
        "new",
        DIR,
        json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}),
    );
    in_use(node.ask("uid-old", vec![asker(), replacement]), "batch/new");
}

#[test]
fn a_pod_between_two_init_containers_keeps_the_directory() {
    let node = Node::new();
    let between = pod(
        "staging",
        DIR,
        json!({"phase": "Pending", "initContainerStatuses": [{"name": "stage", "image": "b",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0}}}]}),
    );
    in_use(node.ask("uid-old", vec![asker(), between]), "batch/staging");
}

#[test]
fn a_crash_looping_pod_keeps_the_directory_through_a_node_symlink() {
    let node = Node::new();
    node.link("/data/cache", DIR);
    let looping = pod(
        "cache",
        "/data/cache",
        json!({"phase": "Running", "containerStatuses": [{"name": "app", "image": "b",
            "imageID": "", "ready": false, "restartCount": 9,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
    );
    in_use(node.ask("uid-old", vec![asker(), looping]), "batch/cache");
}

/// The asking pod itself, the agent's own pod, an ended pod and a pod on another
/// directory keep nothing: the cleanup goes ahead.
#[test]
fn the_asker_the_agent_an_ended_pod_and_a_neighbour_do_not_keep_it() {
    let node = Node::new();
    std::fs::create_dir_all(node.root.path().join("mnt/scratch/other")).unwrap();
    let ended = pod(
        "evicted",
        DIR,
        json!({"phase": "Failed", "reason": "Evicted", "containerStatuses": [{"name": "app",
            "image": "b", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 137}}}]}),
    );
    let agent = pod("agent", "/mnt/scratch", json!({"phase": "Running"}));
    let neighbour = pod("other", "/mnt/scratch/other", json!({"phase": "Running"}));
    let agent = Pod {
        metadata: kube::api::ObjectMeta {
            uid: Some("uid-agent".into()),
            ..agent.metadata
        },
        ..agent
    };
    assert_eq!(
        node.ask("uid-old", vec![asker(), ended, agent, neighbour]),
        Ok(())
    );
    // Asked by a process in no pod (None), the pod "old" counts like any other.
    let watch = NodePods::new();
    watch.change(|p| {
        p.apply(Event::Init);
        p.apply(Event::InitApply(asker()));
        p.apply(Event::InitDone);
    });
    in_use(node.others(watch).check(None, DIR), "batch/old");
}

/// Until the watch has listed the node's pods, who is bound cannot be told: unknown,
/// never free.
#[test]
fn a_watch_not_in_sync_is_unknown_never_free() {
    let node = Node::new();
    let answer = node.others(NodePods::new()).check(Some("uid-old"), DIR);
    assert!(
        matches!(&answer, Err(Busy::Unknown(why)) if why.contains("not in sync")),
        "{answer:?}"
    );
    assert!(Path::new(&node.root.path().join(&DIR[1..])).is_dir());
}
