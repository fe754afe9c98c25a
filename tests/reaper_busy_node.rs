//! Issue 32, finding 2: the reaper on a busy batch node. The recommended layout
//! (`hostPath: /mnt/scratch/jobs` + `subPathExpr: $(POD_UID)`) made every sibling pod of
//! a Job, Completed ones included, a user of the parent `/mnt/scratch/jobs`, so a
//! force-deleted pod's directory waited for the last sibling: on a batch node, never.
//! A pod uses what its containers reach: each mount with its subPath expanded from the
//! pod.

mod core_support;
mod reaper_support;

use core_support::{host_path_volume, job, scratch_container};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use reaper_support::{config, entries, injected_in, listed, Node};
use serde_json::{json, Value};

const JOBS: &str = "/mnt/scratch/jobs";

/// The Job of the recommended layout, injected for `/scratch`, its pods as root.
fn uid_job() -> Value {
    let mut container = scratch_container();
    container["volumeMounts"][0]["subPathExpr"] = json!("$(POD_UID)");
    container["env"] =
        json!([{"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]);
    let mut job = job(
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        container,
        json!([host_path_volume("scratch", JOBS)]),
    );
    job["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 0, "runAsGroup": 0});
    injected_in("batch", job)
}

/// A pod of `job` on node-a, with uid `uid`, in `phase`.
fn pod_of(job: &Value, uid: &str, phase: &str) -> Pod {
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": template["metadata"].clone(), "spec": template["spec"].clone(),
        "status": {"phase": phase}});
    pod["metadata"]["name"] = json!(format!("job-worker-{uid}"));
    pod["metadata"]["namespace"] = json!("batch");
    pod["metadata"]["uid"] = json!(uid);
    pod["spec"]["nodeName"] = json!("node-a");
    serde_json::from_value(pod).unwrap()
}

#[tokio::test]
async fn sibling_pods_of_one_job_never_block_each_other() {
    let node = Node::new();
    let job = uid_job();
    // Not `Succeeded`: a pod that has ended (terminal, nothing running) is emptied at
    // once, deleted or not (issue 38, class 1).
    let pods: Vec<Pod> = [
        ("uid-a", "Running"),
        ("uid-b", "Pending"),
        ("uid-c", "Running"),
    ]
    .into_iter()
    .map(|(uid, phase)| pod_of(&job, uid, phase))
    .collect();
    let dirs: Vec<_> = ["uid-a", "uid-b", "uid-c"]
        .into_iter()
        .map(|uid| node.scratch(&format!("{JOBS}/{uid}")))
        .collect();
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &pods.iter().collect::<Vec<_>>());
    assert_eq!(
        reaper.ledger.records().len(),
        3,
        "each pod its own directory"
    );
    // Force-deleted one by one: each directory goes with its pod, the others stay.
    for (at, pod) in pods.iter().enumerate() {
        reaper.on_event(Event::Delete(pod.clone()));
        reaper.act_on_due().await;
        for (other, dir) in dirs.iter().enumerate() {
            let expected = if other <= at { 0 } else { 3 };
            assert_eq!(
                entries(dir),
                expected,
                "after pod {at} went: directory {other}"
            );
        }
    }
    assert!(reaper.ledger.records().is_empty());
}

#[tokio::test]
async fn a_sub_path_expr_it_cannot_expand_keeps_the_whole_volume() {
    let node = Node::new();
    let job = uid_job();
    let gone = pod_of(&job, "uid-a", "Running");
    node.scratch(&format!("{JOBS}/uid-a"));
    // Another tenant's pod whose subPathExpr comes from a ConfigMap: it may be anything
    // below /mnt/scratch/jobs, so it keeps every directory there (fail closed).
    let other: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "reader", "namespace": "other", "uid": "uid-reader"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox",
            "env": [{"name": "SLOT", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}],
            "volumeMounts": [{"name": "v", "mountPath": "/v", "subPathExpr": "$(SLOT)"}]}],
            "volumes": [host_path_volume("v", JOBS)]}}))
    .unwrap();
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&gone, &other]);
    reaper.on_event(Event::Delete(gone));
    reaper.act_on_due().await;
    assert_eq!(entries(&node.on_host(&format!("{JOBS}/uid-a"))), 3);
    reaper.on_event(Event::Delete(other));
    reaper.act_on_due().await;
    assert_eq!(entries(&node.on_host(&format!("{JOBS}/uid-a"))), 0);
}

/// node-exporter's `hostRootFsMount`: hostPath `/`, read-only. Not running (no process):
/// only its spec speaks.
fn node_exporter(read_only: bool) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "node-exporter", "namespace": "monitoring", "uid": "uid-ne"},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "node-exporter",
            "volumeMounts": [{"name": "root", "mountPath": "/host/root", "readOnly": read_only}]}],
            "volumes": [host_path_volume("root", "/")]},
        "status": {"phase": "Pending"}}))
    .unwrap()
}

/// One injected pod's directory, gone; `other` bound to the node. Whether it was emptied.
async fn emptied_beside(node: &Node, other: &Pod, keep: bool) -> bool {
    let job = uid_job();
    let gone = pod_of(&job, "uid-a", "Running");
    let dir = node.scratch(&format!("{JOBS}/uid-a"));
    let mut reaper = node.reaper(config(), false);
    reaper.read_only_views_keep = keep;
    listed(&mut reaper, &[&gone, other]);
    reaper.on_event(Event::Delete(gone));
    reaper.act_on_due().await;
    entries(&dir) == 0
}

#[tokio::test]
async fn a_read_only_view_of_the_whole_node_does_not_block_reaping() {
    assert!(emptied_beside(&Node::new(), &node_exporter(true), false).await);
    // The operator asked for it (--keep-for-read-only-views): kept.
    assert!(!emptied_beside(&Node::new(), &node_exporter(true), true).await);
    // A writable `/` reaches everything: kept.
    assert!(!emptied_beside(&Node::new(), &node_exporter(false), false).await);
}

#[tokio::test]
async fn a_running_read_only_view_of_the_whole_node_does_not_block_reaping() {
    use reaper_support::container::Container;
    // The container's /data is the node's whole tree (above the prefix), read-only.
    let node = Node::new();
    let Some(_viewer) = Container::start_read_only(&node.root, &node.host) else {
        return;
    };
    let nobody = pod_of(&uid_job(), "uid-z", "Succeeded");
    assert!(emptied_beside(&node, &nobody, false).await);
    assert!(!emptied_beside(&node, &nobody, true).await, "asked: kept");
    drop(_viewer);
    // A read-only view of the directory itself is not a view of the node: kept.
    let node = Node::new();
    let dir = node.scratch(&format!("{JOBS}/uid-a"));
    let Some(_reader) = Container::start_read_only(&node.root, &dir) else {
        return;
    };
    assert!(!emptied_beside(&node, &nobody, false).await);
    drop(_reader);
    // A writable view of the node: kept.
    let node = Node::new();
    let Some(_writer) = Container::start(&node.root, &node.host) else {
        return;
    };
    assert!(!emptied_beside(&node, &nobody, false).await);
}
