//! Issue 26, item 3: "in use" means any pod bound to the node that reaches the directory,
//! running or not. A pod that is crash-looping (in back-off), pending or finished has no
//! process, so no mountinfo; when it reaches the recorded directory through a symlink on
//! the node, a subPath symlink or a hostPath/local PersistentVolume, no spelling shows it.
//! The reaper resolves every known pod's host paths in the node's root (symlinks followed
//! inside it, as the kubelet's mount follows them) and compares identities.
//!
//! The node is a real directory tree (the test's "node root"); symlinks, resolution and
//! the `..` climb are real syscalls. The PersistentVolumes come over HTTP from a small
//! server answering the API server's paths with the objects it holds, read by the real
//! kube client (the real API server: e2e/reaper/scenarios.sh).

mod core_support;
mod reaper_support;

use axum::body::Body;
use axum::extract::{Path as UrlPath, Query};
use axum::{http::StatusCode, routing::get, Router};
use core_support::host_path_volume;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::reaper::in_use::Busy;
use prestop_injector::reaper::ledger::{KnownPod, PodRef};
use prestop_injector::reaper::node::Reaper;
use prestop_injector::reaper::users;
use reaper_support::{config, entries, injected_pod, listed, metric, Node};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIR: &str = "/mnt/scratch/job";

/// The phases a pod without a process can be in, as its status says them (the reaper
/// reads the spec only: every phase counts).
fn crash_looping() -> Value {
    json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": false,
        "restartCount": 7, "image": "busybox", "imageID": "",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]})
}

fn pending() -> Value {
    json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]})
}

fn finished() -> Value {
    json!({"phase": "Succeeded"})
}

fn finished_but_running() -> Value {
    json!({"phase": "Succeeded", "containerStatuses": [{"name": "c", "ready": true,
        "restartCount": 0, "image": "busybox", "imageID": "", "state": {"running": {}}}]})
}

/// A pod bound to node-a, not injected, with `volume` mounted at /v (`mount` adds to the
/// mount: a subPath, a subPathExpr).
fn bound_pod(name: &str, status: Value, volume: Value, mount: Value) -> Pod {
    let mut volume_mount = json!({"name": volume["name"].clone(), "mountPath": "/v"});
    for (key, value) in mount.as_object().into_iter().flatten() {
        volume_mount[key] = value.clone();
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "other", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "node-a", "restartPolicy": "Always",
                 "containers": [{"name": "c", "image": "busybox", "volumeMounts": [volume_mount]}],
                 "volumes": [volume]},
        "status": status});
    serde_json::from_value(pod).unwrap()
}

fn host_path_pod(name: &str, status: Value, host_path: &str) -> Pod {
    bound_pod(name, status, host_path_volume("v", host_path), json!({}))
}

fn claim_pod(name: &str, claim: &str) -> Pod {
    let volume = json!({"name": "v", "persistentVolumeClaim": {"claimName": claim}});
    bound_pod(name, pending(), volume, json!({}))
}

/// Makes `link` (a host path) a symlink to `target` on the node.
fn link(node: &Node, link: &str, target: &str) {
    let at = node.on_host(link);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    symlink(target, at).unwrap();
}

/// job-a recorded DIR and is gone; `users` are bound to the node, no process runs. One
/// round: the reaper, and DIR on the node.
async fn one_round(node: &Node, users: &[&Pod], api: Option<kube::Client>) -> (Reaper, PathBuf) {
    let dir = node.scratch(DIR);
    let job = injected_pod("job-a", DIR);
    let mut reaper = node.reaper(config(), false);
    reaper.api = api;
    let mut pods = vec![&job];
    pods.extend_from_slice(users);
    listed(&mut reaper, &pods);
    reaper.on_event(Event::Delete(job));
    reaper.act_on_due().await;
    (reaper, dir)
}

