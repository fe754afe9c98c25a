//! `prestop-injector webhook-config`: prints both configurations with the caBundle, and
//! the same content as the kustomize overlays.

#[path = "support/deploy.rs"]
mod common;

use common::prestop_injector;

use base64::Engine as _;
use serde_json::{json, Value};
use std::path::Path;

/// Writes a CA with `certs` and returns its directory.
fn ca_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let output = prestop_injector(&["certs", "--out", out.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    dir
}

fn webhook_config(ca_file: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["webhook-config", "--ca-file", ca_file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let output = prestop_injector(&args);
    assert!(
        output.status.success(),
        "webhook-config {extra:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    common::parse_documents(&String::from_utf8_lossy(&output.stdout))
}

/// Removes every webhook's caBundle, asserting it is the base64 of `ca_pem`.
fn take_ca_bundles(objects: &mut [Value], ca_pem: &str) {
    for object in objects {
        for webhook in object["webhooks"].as_array_mut().unwrap() {
            let client = webhook["clientConfig"].as_object_mut().unwrap();
            let bundle = client.remove("caBundle").expect("caBundle is set");
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(bundle.as_str().unwrap())
                .expect("caBundle is base64");
            assert_eq!(String::from_utf8(decoded).unwrap(), ca_pem);
        }
    }
}

fn webhook_configurations(objects: Vec<Value>) -> Vec<Value> {
    objects
        .into_iter()
        .filter(|o| {
            o["kind"]
                .as_str()
                .unwrap()
                .ends_with("WebhookConfiguration")
        })
        .collect()
}

#[test]
fn output_has_the_ca_bundle_and_matches_the_overlays() {
    let dir = ca_dir();
    let ca_file = dir.path().join("certs/ca.crt");
    let ca_pem = std::fs::read_to_string(&ca_file).unwrap();
    let kubectl = common::kubectl();
    for (mode, overlay) in [
        ("cluster-wide", "cluster-wide"),
        ("namespace-opt-in", "namespace-opt-in"),
    ] {
        let mut printed = webhook_config(&ca_file, &["--mode", mode]);
        let kinds: Vec<&str> = printed
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "MutatingWebhookConfiguration",
                "ValidatingWebhookConfiguration"
            ]
        );
        take_ca_bundles(&mut printed, &ca_pem);
        let Some(kubectl) = &kubectl else { continue };
        let rendered = webhook_configurations(common::render(kubectl, overlay));
        assert_eq!(
            printed, rendered,
            "webhook-config --mode {mode} differs from deploy/overlays/{overlay}"
        );
        if overlay == "cluster-wide" {
            // cert-manager adds only the CA injection annotation.
            let mut with_cert_manager =
                webhook_configurations(common::render(kubectl, "cert-manager"));
            for object in &mut with_cert_manager {
                let metadata = object["metadata"].as_object_mut().unwrap();
                let annotations = metadata.remove("annotations").unwrap();
                assert_eq!(
                    annotations,
                    json!({"cert-manager.io/inject-ca-from": "prestop-system/prestop-injector-serving"})
                );
            }
            assert_eq!(printed, with_cert_manager);
        }
    }
}

#[test]
fn default_mode_is_cluster_wide() {
    let dir = ca_dir();
    let ca_file = dir.path().join("certs/ca.crt");
    let printed = webhook_config(&ca_file, &[]);
    assert_eq!(
        printed,
        webhook_config(&ca_file, &["--mode", "cluster-wide"])
    );
}

#[test]
fn service_and_namespace_are_used_and_the_namespace_excluded() {
    let dir = ca_dir();
    let ca_file = dir.path().join("certs/ca.crt");
    let printed = webhook_config(&ca_file, &["--service", "hook", "--namespace", "infra"]);
    for object in &printed {
        let webhook = &object["webhooks"][0];
        let service = &webhook["clientConfig"]["service"];
        assert_eq!(service["name"], "hook");
        assert_eq!(service["namespace"], "infra");
        assert_eq!(
            webhook["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["kube-system", "kube-public", "kube-node-lease", "infra"])
        );
    }
}

#[test]
fn a_missing_or_wrong_ca_file_says_what_to_pass() {
    let dir = ca_dir();
    let missing = dir.path().join("nope.crt");
    let output = prestop_injector(&["webhook-config", "--ca-file", missing.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nope.crt") && stderr.contains("certs --out"),
        "{stderr}"
    );

    let key = dir.path().join("certs/ca.key");
    let output = prestop_injector(&["webhook-config", "--ca-file", key.to_str().unwrap()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no PEM certificate"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing printed on error");
}

#[test]
fn url_replaces_the_service_and_gets_each_webhooks_path() {
    let dir = ca_dir();
    let ca_file = dir.path().join("certs/ca.crt");
    for (mode, mutate_path) in [
        ("cluster-wide", "/mutate"),
        ("namespace-opt-in", "/mutate/auto"),
    ] {
        let printed = webhook_config(
            &ca_file,
            &["--mode", mode, "--url", "https://hook.example:9443/"],
        );
        let urls: Vec<&Value> = printed
            .iter()
            .map(|o| &o["webhooks"][0]["clientConfig"]["url"])
            .collect();
        assert_eq!(
            urls,
            [
                &json!(format!("https://hook.example:9443{mutate_path}")),
                &json!("https://hook.example:9443/validate")
            ]
        );
        for object in &printed {
            let client = &object["webhooks"][0]["clientConfig"];
            assert!(client.get("service").is_none(), "{client}");
            assert!(client.get("caBundle").is_some(), "{client}");
            // The webhook's namespace is still kept out of the webhooks.
            assert_eq!(
                object["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"][3],
                "prestop-system"
            );
        }
    }
}

#[test]
fn a_url_with_a_path_or_without_https_is_refused() {
    let dir = ca_dir();
    let ca_file = dir.path().join("certs/ca.crt");
    for (url, says) in [
        ("http://hook:9443", "https://"),
        ("https://hook:9443/mutate", "appended"),
        ("https://hook:9443?x=1", "appended"),
        ("https://", "appended"),
    ] {
        let output = prestop_injector(&[
            "webhook-config",
            "--ca-file",
            ca_file.to_str().unwrap(),
            "--url",
            url,
        ]);
        assert!(!output.status.success(), "{url}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{url}: {stderr}");
    }
    let output = prestop_injector(&[
        "webhook-config",
        "--ca-file",
        ca_file.to_str().unwrap(),
        "--url",
        "https://hook:9443",
        "--service",
        "other",
    ]);
    assert!(!output.status.success(), "--url and --service conflict");
}

#[test]
fn match_conditions_only_for_servers_that_know_them() {
    let dir = ca_dir();
    let ca_file = dir.path().join("certs/ca.crt");
    let newest = webhook_config(&ca_file, &[]);
    for (version, kept) in [
        ("1.20", false),
        ("1.27", false),
        ("1.28", true),
        ("v1.31.2", true),
    ] {
        let printed = webhook_config(&ca_file, &["--kubernetes-version", version]);
        for (object, full) in printed.iter().zip(&newest) {
            let webhook = &object["webhooks"][0];
            assert_eq!(
                webhook.get("matchConditions").is_some(),
                kept,
                "{version}: {webhook}"
            );
            let mut without = full.clone();
            if !kept {
                without["webhooks"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("matchConditions");
            }
            assert_eq!(object, &without, "{version}: nothing else changes");
        }
    }
    for (version, notes) in [("1.20", true), ("1.21", false)] {
        let output = prestop_injector(&[
            "webhook-config",
            "--ca-file",
            ca_file.to_str().unwrap(),
            "--kubernetes-version",
            version,
        ]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            stderr.contains(
                "kubectl label namespace kube-system kubernetes.io/metadata.name=kube-system"
            ),
            notes,
            "{version}: {stderr}"
        );
    }
    let output = prestop_injector(&[
        "webhook-config",
        "--ca-file",
        ca_file.to_str().unwrap(),
        "--kubernetes-version",
        "1.3o",
    ]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("1.29 (major.minor)"));
}
