//! Issue 17, class 11: Events outside the tenant's namespace (on the Node, in
//! `default`) carry counts and reasons only — no file name from the tenant's directory,
//! no path inside it (nor the directory, which a `subPathExpr: $(POD_NAME)` makes the
//! pod's name), no pod name or uid. The Events are sent over HTTP, as to the API server,
//! to a small server that keeps their bodies.

mod core_support;
mod reaper_support;

use axum::{body::Bytes, http::StatusCode, Router};
use core_support::{host_path_volume, job, scratch_container};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::reaper::node::node_message;
use reaper_support::{config, injected_pod, injected_pod_with, listed, Node};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a tenant's pod leaves: its name, uid, namespace and file names.
const SECRETS: [&str; 6] = [
    "job-secret-x7k2p",
    "uid-job-secret",
    "customer-ledger",
    "payroll",
    "/mnt/scratch",
    "batch",
];

/// An API server that answers every request with its body, and keeps the bodies (with
/// the request's path as `requestPath`).
async fn api_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let store = kept.clone();
    let app = Router::new().fallback(move |uri: axum::http::Uri, body: Bytes| {
        let store = store.clone();
        async move {
            let mut value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            value["requestPath"] = json!(uri.path());
            store.lock().unwrap().push(value);
            (
                StatusCode::CREATED,
                [("content-type", "application/json")],
                body,
            )
        }
    });
    (reaper_support::serve(app).await, kept)
}

/// An injected pod whose cleanup target the reaper refuses (its subPathExpr comes from
/// a ConfigMap: the directory cannot be known).
fn refused_pod() -> Pod {
    let mut container = scratch_container();
    container["volumeMounts"][0]["subPathExpr"] = json!("slot-$(SLOT)");
    container["envFrom"] = json!([{"configMapRef": {"name": "slots"}}]);
    let job = job(
        json!({"prestop-injector.io/cleanup": "/scratch"}),
        container,
        json!([host_path_volume("scratch", "/mnt/scratch/payroll")]),
    );
    let job = reaper_support::injected_in("batch", job);
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"].clone(), "spec": template["spec"].clone()});
    pod["metadata"]["name"] = json!("job-secret-x7k2p-refused");
    pod["metadata"]["namespace"] = json!("batch");
    pod["metadata"]["uid"] = json!("uid-job-secret-refused");
    pod["spec"]["nodeName"] = json!("node-a");
    serde_json::from_value(pod).unwrap()
}

fn assert_counts_only(message: &str) {
    for secret in SECRETS {
        assert!(
            !message.contains(secret),
            "{secret:?} in the Node Event {message:?}"
        );
    }
}

#[tokio::test]
async fn events_outside_the_tenant_namespace_carry_counts_only() {
    let (api, kept) = api_server().await;
    let mut node = Node::new();
    node.api = api;
    let host_path = "/mnt/scratch/job-secret-x7k2p";
    let dir = node.scratch(host_path);
    std::fs::write(dir.join("customer-ledger.csv"), b"1,2,3").unwrap();
    let pod = injected_pod("job-secret-x7k2p", host_path);
    // Two passes: --dry-run reports, then a real reaper empties.
    for dry_run in [true, false] {
        let mut reaper = node.reaper(config(), dry_run);
        let refused = refused_pod();
        listed(&mut reaper, &[&pod, &refused]);
        reaper.on_event(Event::Delete(pod.clone()));
        reaper.act_on_due().await;
        reaper.save();
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    // Refused (twice: one reaper each), would empty, emptied.
    let deadline = Instant::now() + Duration::from_secs(10);
    while kept.lock().unwrap().len() < 4 {
        assert!(Instant::now() < deadline, "{:?}", kept.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = kept.lock().unwrap().clone();
    let mut reasons = Vec::new();
    for event in &events {
        assert_eq!(event["involvedObject"]["kind"], "Node", "{event}");
        assert_eq!(
            event["requestPath"], "/api/v1/namespaces/default/events",
            "{event}"
        );
        let message = event["message"].as_str().unwrap();
        assert_counts_only(message);
        reasons.push(event["reason"].as_str().unwrap().to_owned());
    }
    for reason in [
        "ScratchDirectoryRefused",
        "ScratchDirectoryWouldEmpty",
        "ScratchDirectoryEmptied",
    ] {
        assert!(reasons.iter().any(|r| r == reason), "{reasons:?}");
    }
    let emptied = events
        .iter()
        .find(|e| e["reason"] == "ScratchDirectoryEmptied")
        .unwrap();
    assert!(
        emptied["message"].as_str().unwrap().contains("6 entries"),
        "{emptied}"
    );
}

/// Issue 26: a directory refused because its pod's user is unknown: the reason, never
/// the pod (the log line names it and what to set).
#[tokio::test]
async fn a_refused_user_is_an_event_with_the_reason_only() {
    let (api, kept) = api_server().await;
    let mut node = Node::new();
    node.api = api;
    let host_path = "/mnt/scratch/job-secret-x7k2p";
    node.scratch(host_path);
    let pod = injected_pod_with("job-secret-x7k2p", host_path, json!({}));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while kept.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no Event");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let events = kept.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "{events:?}");
    let message = events[0]["message"].as_str().unwrap();
    assert_counts_only(message);
    assert!(message.contains("(user_unknown)"), "{message}");
    assert_eq!(events[0]["reason"], "ScratchDirectoryRefused");
}

/// A partly emptied directory: the survivors' reasons, never their names.
#[test]
fn events_outside_the_tenant_namespace_name_no_survivor() {
    let report = prestop_clean::Report {
        target: "/host/mnt/scratch/job-secret-x7k2p".into(),
        outcome: prestop_clean::Outcome::Incomplete,
        removed: 10,
        bytes: 2048,
        left: 3,
        survivors: vec![
            prestop_clean::Survivor {
                path: b"/host/mnt/scratch/job-secret-x7k2p/payroll".to_vec(),
                reason: prestop_clean::Reason::MountPoint,
            },
            prestop_clean::Survivor {
                path: b"/host/mnt/scratch/job-secret-x7k2p/customer-ledger.csv".to_vec(),
                reason: prestop_clean::Reason::NotPermitted,
            },
        ],
        unnamed: 0,
        passes: 1,
        elapsed: Duration::from_millis(20),
        without_agent: false,
    };
    let message = node_message(&report, "a gone pod");
    assert_counts_only(&message);
    assert!(message.contains("3 entries left"), "{message}");
    assert!(message.contains("is a mount point"), "{message}");
    for outcome in [
        prestop_clean::Outcome::Emptied,
        prestop_clean::Outcome::Missing,
        prestop_clean::Outcome::Skipped("/host/mnt/scratch/job-secret-x7k2p is a symlink".into()),
    ] {
        let report = prestop_clean::Report {
            outcome,
            ..report.clone()
        };
        assert_counts_only(&node_message(&report, "2 gone pods"));
    }
}