fn refusals(reaper: &Reaper, reason: &str) -> f64 {
    metric(
        reaper,
        &format!("prestop_injector_reaper_refusals_total{{reason=\"{reason}\"}}"),
    )
}

/// Kept because a pod reaches it; emptied once that pod is gone (the rule is the pod,
/// not the tree).
async fn kept_until_the_pod_goes(node: &Node, user: Pod, api: Option<kube::Client>) {
    let (mut reaper, dir) = one_round(node, &[&user], api).await;
    assert_eq!(
        entries(&dir),
        3,
        "{} reaches it",
        user.metadata.name.as_deref().unwrap()
    );
    assert_eq!(refusals(&reaper, "in_use"), 1.0);
    assert_eq!(reaper.ledger.records().len(), 1, "it stays recorded");
    reaper.on_event(Event::Delete(user));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 0, "emptied once the pod is gone");
    assert!(reaper.ledger.records().is_empty());
}

#[tokio::test]
async fn crash_looping_pod_through_a_node_symlink_keeps_the_directory() {
    let node = Node::new();
    link(&node, "/data/cache", DIR);
    let user = host_path_pod("web", crash_looping(), "/data/cache");
    kept_until_the_pod_goes(&node, user, None).await;
}

#[tokio::test]
async fn pending_pod_keeps_the_directory() {
    let node = Node::new();
    // A relative symlink above it: /srv/jobs -> ../mnt/scratch.
    link(&node, "/srv/jobs", "../mnt/scratch");
    let user = host_path_pod("queued", pending(), "/srv/jobs/job");
    kept_until_the_pod_goes(&node, user, None).await;
}

#[tokio::test]
async fn finished_pod_that_may_still_run_keeps_the_directory() {
    let node = Node::new();
    // A chain of two symlinks.
    link(&node, "/data/alias", DIR);
    link(&node, "/data/done", "/data/alias");
    // `Succeeded` written while a container still runs (a kubelet before 1.24).
    let user = host_path_pod("done", finished_but_running(), "/data/done");
    kept_until_the_pod_goes(&node, user, None).await;
}

/// Issue 38, class 1: a pod that has ended (terminal, nothing running) starts nothing
/// again, so it reaches nothing, whatever its spec says. Before, it kept the directory for
/// as long as its object stayed: for ever, for a Job's failed pod.
#[tokio::test]
async fn an_ended_pod_no_longer_keeps_the_directory() {
    let node = Node::new();
    link(&node, "/data/alias", DIR);
    link(&node, "/data/done", "/data/alias");
    let user = host_path_pod("done", finished(), "/data/done");
    let (reaper, dir) = one_round(&node, &[&user], None).await;
    assert_eq!(
        entries(&dir),
        0,
        "emptied while the ended pod is still listed"
    );
    assert!(reaper.ledger.records().is_empty());
}

#[tokio::test]
async fn subpath_symlink_reaching_the_directory_keeps_it() {
    let node = Node::new();
    // hostPath /mnt/scratch/other with subPath tmp/keep, where tmp/keep -> ../../job:
    // spelled /mnt/scratch/other/tmp/keep, off the line of /mnt/scratch/job.
    std::fs::create_dir_all(node.on_host("/mnt/scratch/other")).unwrap();
    link(&node, "/mnt/scratch/other/tmp/keep", "../../job");
    let user = bound_pod(
        "sub",
        pending(),
        host_path_volume("v", "/mnt/scratch/other"),
        json!({"subPath": "tmp/keep"}),
    );
    kept_until_the_pod_goes(&node, user, None).await;
}

#[tokio::test]
async fn open_subpath_expr_keeps_what_is_below_its_known_part() {
    let node = Node::new();
    // /data/all -> /mnt/scratch, with a subPathExpr the pod cannot say for certain (a
    // ConfigMap's value): any directory below /mnt/scratch, so this one too.
    link(&node, "/data/all", "/mnt/scratch");
    let mut user = bound_pod(
        "expr",
        crash_looping(),
        host_path_volume("v", "/data/all"),
        json!({"subPathExpr": "$(SLOT)"}),
    );
    let spec = user.spec.as_mut().unwrap();
    spec.containers[0].env_from = Some(vec![serde_json::from_value(
        json!({"configMapRef": {"name": "slots"}}),
    )
    .unwrap()]);
    kept_until_the_pod_goes(&node, user, None).await;
}

