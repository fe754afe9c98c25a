//! docs/DESIGN.md#responses through the real server: DELETE of a Job on `/validate`, over verified
//! TLS, for every propagationPolicy × orphanDependents × annotated-or-not, with the default
//! (warn) and the deny configuration. Never a patch; the mutating endpoints never patch a
//! DELETE either.

use prestop_injector::config::Config;
use prestop_injector::mutation::ORPHAN_DELETE_MESSAGE;
use prestop_injector::server::Settings;
use serde_json::{json, Value};
use support::{post_request, send_h1, Pki};

#[path = "support/server.rs"]
mod support;

fn delete_review(uid: &str, options: &Value, annotated: bool) -> Vec<u8> {
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "worker", "namespace": "default", "managedFields": []},
        "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "a", "image": "busybox"}]}}},
        "status": {"active": 1}});
    if annotated {
        job["spec"]["template"]["metadata"]["annotations"] = json!({"prestop-injector.io/status": "{\"version\":1,\"containers\":[\"a\"],\"grace\":40}"});
    }
    let mut options = options.clone();
    options["kind"] = json!("DeleteOptions");
    options["apiVersion"] = json!("meta.k8s.io/v1");
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "name": "worker", "namespace": "default", "operation": "DELETE",
        "object": null, "oldObject": job, "options": options, "dryRun": false}}),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_orphan_delete_matrix() {
    let pki = Pki::new();
    let warn = support::start(Settings::default(), &pki).await;
    let deny_settings = Settings {
        config: Config::from_yaml("orphanDelete: deny\n").unwrap(),
        ..Settings::default()
    };
    let deny = support::start(deny_settings, &pki).await;
    let (mut warn_client, _) = support::h1(warn.addr(), &pki.ca_pem).await;
    let (mut deny_client, _) = support::h1(deny.addr(), &pki.ca_pem).await;

    let policies = [None, Some("Orphan"), Some("Background"), Some("Foreground")];
    let mut case = 0;
    for policy in policies {
        for orphan_dependents in [None, Some(true), Some(false)] {
            // The API server refuses both fields at once unless they agree; keep to what it sends.
            if policy.is_some() && orphan_dependents.is_some() {
                continue;
            }
            for annotated in [true, false] {
                case += 1;
                let mut options = json!({});
                if let Some(policy) = policy {
                    options["propagationPolicy"] = json!(policy);
                }
                if let Some(orphan) = orphan_dependents {
                    options["orphanDependents"] = json!(orphan);
                }
                let orphans = match (policy, orphan_dependents) {
                    (Some(policy), _) => policy == "Orphan",
                    (None, Some(orphan)) => orphan,
                    (None, None) => true,
                };
                let expected = orphans && annotated;
                let uid = format!("delete-{case}");
                let body = delete_review(&uid, &options, annotated);
                let label = format!("{options} annotated={annotated}");

                let answer = send_h1(&mut warn_client, post_request("/validate", body.clone()))
                    .await
                    .unwrap();
                assert_eq!(answer.status, 200, "{label}: {}", answer.text());
                let response = answer.json()["response"].clone();
                assert_eq!(response["uid"], uid.as_str());
                assert_eq!(response["allowed"], true, "{label}");
                assert_eq!(response.get("patch"), None, "{label}");
                let warnings = response.get("warnings").cloned().unwrap_or(json!([]));
                assert_eq!(
                    warnings == json!([ORPHAN_DELETE_MESSAGE]),
                    expected,
                    "{label}: {warnings}"
                );

                let answer = send_h1(&mut deny_client, post_request("/validate", body.clone()))
                    .await
                    .unwrap();
                let response = answer.json()["response"].clone();
                assert_eq!(response["allowed"], !expected, "{label}");
                assert_eq!(response.get("patch"), None, "{label}");
                if expected {
                    assert_eq!(response["status"]["code"], 403);
                    assert_eq!(response["status"]["message"], ORPHAN_DELETE_MESSAGE);
                }

                for path in ["/mutate", "/mutate/auto"] {
                    let answer = send_h1(&mut warn_client, post_request(path, body.clone()))
                        .await
                        .unwrap();
                    let response = answer.json()["response"].clone();
                    assert_eq!(response["allowed"], true, "{path} {label}");
                    assert_eq!(response.get("patch"), None, "{path} {label}");
                }
            }
        }
    }
    assert_eq!(case, 12);
}
