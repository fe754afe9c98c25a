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