#[tokio::test]
async fn pod_above_the_directory_keeps_it() {
    let node = Node::new();
    link(&node, "/data/up", "/mnt/scratch");
    let user = host_path_pod("up", pending(), "/data/up");
    kept_until_the_pod_goes(&node, user, None).await;
}

#[tokio::test]
async fn pod_below_the_directory_keeps_it() {
    let node = Node::new();
    link(&node, "/data/down", "/mnt/scratch/job/nested");
    let user = host_path_pod("down", crash_looping(), "/data/down");
    kept_until_the_pod_goes(&node, user, None).await;
}

#[tokio::test]
async fn absolute_symlink_resolves_in_the_node_root_not_the_reapers() {
    let node = Node::new();
    // On the node, /data/cache -> /mnt/scratch/job: the node's directory.
    link(&node, "/data/cache", DIR);
    // /data/here -> the directory as this process sees it (a temp path): on the node,
    // that path does not exist, so it reaches nothing there.
    let here = node.on_host(DIR);
    link(&node, "/data/here", here.to_str().unwrap());
    let node_user = host_path_pod("node-view", pending(), "/data/cache");
    let reaper_user = host_path_pod("reaper-view", pending(), "/data/here");
    let (mut reaper, dir) = one_round(&node, &[&node_user, &reaper_user], None).await;
    assert_eq!(entries(&dir), 3, "/data/cache is the directory on the node");
    assert_eq!(refusals(&reaper, "in_use"), 1.0);
    reaper.on_event(Event::Delete(node_user));
    reaper.act_on_due().await;
    assert_eq!(
        entries(&dir),
        0,
        "/data/here resolves in the node's root, where {} does not exist",
        here.display()
    );
}

#[tokio::test]
async fn a_pod_whose_symlink_points_elsewhere_does_not_keep_it() {
    let node = Node::new();
    let other = node.scratch("/mnt/scratch/job2");
    // A sibling whose name starts the same, and a child of the sibling.
    link(&node, "/data/sibling", "/mnt/scratch/job2");
    link(&node, "/data/cousin", "/mnt/scratch/job2/nested");
    let sibling = host_path_pod("sibling", crash_looping(), "/data/sibling");
    let cousin = host_path_pod("cousin", pending(), "/data/cousin");
    let (reaper, dir) = one_round(&node, &[&sibling, &cousin], None).await;
    assert_eq!(entries(&dir), 0, "job2 is not on the line of job");
    assert_eq!(entries(&other), 3);
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_directories_emptied_total"),
        1.0
    );
}

#[tokio::test]
async fn a_missing_host_path_does_not_keep_it() {
    let node = Node::new();
    // The kubelet would make a new directory there: not the recorded one.
    let user = host_path_pod("later", pending(), "/data/not-yet");
    // A dangling symlink reaches nothing either.
    link(&node, "/data/dangling", "/mnt/scratch/gone");
    let dangling = host_path_pod("dangling", pending(), "/data/dangling");
    let (_reaper, dir) = one_round(&node, &[&user, &dangling], None).await;
    assert_eq!(entries(&dir), 0);
}

