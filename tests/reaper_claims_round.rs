//! What a round of claims costs the API server and the judgement (src/reaper/claims.rs):
//! a bound claim is read once per pod, and one pod with very many claims makes the
//! answer "unknown" within the round's two seconds, never late. Over HTTP, from an API
//! server that counts its gets and answers each after a pause; the reaper and the agent
//! read claims through the same function.

mod core_support;
mod reaper_support;

use axum::extract::Path as UrlPath;
use axum::{http::StatusCode, routing::get, Router};
use prestop_injector::reaper::claims::{self, Bound};
use prestop_injector::reaper::ledger::{KnownPod, PodRef};
use prestop_injector::reaper::reach::Reach;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An API server in which claim `bound-N` is bound to the hostPath volume `pv-N` (path
/// `/mnt/scratch/N`) and claim `waiting` is unbound; every get waits `pause` first.
async fn api_server(pause: Duration, gets: Arc<AtomicUsize>) -> kube::Client {
    let app = Router::new().route(
        "/{*path}",
        get(move |UrlPath(path): UrlPath<String>| {
            let gets = gets.clone();
            async move {
                gets.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(pause).await;
                let name = path.rsplit('/').next().unwrap_or_default().to_owned();
                let body = if path.contains("persistentvolumeclaims/") {
                    let mut spec = json!({"accessModes": ["ReadWriteOnce"]});
                    if let Some(n) = name.strip_prefix("bound-") {
                        spec["volumeName"] = json!(format!("pv-{n}"));
                    } else if name == "nfs" {
                        spec["volumeName"] = json!("pv-nfs");
                    }
                    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": name, "namespace": "batch"}, "spec": spec})
                } else if name == "pv-nfs" {
                    json!({"apiVersion": "v1", "kind": "PersistentVolume",
                           "metadata": {"name": name},
                           "spec": {"nfs": {"server": "nfs.example", "path": "/export"}}})
                } else {
                    let n = name.strip_prefix("pv-").unwrap_or_default();
                    json!({"apiVersion": "v1", "kind": "PersistentVolume",
                           "metadata": {"name": name},
                           "spec": {"hostPath": {"path": format!("/mnt/scratch/{n}"), "type": ""}}})
                };
                (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    body.to_string(),
                )
            }
        }),
    );
    reaper_support::client_of(app).await
}

fn pod(uid: &str, claims: &[String]) -> KnownPod {
    KnownPod {
        pod: PodRef {
            uid: uid.to_owned(),
            namespace: "batch".to_owned(),
            name: format!("p-{uid}"),
            user: Default::default(),
        },
        uses: Vec::new(),
        claims: claims.to_vec(),
        ended: false,
    }
}

/// The agent is asked again every 50 ms while a cleanup walks: a bound claim (to a host
/// directory or to anything else) costs two gets the first time and none after, for as
/// long as its pod is on the node; an unbound one is read every time (it may be bound by
/// now). A pod no longer on the node loses its entries: its successor of the same claim
/// is read again.
#[tokio::test]
async fn a_bound_claim_is_read_once_per_pod() {
    let gets = Arc::new(AtomicUsize::new(0));
    let client = api_server(Duration::ZERO, gets.clone()).await;
    let bound = Bound::default();
    let pods = [pod(
        "a",
        &["bound-1".into(), "nfs".into(), "waiting".into()],
    )];
    let first = claims::read(Some(&client), &pods, Some(&bound)).await;
    assert_eq!(
        gets.load(Ordering::SeqCst),
        5,
        "2 claims and volumes, the unbound claim"
    );
    for _ in 0..5 {
        let again = claims::read(Some(&client), &pods, Some(&bound)).await;
        assert_eq!(again, first);
    }
    assert_eq!(
        gets.load(Ordering::SeqCst),
        5 + 5,
        "only the unbound claim again"
    );
    match &first[0].target {
        Ok(host) => assert_eq!(host.known, "/mnt/scratch/1"),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&first[1].target, Err(Reach::Nothing(why)) if why.contains("neither hostPath nor local")),
        "{first:?}"
    );
    assert!(
        matches!(first[2].target, Err(Reach::Nothing(_))),
        "{first:?}"
    );

    // Another walker's question (its asker left out of its round) keeps a's entries.
    bound.keep_only(&["a", "b"].into());
    claims::read(Some(&client), &pods, Some(&bound)).await;
    assert_eq!(gets.load(Ordering::SeqCst), 11);
    // Pod a is gone; pod b names the same claim: read anew.
    bound.keep_only(&["b"].into());
    let before = gets.load(Ordering::SeqCst);
    let b = [pod("b", &["bound-1".into()])];
    claims::read(Some(&client), &b, Some(&bound)).await;
    assert_eq!(gets.load(Ordering::SeqCst), before + 2);
    // Without the memo (the reaper's rounds), every read is a read.
    claims::read(Some(&client), &b, None).await;
    assert_eq!(gets.load(Ordering::SeqCst), before + 4);
}

/// One pod with 200 claims, an API server answering each get after 100 ms: read one by
/// one, with 10 s allowed each, a judgement took 40 s (the agent's is stuck after 3 s,
/// and after 16 stuck ones it refuses every cleanup on the node). Now the claims are
/// read eight at a time, and what is not read within the round's 2 s is unknown: the
/// answer comes, and it fails closed.
#[tokio::test]
async fn many_claims_make_the_answer_unknown_in_time_not_late() {
    let gets = Arc::new(AtomicUsize::new(0));
    let client = api_server(Duration::from_millis(100), gets.clone()).await;
    let names: Vec<String> = (0..200).map(|n| format!("bound-{n}")).collect();
    let pods = [pod("many", &names)];
    let started = Instant::now();
    let uses = claims::read(Some(&client), &pods, Some(&Bound::default())).await;
    let took = started.elapsed();
    assert_eq!(uses.len(), 200);
    let unknown = uses
        .iter()
        .filter(|u| matches!(&u.target, Err(Reach::Unknown(why)) if why.contains("did not answer within")))
        .count();
    let read = uses.iter().filter(|u| u.target.is_ok()).count();
    eprintln!("200 claims at 100 ms a get: {read} read, {unknown} unknown, in {took:?}");
    assert!(unknown > 0 && read > 0, "{read} read, {unknown} unknown");
    assert_eq!(read + unknown, 200);
    assert!(took < Duration::from_secs(10), "{took:?}");
}
