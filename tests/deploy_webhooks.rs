//! The webhook configurations and the cert-manager objects the overlays install: the
//! settings docs/INSTALL.md promises, the rules of docs/DESIGN.md#scope, and how the overlays
//! compose.

#[path = "support/deploy.rs"]
mod common;

use common::{find, webhook};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// docs/DESIGN.md#scope: the kinds, and for each the operations, the webhook must see.
const WEBHOOK_KINDS: [(&str, &str, &[&str]); 7] = [
    ("batch", "jobs", &["CREATE"]),
    ("batch", "cronjobs", &["CREATE", "UPDATE"]),
    ("", "pods", &["CREATE"]),
    ("apps", "deployments", &["CREATE", "UPDATE"]),
    ("apps", "statefulsets", &["CREATE", "UPDATE"]),
    ("apps", "daemonsets", &["CREATE", "UPDATE"]),
    ("apps", "replicasets", &["CREATE", "UPDATE"]),
];

/// (group, resource, operation) triples a webhook's rules match.
fn matched(webhook: &Value) -> BTreeSet<(String, String, String)> {
    let mut set = BTreeSet::new();
    for rule in webhook["rules"].as_array().unwrap() {
        assert_eq!(rule["apiVersions"], json!(["v1"]));
        assert_eq!(rule["scope"], "Namespaced");
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                let resource = resource.as_str().unwrap();
                assert!(
                    !resource.contains('/') && resource != "*",
                    "no subresources or wildcards: {resource}"
                );
                for operation in rule["operations"].as_array().unwrap() {
                    let triple = (
                        group.as_str().unwrap(),
                        resource,
                        operation.as_str().unwrap(),
                    );
                    set.insert((triple.0.into(), triple.1.into(), triple.2.into()));
                }
            }
        }
    }
    set
}

#[test]
fn webhook_configurations_carry_the_promised_settings() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let spec: BTreeSet<_> = WEBHOOK_KINDS
        .iter()
        .flat_map(|(group, resource, ops)| {
            ops.iter()
                .map(|op| (group.to_string(), resource.to_string(), op.to_string()))
        })
        .collect();
    let excluded = json!([{
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", "kube-public", "kube-node-lease", "prestop-system"],
    }]);
    for overlay in common::OVERLAYS {
        let objects = common::render(&kubectl, overlay);
        let mutating = webhook(&objects, "MutatingWebhookConfiguration");
        assert_eq!(
            matched(mutating),
            spec,
            "{overlay}: mutating rules = the kinds of docs/DESIGN.md#scope"
        );
        for (key, value) in [
            ("sideEffects", json!("None")),
            ("admissionReviewVersions", json!(["v1"])),
            ("failurePolicy", json!("Fail")),
            ("timeoutSeconds", json!(5)),
            ("reinvocationPolicy", json!("IfNeeded")),
            ("matchPolicy", json!("Equivalent")),
        ] {
            assert_eq!(mutating[key], value, "{overlay}: mutating {key}");
        }
        assert_eq!(
            mutating["namespaceSelector"]["matchExpressions"], excluded,
            "{overlay}"
        );
        let service = &mutating["clientConfig"]["service"];
        assert_eq!(service["name"], "prestop-injector");
        assert_eq!(service["namespace"], "prestop-system");
        assert_eq!(service["port"], 443);
        let conditions: Vec<&str> = mutating["matchConditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        if overlay == "namespace-opt-in" {
            assert_eq!(service["path"], "/mutate/auto");
            assert_eq!(
                mutating["namespaceSelector"]["matchLabels"],
                json!({"prestop-injector.io/inject": "enabled"})
            );
            assert_eq!(conditions, ["not-opted-out"]);
        } else {
            assert_eq!(service["path"], "/mutate");
            assert!(
                mutating["namespaceSelector"].get("matchLabels").is_none(),
                "{overlay}"
            );
            assert_eq!(conditions, ["prestop-annotated", "not-opted-out"]);
        }

        let validating = webhook(&objects, "ValidatingWebhookConfiguration");
        let delete_jobs = BTreeSet::from([("batch".into(), "jobs".into(), "DELETE".into())]);
        assert_eq!(matched(validating), delete_jobs, "{overlay}");
        assert_eq!(validating["clientConfig"]["service"]["path"], "/validate");
        assert_eq!(validating["sideEffects"], "None");
        assert_eq!(validating["admissionReviewVersions"], json!(["v1"]));
        assert_eq!(
            validating["failurePolicy"], "Ignore",
            "a warn-only guard must not block deletes"
        );
        assert_eq!(
            validating["namespaceSelector"]["matchExpressions"],
            excluded
        );
        assert_eq!(validating["matchConditions"][0]["name"], "managed-job");

        let ca_injection = find(&objects, "MutatingWebhookConfiguration", "prestop-injector")
            ["metadata"]["annotations"]
            .get("cert-manager.io/inject-ca-from")
            .cloned();
        assert_eq!(
            ca_injection.is_some(),
            overlay == "cert-manager",
            "{overlay}: inject-ca-from"
        );
        for webhook in [mutating, validating] {
            assert!(
                webhook["clientConfig"].get("caBundle").is_none(),
                "{overlay}: caBundle comes from certs/ or cert-manager"
            );
        }
    }
}

