//! The reaper's decisions end to end in one process, on real directories: watch events
//! in (typed Pods, as `kube::runtime::watcher` yields them, made from the webhook's own
//! patch), the cleaner's walk out. The API server side (the watch itself, force deletes,
//! Events, a restarted API server) is `e2e/reaper/run.sh`; here the Events go to an
//! address that refuses them, which the reaper only logs.

mod core_support;

use core_support::{host_path_volume, job, mutate_with, scratch_container};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::config::Config;
use prestop_injector::mutation::Endpoint;
use prestop_injector::reaper::events::Events;
use prestop_injector::reaper::ledger::Ledger;
use prestop_injector::reaper::metrics::Metrics;
use prestop_injector::reaper::node::Reaper;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const PREFIX: &str = "/mnt/scratch";

struct Node {
    _dir: tempfile::TempDir,
    host: PathBuf,
    state: PathBuf,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        let host = dir.path().join("host");
        std::fs::create_dir_all(host.join(PREFIX.trim_start_matches('/'))).unwrap();
        let state = dir.path().join("state/state.json");
        std::fs::create_dir_all(state.parent().unwrap()).unwrap();
        Node {
            _dir: dir,
            host,
            state,
        }
    }

    /// `host_path` on the node, filled with files, a dot-file and a nested directory.
    fn scratch(&self, host_path: &str) -> PathBuf {
        let dir = self.on_host(host_path);
        std::fs::create_dir_all(dir.join("nested/deeper")).unwrap();
        for file in ["out.bin", ".hidden", "nested/deeper/x"] {
            std::fs::write(dir.join(file), b"scratch").unwrap();
        }
        dir
    }

    fn on_host(&self, host_path: &str) -> PathBuf {
        self.host.join(host_path.trim_start_matches('/'))
    }

    fn reaper(&self, config: Config, dry_run: bool) -> Reaper {
        // An address nothing listens on: Events fail and are logged, as with an API
        // server that is down.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let (events, send) = Events::new(client, "default", "node-a");
        tokio::spawn(send);
        let loaded = prestop_injector::reaper::state::load(&self.state, "node-a");
        let mut ledger = Ledger::new(Duration::ZERO);
        ledger.restore(loaded.records);
        Reaper::new(
            config,
            "node-a".into(),
            None,
            self.host.clone(),
            self.state.clone(),
            dry_run,
            ledger,
            Arc::new(Metrics::new()),
            events,
        )
    }
}

fn config() -> Config {
    Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]\n").unwrap()
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

/// A Pod made from the template of a Job the webhook injected, on node-a.
fn injected_pod(name: &str, host_path: &str) -> Pod {
    let job = job(
        json!({"prestop-injector.io/cleanup": "auto"}),
        scratch_container(),
        json!([host_path_volume("scratch", host_path)]),
    );
    let job = mutate_with(Endpoint::Mutate, &config(), job).patched;
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!("batch");
    pod["metadata"]["uid"] = json!(format!("uid-{name}"));
    pod["spec"]["nodeName"] = json!("node-a");
    serde_json::from_value(pod).unwrap()
}

/// A pod of someone else that mounts `host_path`, not injected.
fn other_pod(name: &str, host_path: &str) -> Pod {
    let pod: Value = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "other", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox",
                 "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                 "volumes": [host_path_volume("v", host_path)]}});
    serde_json::from_value(pod).unwrap()
}

fn listed(reaper: &mut Reaper, pods: &[&Pod]) {
    reaper.on_event(Event::Init);
    for pod in pods {
        reaper.on_event(Event::InitApply((*pod).clone()));
    }
    reaper.on_event(Event::InitDone);
}

fn metric(reaper: &Reaper, name: &str) -> f64 {
    let text = reaper.metrics.encode();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
}

#[tokio::test]
async fn a_gone_pods_directory_is_emptied_and_kept() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3, "the pod still exists");
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert!(dir.is_dir(), "the directory itself stays");
    assert_eq!(entries(&dir), 0);
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_directories_emptied_total"),
        1.0
    );
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_entries_removed_total"),
        5.0
    );
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_bytes_freed_total"),
        21.0
    );
    assert!(reaper.ledger.records().is_empty());
}