#[tokio::test]
async fn unresolvable_use_is_unknown() {
    let node = Node::new();
    // A symlink loop: the kubelet cannot mount it, and where it leads cannot be known.
    link(&node, "/data/loop", "/data/loop2");
    link(&node, "/data/loop2", "/data/loop");
    let user = host_path_pod("looping", crash_looping(), "/data/loop");
    let (reaper, dir) = one_round(&node, &[&user], None).await;
    assert_eq!(entries(&dir), 3, "unknown: nothing is emptied");
    assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
    assert_eq!(reaper.ledger.records().len(), 1, "it stays recorded");
    // The sentence names the pod and the path on the node.
    let verdict = check_now(&node, &reaper);
    let why = match &verdict {
        Err(Busy::Unknown(why)) => why,
        other => panic!("{other:?}"),
    };
    assert!(why.contains("other/looping"), "{why}");
    assert!(why.contains("/data/loop"), "{why}");
    assert!(
        why.contains(&node.on_host("/data/loop").display().to_string()),
        "{why}"
    );
}

#[tokio::test]
async fn without_a_node_root_nothing_is_emptied() {
    let node = Node::new();
    let dir = node.scratch(DIR);
    let job = injected_pod("job-a", DIR);
    for root in [None, Some(node.root.join("no-such-root"))] {
        let mut reaper = node.reaper(config(), false);
        reaper.node_root = root.clone();
        listed(&mut reaper, &[&job]);
        reaper.on_event(Event::Delete(job.clone()));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 3, "node root {root:?}");
        assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
    }
}

#[tokio::test]
async fn a_directory_that_is_not_the_nodes_is_unknown() {
    // The node root shows another tree than the one the walk would empty (a mount
    // swapped under the reaper): the same spelling, another directory. Refused.
    let node = Node::new();
    let elsewhere = Node::new();
    elsewhere.scratch(DIR);
    let dir = node.scratch(DIR);
    let job = injected_pod("job-a", DIR);
    let mut reaper = node.reaper(config(), false);
    reaper.node_root = Some(elsewhere.host.clone());
    listed(&mut reaper, &[&job]);
    reaper.on_event(Event::Delete(job));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
}

/// One round as the reaper runs it, over the pods it knows now.
fn check_now(node: &Node, reaper: &Reaper) -> Result<(), Busy> {
    let pods: Vec<KnownPod> = reaper.ledger.known_pods().cloned().collect();
    users::pods_on_the_node(
        Some(&node.host),
        &pods,
        &[],
        &node.on_host(DIR),
        DIR,
        &prefixes(),
    )
}

// --- PersistentVolumes, over HTTP as from the API server ------------------------------

/// An API server holding `objects` (request path → object); a path in `forbidden`
/// answers 403 as RBAC does, any other 404. The node's pods are none, and a watch of
/// them stays open without an event: each walk lists and watches them (issue 32).
async fn api_server(objects: Vec<(String, Value)>, forbidden: Vec<String>) -> kube::Client {
    let objects: Arc<HashMap<String, Value>> = Arc::new(objects.into_iter().collect());
    let forbidden = Arc::new(forbidden);
    let pods = get(|Query(query): Query<HashMap<String, String>>| async move {
        let json = [("content-type", "application/json")];
        if query.get("watch").map(String::as_str) == Some("true") {
            let never = futures_util::stream::pending::<Result<Vec<u8>, std::io::Error>>();
            (json, Body::from_stream(never))
        } else {
            let list = json!({"kind": "PodList", "apiVersion": "v1",
                              "metadata": {"resourceVersion": "1"}, "items": []});
            (json, Body::from(list.to_string()))
        }
    });
    let app = Router::new().route("/api/v1/pods", pods).route(
        "/{*path}",
        get(move |UrlPath(path): UrlPath<String>| {
            let (objects, forbidden) = (objects.clone(), forbidden.clone());
            async move {
                let path = format!("/{path}");
                let (code, reason, body) = if forbidden.contains(&path) {
                    (StatusCode::FORBIDDEN, "Forbidden", None)
                } else {
                    match objects.get(&path) {
                        Some(object) => (StatusCode::OK, "", Some(object.clone())),
                        None => (StatusCode::NOT_FOUND, "NotFound", None),
                    }
                };
                let body = body.unwrap_or_else(|| {
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": format!("{path}: {reason}"), "reason": reason,
                           "code": code.as_u16()})
                });
                (
                    code,
                    [("content-type", "application/json")],
                    body.to_string(),
                )
            }
        }),
    );
    reaper_support::client_of(app).await
}