#[test]
fn namespace_opt_in_combines_with_the_cert_manager_component() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    // Kustomize refuses absolute paths: write the user's kustomization where a relative
    // path reaches deploy/.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let deploy = relative(dir.path(), &common::deploy_dir());
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "resources: [{0}/overlays/namespace-opt-in]\ncomponents: [{0}/components/cert-manager]\n",
            deploy.display()
        ),
    )
    .unwrap();
    let objects = common::render_dir(&kubectl, dir.path());
    assert_eq!(
        webhook(&objects, "MutatingWebhookConfiguration")["clientConfig"]["service"]["path"],
        "/mutate/auto"
    );
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let annotations = &find(&objects, kind, "prestop-injector")["metadata"]["annotations"];
        assert_eq!(
            annotations["cert-manager.io/inject-ca-from"],
            "prestop-system/prestop-injector-serving"
        );
    }
    find(&objects, "Certificate", "prestop-injector-serving");
}

/// `to` relative to the directory `from`.
fn relative(from: &Path, to: &Path) -> std::path::PathBuf {
    let from = from.canonicalize().unwrap();
    let to = to.canonicalize().unwrap();
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut path = std::path::PathBuf::new();
    for _ in from.components().skip(common) {
        path.push("..");
    }
    to.components().skip(common).for_each(|c| path.push(c));
    path
}

#[test]
fn cert_manager_issues_the_serving_certificate_into_the_mounted_secret() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, "cert-manager");
    let issuer = |name: &str| find(&objects, "Issuer", name);
    assert_eq!(
        issuer("prestop-injector-selfsigned")["spec"],
        json!({"selfSigned": {}})
    );
    let ca = find(&objects, "Certificate", "prestop-injector-ca");
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(
        ca["spec"]["issuerRef"]["name"],
        "prestop-injector-selfsigned"
    );
    assert_eq!(
        issuer("prestop-injector-ca")["spec"]["ca"]["secretName"],
        ca["spec"]["secretName"]
    );
    let serving = find(&objects, "Certificate", "prestop-injector-serving");
    assert_eq!(serving["metadata"]["namespace"], "prestop-system");
    assert_eq!(serving["spec"]["issuerRef"]["name"], "prestop-injector-ca");
    assert_eq!(serving["spec"]["secretName"], "prestop-injector-tls");
    assert_eq!(serving["spec"]["privateKey"]["encoding"], "PKCS8");
    let names = prestop_injector::certs::service_dns_names("prestop-injector", "prestop-system");
    assert_eq!(serving["spec"]["dnsNames"], json!(names));
    for object in objects
        .iter()
        .filter(|o| o["apiVersion"] == "cert-manager.io/v1")
    {
        assert_eq!(
            object["metadata"]["namespace"], "prestop-system",
            "{object}"
        );
    }
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let annotations = &find(&objects, kind, "prestop-injector")["metadata"]["annotations"];
        assert_eq!(
            annotations["cert-manager.io/inject-ca-from"],
            "prestop-system/prestop-injector-serving"
        );
    }
}