#[tokio::test]
async fn a_directory_in_use_above_or_below_waits_for_its_user() {
    for user_path in [
        "/mnt/scratch",
        "/mnt/scratch/job",
        "/mnt/scratch/job/nested",
    ] {
        let node = Node::new();
        let dir = node.scratch("/mnt/scratch/job");
        let pod = injected_pod("job-a", "/mnt/scratch/job");
        let user = other_pod("user", user_path);
        let mut reaper = node.reaper(config(), false);
        listed(&mut reaper, &[&pod, &user]);
        reaper.on_event(Event::Delete(pod));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 3, "{user_path} uses it");
        reaper.on_event(Event::Delete(user));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 0, "{user_path} is gone");
    }
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_is_refused_and_its_target_kept() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let canary = node.scratch("/srv/canary");
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    // After the pod is gone and before the walk: the app (or anyone with the node's disk)
    // replaces the directory with a symlink to something else.
    std::fs::remove_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&canary, &dir).unwrap();
    reaper.act_on_due().await;
    assert_eq!(entries(&canary), 3);
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_refusals_total{reason=\"cleaner_refused\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_directories_emptied_total"),
        0.0
    );
}

#[tokio::test]
async fn a_forged_state_file_reaches_only_what_the_rules_allow() {
    let node = Node::new();
    let etc = node.scratch("/etc");
    let db = node.scratch("/srv/db");
    let kubelet = node.scratch("/mnt/scratch/kubelet");
    let forged = json!({"version": 1, "node": "node-a", "directories": [
        {"path": "/etc", "pods": [{"uid": "u1", "namespace": "x", "name": "x"}]},
        {"path": "/srv/db", "pods": [{"uid": "u2", "namespace": "x", "name": "x"}]},
        {"path": "/mnt/scratch/kubelet", "pods": [{"uid": "u3", "namespace": "x", "name": "x"}]},
        {"path": "/mnt/scratch/../../etc", "pods": [{"uid": "u4", "namespace": "x", "name": "x"}]},
    ]});
    std::fs::write(&node.state, forged.to_string()).unwrap();
    // The operator protects a directory below the prefix after it was recorded.
    let config = Config::from_yaml(
        "allowedHostPathPrefixes: [/mnt/scratch]\nprotectedHostPaths: [/mnt/scratch/kubelet]\n",
    )
    .unwrap();
    let mut reaper = node.reaper(config, false);
    assert_eq!(
        reaper.ledger.records().len(),
        3,
        "the `..` entry is dropped at load"
    );
    listed(&mut reaper, &[]);
    reaper.act_on_due().await;
    for dir in [&etc, &db, &kubelet] {
        assert_eq!(entries(dir), 3, "{}", dir.display());
    }
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_refusals_total{reason=\"protected\"}"
        ),
        2.0
    );
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_refusals_total{reason=\"not_allowed\"}"
        ),
        1.0
    );
}

#[tokio::test]
async fn an_allowed_prefix_not_mounted_in_the_reaper_is_refused() {
    let node = Node::new();
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    std::fs::remove_dir_all(node.on_host(PREFIX)).unwrap();
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_refusals_total{reason=\"not_mounted\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_directories_already_empty_total"
        ),
        0.0
    );
}

#[tokio::test]
async fn dry_run_reports_and_touches_nothing() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    let mut reaper = node.reaper(config(), true);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_directories_would_empty_total"
        ),
        1.0
    );
}

#[tokio::test]
async fn a_restarted_reaper_empties_what_went_while_it_was_down() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let kept = node.scratch("/mnt/scratch/kept");
    let gone = injected_pod("job-a", "/mnt/scratch/job");
    let alive = injected_pod("job-b", "/mnt/scratch/kept");
    let mut first = node.reaper(config(), false);
    listed(&mut first, &[&gone, &alive]);
    first.save();
    drop(first);
    // While no reaper watches, job-a is force-deleted; job-b stays.
    let mut second = node.reaper(config(), false);
    assert_eq!(second.ledger.records().len(), 2);
    second.act_on_due().await;
    assert_eq!(entries(&dir), 3, "nothing before the first list");
    listed(&mut second, &[&alive]);
    second.act_on_due().await;
    assert_eq!(entries(&dir), 0);
    assert_eq!(entries(&kept), 3);
    second.save();
    let state: Value = serde_json::from_slice(&std::fs::read(&node.state).unwrap()).unwrap();
    assert_eq!(state["directories"].as_array().unwrap().len(), 1);
    assert_eq!(state["directories"][0]["path"], "/mnt/scratch/kept");
}

#[tokio::test]
async fn nothing_is_emptied_while_the_watch_is_lost() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.ledger.watch_lost();
    reaper.on_event(Event::Init);
    reaper.act_on_due().await;
    // The pod is not in the new list (it went while the watch was down), but the list
    // is not complete yet.
    assert_eq!(entries(&dir), 3);
    reaper.on_event(Event::InitDone);
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 0);
}