fn claim(name: &str, volume: Option<&str>) -> (String, Value) {
    let mut spec =
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
    if let Some(volume) = volume {
        spec["volumeName"] = json!(volume);
    }
    (
        format!("/api/v1/namespaces/other/persistentvolumeclaims/{name}"),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": name, "namespace": "other"}, "spec": spec,
               "status": {"phase": if volume.is_some() { "Bound" } else { "Pending" }}}),
    )
}

fn volume(name: &str, source: Value) -> (String, Value) {
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain"});
    for (key, value) in source.as_object().unwrap() {
        spec[key] = value.clone();
    }
    (
        format!("/api/v1/persistentvolumes/{name}"),
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
               "spec": spec}),
    )
}

#[tokio::test]
async fn hostpath_pv_keeps_the_directory() {
    let node = Node::new();
    let api = api_server(
        vec![
            claim("data", Some("pv-scratch")),
            volume("pv-scratch", json!({"hostPath": {"path": DIR, "type": ""}})),
        ],
        vec![],
    )
    .await;
    kept_until_the_pod_goes(&node, claim_pod("db", "data"), Some(api)).await;
}

#[tokio::test]
async fn local_pv_keeps_the_directory() {
    let node = Node::new();
    // A local PV on a disk directory that is a symlink above it on the node.
    link(&node, "/mnt/disks/ssd1", "/mnt/scratch");
    let affinity = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-a"]}]}]}});
    let api = api_server(
        vec![
            claim("fast", Some("local-pv-1")),
            volume(
                "local-pv-1",
                json!({"local": {"path": "/mnt/disks/ssd1"}, "nodeAffinity": affinity}),
            ),
        ],
        vec![],
    )
    .await;
    kept_until_the_pod_goes(&node, claim_pod("cache", "fast"), Some(api)).await;
}

#[tokio::test]
async fn unreadable_pv_is_unknown() {
    let node = Node::new();
    let api = api_server(
        vec![claim("data", Some("pv-hidden"))],
        vec!["/api/v1/persistentvolumes/pv-hidden".to_owned()],
    )
    .await;
    let user = claim_pod("db", "data");
    let (mut reaper, dir) = one_round(&node, &[&user], Some(api)).await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
    reaper.on_event(Event::Delete(user));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 0, "emptied once the pod is gone");
}

#[tokio::test]
async fn unreadable_claim_is_unknown() {
    let node = Node::new();
    let api = api_server(
        vec![],
        vec!["/api/v1/namespaces/other/persistentvolumeclaims/data".to_owned()],
    )
    .await;
    let (reaper, dir) = one_round(&node, &[&claim_pod("db", "data")], Some(api)).await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
}

#[tokio::test]
async fn unbound_claim_and_other_volumes_do_not_keep_it() {
    let node = Node::new();
    let api = api_server(
        vec![
            claim("waiting", None),
            claim("nfs", Some("pv-nfs")),
            volume(
                "pv-nfs",
                json!({"nfs": {"server": "nfs.example", "path": DIR}}),
            ),
            claim("elsewhere", Some("pv-other")),
            volume(
                "pv-other",
                json!({"hostPath": {"path": "/mnt/scratch/job2"}}),
            ),
        ],
        vec![],
    )
    .await;
    let pods = [
        claim_pod("a", "waiting"),
        claim_pod("b", "nfs"),
        claim_pod("c", "elsewhere"),
        claim_pod("d", "not-created-yet"),
    ];
    let users: Vec<&Pod> = pods.iter().collect();
    let (_reaper, dir) = one_round(&node, &users, Some(api)).await;
    assert_eq!(entries(&dir), 0);
}

