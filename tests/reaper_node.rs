//! The reaper's decisions end to end in one process, on real directories: watch events
//! in (typed Pods, as `kube::runtime::watcher` yields them, made from the webhook's own
//! patch), the cleaner's walk out. The API server side (the watch itself, force deletes,
//! Events, a restarted API server) is `e2e/reaper/run.sh`; here the Events go to an
//! address that refuses them, which the reaper only logs.

mod core_support;
mod reaper_support;

use kube::runtime::watcher::Event;
use prestop_injector::config::Config;
use reaper_support::{config, entries, injected_pod, listed, metric, other_pod, Node, PREFIX};
use serde_json::{json, Value};

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

/// Issue 38, class 8: the directory a `subPathExpr: $(POD_UID)` made for one pod is
/// removed itself once emptied; a fixed directory stays, emptied, as before. Before,
/// every per-pod directory stayed: an inode and a block per pod that ever ran.
#[tokio::test]
async fn class_8_a_per_pod_directory_is_removed_once_emptied() {
    const UID: &str = "0b6c1a2e-5f3d-4c8e-9a7b-1d2e3f4a5b6c";
    let node = Node::new();
    let own = node.scratch(&format!("/mnt/scratch/job-{UID}"));
    let fixed = node.scratch("/mnt/scratch/fixed");
    let mut pod = injected_pod("job-a", &format!("/mnt/scratch/job-{UID}"));
    pod.metadata.uid = Some(UID.to_owned());
    let fixed_pod = injected_pod("job-b", "/mnt/scratch/fixed");
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod, &fixed_pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.on_event(Event::Delete(fixed_pod));
    reaper.act_on_due().await;
    assert!(!own.exists(), "the pod's own directory is removed");
    assert!(fixed.is_dir(), "a fixed directory stays");
    assert_eq!(entries(&fixed), 0);
    assert!(node.on_host("/mnt/scratch").is_dir(), "the prefix stays");
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_per_pod_directories_removed_total"
        ),
        1.0
    );
}

/// Issue 38, class 8, the attack: a pod's own directory that another pod on the node
/// reaches through its parent is emptied only once that pod is gone, and a directory
/// named by the uid of a pod that did not record it alone is never removed.
#[tokio::test]
async fn class_8_a_per_pod_directory_someone_else_records_stays() {
    const UID: &str = "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6";
    let node = Node::new();
    let own = node.scratch(&format!("/mnt/scratch/{UID}"));
    // Two gone pods recorded the same directory: it is neither's own.
    let mut first = injected_pod("job-a", &format!("/mnt/scratch/{UID}"));
    first.metadata.uid = Some(UID.to_owned());
    let second = injected_pod("job-b", &format!("/mnt/scratch/{UID}"));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&first, &second]);
    reaper.on_event(Event::Delete(first));
    reaper.on_event(Event::Delete(second));
    reaper.act_on_due().await;
    assert!(own.is_dir(), "shared by two pods: emptied, kept");
    assert_eq!(entries(&own), 0);
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_per_pod_directories_removed_total"
        ),
        0.0
    );
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
    // Refused before any walk: a symlink where the directory was cannot be placed on the
    // node, and is never "not in use" (issue 32, finding 1); the walk would refuse it too.
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_refusals_total{reason=\"in_use_unknown\"}"
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

/// Set in the child of `crash_during_one_walk_does_not_starve_others`: the node's root.
const CRASH_NODE: &str = "PRESTOP_TEST_REAPER_CRASH_NODE";

/// Issue 17, class 9: a directory whose walk kills the reaper (out of memory, in the
/// issue) must not stop the others on every restart. Each run is a real process (this
/// test binary again) that restarts from the state file and lists no pods; its walk of
/// `a-poison` aborts the process. The next run walks `a-poison` last, so the others are
/// emptied; after three walks that never finished it is given up and left as it is.
#[tokio::test]
async fn crash_during_one_walk_does_not_starve_others() {
    if let Some(root) = std::env::var_os(CRASH_NODE) {
        let node = Node::at(std::path::Path::new(&root));
        let mut reaper = node.reaper(config(), false);
        reaper.walk_started = |path| {
            if path.ends_with("/a-poison") {
                std::process::abort();
            }
        };
        listed(&mut reaper, &[]);
        reaper.act_on_due().await;
        reaper.save();
        return;
    }
    let node = Node::new();
    let names = ["a-poison", "b", "c"];
    let dirs: Vec<_> = names
        .iter()
        .map(|name| node.scratch(&format!("{PREFIX}/{name}")))
        .collect();
    let pods: Vec<_> = names
        .iter()
        .map(|name| injected_pod(name, &format!("{PREFIX}/{name}")))
        .collect();
    let mut first = node.reaper(config(), false);
    listed(&mut first, &pods.iter().collect::<Vec<_>>());
    first.save();
    drop(first);
    // The pods are gone (force-deleted) before each run below starts.
    let run = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash_during_one_walk_does_not_starve_others",
                "--test-threads=1",
            ])
            .env(CRASH_NODE, &node.root)
            .output()
            .unwrap()
    };
    let state =
        || -> Value { serde_json::from_slice(&std::fs::read(&node.state).unwrap()).unwrap() };
    // Run 1: `a-poison` comes first (in order) and its walk kills the reaper.
    let crashed = run();
    assert!(!crashed.status.success(), "the walk of a-poison aborts");
    assert_eq!(
        state()["walking"],
        json!({"path": "/mnt/scratch/a-poison", "attempts": 1})
    );
    assert_eq!(entries(&dirs[1]), 3, "b was not reached");
    // Run 2: the directory that killed the last one goes last; the others are emptied.
    assert!(!run().status.success());
    assert_eq!(entries(&dirs[1]), 0, "b is not starved");
    assert_eq!(entries(&dirs[2]), 0, "c is not starved");
    assert_eq!(state()["walking"]["attempts"], 2);
    assert_eq!(
        state()["directories"][0]["path"],
        "/mnt/scratch/a-poison",
        "b and c are no longer recorded"
    );
    assert_eq!(state()["directories"].as_array().unwrap().len(), 1);
    // Run 3 crashes once more; run 4 gives it up: it is forgotten and left as it is.
    assert!(!run().status.success());
    let last = run();
    assert!(
        last.status.success(),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );
    assert_eq!(state()["directories"], json!([]));
    assert!(state().get("walking").is_none());
    assert_eq!(entries(&dirs[0]), 3);
}