#[tokio::test]
async fn a_pod_with_a_claim_and_no_api_client_is_unknown() {
    let node = Node::new();
    let (reaper, dir) = one_round(&node, &[&claim_pod("db", "data")], None).await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
}

// --- Cost ------------------------------------------------------------------------------

/// One round for 300 pods (each with its own directory below a symlinked prefix, plus a
/// shared one) must stay cheap enough to repeat every ~100 ms during a walk. The figure
/// is printed (docs/REAPER.md quotes it); the bound is loose for a busy machine.
#[tokio::test]
async fn a_round_of_300_pods_is_cheap() {
    let node = Node::new();
    node.scratch(DIR);
    link(&node, "/data/jobs", "/mnt/scratch");
    let mut pods = Vec::new();
    for i in 0..300 {
        std::fs::create_dir_all(node.on_host(&format!("/mnt/scratch/p{i}/work"))).unwrap();
        let uses = vec![
            exact(&format!("/data/jobs/p{i}/work")),
            exact(&format!("/mnt/scratch/p{i}")),
            exact("/data/shared-config"),
        ];
        pods.push(KnownPod {
            pod: PodRef {
                uid: format!("u{i}"),
                namespace: "batch".into(),
                name: format!("p{i}"),
                user: Default::default(),
            },
            uses,
            claims: Vec::new(),
            ended: false,
        });
    }
    let location = node.on_host(DIR);
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        let verdict =
            users::pods_on_the_node(Some(&node.host), &pods, &[], &location, DIR, &prefixes());
        best = best.min(started.elapsed());
        assert_eq!(verdict, Ok(()));
    }
    eprintln!("one round, 300 pods × 3 uses (601 distinct paths): {best:?}");
    assert!(best < Duration::from_millis(100), "{best:?}");
}

fn exact(path: &str) -> prestop_injector::mutation::targets::HostPath {
    prestop_injector::mutation::targets::HostPath {
        known: path.to_owned(),
        open: None,
    }
}

fn known(name: &str, paths: &[&str]) -> KnownPod {
    KnownPod {
        pod: PodRef {
            uid: format!("uid-{name}"),
            namespace: "other".into(),
            name: name.into(),
            user: Default::default(),
        },
        uses: paths.iter().map(|p| exact(p)).collect(),
        claims: Vec::new(),
        ended: false,
    }
}

/// One round over `pods` for DIR on `node`.
fn round(node: &Node, pods: &[KnownPod]) -> Result<(), Busy> {
    users::pods_on_the_node(
        Some(&node.host),
        pods,
        &[],
        &node.on_host(DIR),
        DIR,
        &prefixes(),
    )
}

#[test]
fn a_symlink_retargeted_between_rounds_is_seen_in_the_next() {
    // Nothing is cached across rounds: a pod's symlink that pointed elsewhere and now
    // points at the directory (an app rewriting it between two checks) keeps it.
    let node = Node::new();
    node.scratch(DIR);
    node.scratch("/mnt/scratch/job2");
    link(&node, "/data/x", "/mnt/scratch/job2");
    let pods = [known("swapper", &["/data/x"])];
    assert_eq!(round(&node, &pods), Ok(()));
    std::fs::remove_file(node.on_host("/data/x")).unwrap();
    link(&node, "/data/x", DIR);
    match round(&node, &pods) {
        Err(Busy::InUse(why)) => assert!(why.contains("other/swapper"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// Set in the child of the test below (a mount namespace of its own).
const MOUNTS_CHILD: &str = "PRESTOP_TEST_REAPER_REACH_MOUNTS";

/// Real mounts on the node, in a mount namespace of the test's own (`unshare -m`): the
/// directory on a filesystem of its own (a tmpfs at /mnt/scratch), reached through a
/// bind mount of it (the same identity under another name), from below through a bind of
/// its child, and from above through a symlink to a directory of the root filesystem, the
/// `..` climb crossing the mount. A bind of a sibling does not keep it.
#[test]
fn bind_mounts_and_other_filesystems_are_compared_by_identity() {
    if std::env::var_os(MOUNTS_CHILD).is_some() {
        mounts_child();
        println!("mounts-child-passed");
        return;
    }
    let unshare = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file());
    let usable = unshare.is_some_and(|u| {
        std::process::Command::new(u)
            .args(["-m", "true"])
            .status()
            .is_ok_and(|s| s.success())
    });
    if !usable {
        let why = "unshare -m (as root) is needed";
        if std::env::var("PRESTOP_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("required (PRESTOP_REQUIRE_TOOLS=1): {why}");
        }
        eprintln!("note: skipped: {why}");
        return;
    }
    let output = std::process::Command::new(unshare.unwrap())
        .args(["-m", "--propagation", "private"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bind_mounts_and_other_filesystems_are_compared_by_identity",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MOUNTS_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("mounts-child-passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn mounts_child() {
    let mount = |args: &[&std::ffi::OsStr]| {
        let status = std::process::Command::new("mount")
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "mount {args:?}");
    };
    let node = Node::new();
    let scratch = node.on_host("/mnt/scratch");
    mount(&[
        "-t".as_ref(),
        "tmpfs".as_ref(),
        "scratch".as_ref(),
        scratch.as_os_str(),
    ]);
    node.scratch(DIR);
    node.scratch("/mnt/scratch/job2");
    for (alias, of) in [
        ("/srv/alias", DIR),
        ("/srv/child", "/mnt/scratch/job/nested"),
        ("/srv/sibling", "/mnt/scratch/job2"),
    ] {
        let at = node.on_host(alias);
        std::fs::create_dir_all(&at).unwrap();
        mount(&[
            "--bind".as_ref(),
            node.on_host(of).as_os_str(),
            at.as_os_str(),
        ]);
    }
    link(&node, "/data/up", "/mnt");
    let verdict = |paths: &[&str]| round(&node, &[known("user", paths)]);
    for (paths, relation) in [
        (&["/srv/alias"][..], "the directory itself"),
        (&["/srv/child"][..], "a directory below it"),
        (&["/srv/alias/nested/deeper"][..], "a directory below it"),
        (&["/data/up"][..], "a directory above it"),
        (&["/"][..], "a directory above it"),
    ] {
        match verdict(paths) {
            Err(Busy::InUse(why)) => assert!(why.contains(relation), "{paths:?}: {why}"),
            other => panic!("{paths:?}: {other:?}"),
        }
    }
    assert_eq!(verdict(&["/srv/sibling", "/srv/sibling/nested"]), Ok(()));
    assert_eq!(verdict(&["/mnt/scratch/job2"]), Ok(()));
}

#[test]
fn dotdot_symlinks_stay_in_the_node_root() {
    // `..` past the node's root stays at the node's root (RESOLVE_IN_ROOT), as `/..` is
    // `/` on the node: this symlink is the node's /mnt/scratch/job, whatever the depth of
    // the node root in the reaper.
    let node = Node::new();
    node.scratch(DIR);
    link(
        &node,
        "/data/deep/esc",
        "../../../../../../../../mnt/scratch/job",
    );
    match round(&node, &[known("climber", &["/data/deep/esc"])]) {
        Err(Busy::InUse(why)) => assert!(why.contains("the directory itself"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_use_inside_the_directory_keeps_it_and_a_symlink_to_a_file_is_unknown() {
    let node = Node::new();
    node.scratch(DIR);
    // hostPath type File (a socket, a config file) inside it: below it.
    match round(&node, &[known("file", &["/mnt/scratch/job/out.bin"])]) {
        Err(Busy::InUse(why)) => assert!(why.contains("a directory below it"), "{why}"),
        other => panic!("{other:?}"),
    }
    // A file elsewhere is off its line.
    std::fs::write(node.on_host("/mnt/scratch/other.bin"), b"x").unwrap();
    assert_eq!(
        round(&node, &[known("file", &["/mnt/scratch/other.bin"])]),
        Ok(())
    );
    // A symlink to a file cannot be placed without trusting its spelling: unknown.
    link(&node, "/data/f", "/mnt/scratch/job/out.bin");
    match round(&node, &[known("link-to-file", &["/data/f"])]) {
        Err(Busy::Unknown(why)) => {
            assert!(
                why.contains("other/link-to-file") && why.contains("/data/f"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
}

/// The reaper's allowed prefixes, as `config()` has them.
fn prefixes() -> Vec<String> {
    config().allowed_host_path_prefixes
}

/// A walk's looks resolve the pods its own watch saw bound to the node since it began;
/// while that watch is out of sync (its list failed, or started again after an error: an
/// API server that went away), a pod bound meanwhile would be missing, so every look is
/// unknown and the walk stops. Before, the looks went on with the pods seen so far.
#[tokio::test]
async fn a_look_while_the_walks_watch_is_out_of_sync_is_unknown() {
    use std::sync::atomic::Ordering;
    let node = Node::new();
    let location = node.scratch(DIR);
    let (repeat, arrived) = walk_looks(&node, Vec::new()).await;
    assert_eq!(repeat.check(&location, DIR), Ok(()));
    arrived.in_sync.store(false, Ordering::SeqCst);
    match repeat.check(&location, DIR) {
        Err(Busy::Unknown(why)) => assert!(why.contains("out of sync"), "{why}"),
        other => panic!("{other:?}"),
    }
    arrived.in_sync.store(true, Ordering::SeqCst);
    assert_eq!(repeat.check(&location, DIR), Ok(()));
}

/// A pod known when the walk began is taken, at every look, as the walk's watch saw it
/// last: an ephemeral container added during the walk (`kubectl debug`) that mounts the
/// directory makes the pod a user before its process runs. Before, the pod's version of
/// the walk's start was kept, and only a running process would have been seen.
#[tokio::test]
async fn a_pod_that_comes_to_use_the_directory_during_the_walk_keeps_it() {
    use prestop_injector::mutation::targets::HostPath;
    let node = Node::new();
    let location = node.scratch(DIR);
    let debugged = |uses: &[&str]| KnownPod {
        pod: PodRef {
            uid: "uid-debugged".to_owned(),
            namespace: "other".to_owned(),
            name: "debugged".to_owned(),
            user: Default::default(),
        },
        uses: uses
            .iter()
            .map(|path| HostPath {
                known: (*path).to_owned(),
                open: None,
            })
            .collect(),
        claims: Vec::new(),
        ended: false,
    };
    node.on_host("/mnt/scratch/other");
    let (repeat, arrived) = walk_looks(&node, vec![debugged(&["/mnt/scratch/other"])]).await;
    assert_eq!(repeat.check(&location, DIR), Ok(()));
    arrived
        .pods
        .lock()
        .unwrap()
        .push(debugged(&["/mnt/scratch/other", DIR]));
    match repeat.check(&location, DIR) {
        Err(Busy::InUse(why)) => assert!(why.contains("debugged"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// The looks of a walk that began knowing `pods`, and what its own watch has seen (in
/// sync, nothing yet), for the test to change.
async fn walk_looks(
    node: &Node,
    pods: Vec<KnownPod>,
) -> (
    prestop_injector::reaper::users::Repeat,
    prestop_injector::reaper::users::Arrived,
) {
    use prestop_injector::reaper::users::{Arrived, Check};
    let check = Check {
        node_root: Some(node.host.clone()),
        client: None,
        pods,
        prefixes: prefixes(),
        read_only_views_keep: false,
    };
    let arrived = Arrived {
        pods: Default::default(),
        in_sync: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
    };
    (
        check.for_walk().await.with_arrivals(arrived.clone()),
        arrived,
    )
}
