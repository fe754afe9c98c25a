//! The webhook configurations that register prestop-injector with the API server.
//!
//! One source for `webhook-config`; the kustomize overlays under `deploy/` carry the same
//! content, and `tests/cli_webhook_config.rs` checks that they agree.

use crate::kube_version::{self, KubeVersion};
use serde_json::{json, Value};

/// Name of the MutatingWebhookConfiguration and of the ValidatingWebhookConfiguration.
pub const CONFIGURATION_NAME: &str = "prestop-injector";
/// Namespaces the webhooks never see, besides the webhook's own namespace. Excluding
/// them keeps the control plane (and our own pods) creatable when the webhook is down.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];
/// Namespace label that opts a namespace in, in `namespace-opt-in` mode.
pub const OPT_IN_LABEL: (&str, &str) = ("prestop-injector.io/inject", "enabled");

/// Kinds and operations of docs/DESIGN.md#scope: (API group, resources, operations).
pub const MUTATING_RULES: [(&str, &[&str], &[&str]); 4] = [
    ("batch", &["jobs"], &["CREATE"]),
    ("batch", &["cronjobs"], &["CREATE", "UPDATE"]),
    ("", &["pods"], &["CREATE"]),
    (
        "apps",
        &["deployments", "statefulsets", "daemonsets", "replicasets"],
        &["CREATE", "UPDATE"],
    ),
];

/// CEL: the object (or its pod template) carries a `prestop-injector.io/` annotation other
/// than `status`. The status annotation alone does not count: it is what we wrote on a pod
/// template, so a Pod created from an already-mutated template needs no second pass, and
/// a reinvocation still matches through the user's own annotation. `has()` guards every
/// step because a missing field is an error, and an error fails the request under
/// `failurePolicy: Fail`. `object` is null only on DELETE, which these rules never match.
pub const ANNOTATED_EXPRESSION: &str = "object != null && (\
(has(object.metadata.annotations) && object.metadata.annotations.exists(k, \
k.startsWith('prestop-injector.io/') && k != 'prestop-injector.io/status')) || \
(has(object.spec) && has(object.spec.template) && has(object.spec.template.metadata) && \
has(object.spec.template.metadata.annotations) && \
object.spec.template.metadata.annotations.exists(k, \
k.startsWith('prestop-injector.io/') && k != 'prestop-injector.io/status')) || \
(has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && \
has(object.spec.jobTemplate.spec.template) && \
has(object.spec.jobTemplate.spec.template.metadata) && \
has(object.spec.jobTemplate.spec.template.metadata.annotations) && \
object.spec.jobTemplate.spec.template.metadata.annotations.exists(k, \
k.startsWith('prestop-injector.io/') && k != 'prestop-injector.io/status')))";

/// CEL: the object is not opted out with `prestop-injector.io/inject: "false"`. The pod
/// template's value wins over the object's, as in the server (docs/DESIGN.md#scope); the server
/// still decides: this only saves the round trip.
pub const NOT_OPTED_OUT_EXPRESSION: &str = "object == null || !(\
(has(object.spec) && has(object.spec.template) && has(object.spec.template.metadata) && \
has(object.spec.template.metadata.annotations) && \
'prestop-injector.io/inject' in object.spec.template.metadata.annotations) ? \
object.spec.template.metadata.annotations['prestop-injector.io/inject'] == 'false' : \
(has(object.spec) && has(object.spec.jobTemplate) && has(object.spec.jobTemplate.spec) && \
has(object.spec.jobTemplate.spec.template) && \
has(object.spec.jobTemplate.spec.template.metadata) && \
has(object.spec.jobTemplate.spec.template.metadata.annotations) && \
'prestop-injector.io/inject' in object.spec.jobTemplate.spec.template.metadata.annotations) ? \
object.spec.jobTemplate.spec.template.metadata.annotations['prestop-injector.io/inject'] == 'false' : \
(has(object.metadata.annotations) && \
'prestop-injector.io/inject' in object.metadata.annotations && \
object.metadata.annotations['prestop-injector.io/inject'] == 'false'))";

/// CEL for the DELETE guard: the Job being deleted (`oldObject`; `object` is null on
/// DELETE) was mutated by us, i.e. carries the status annotation on itself or its template.
pub const MANAGED_JOB_EXPRESSION: &str = "oldObject != null && (\
(has(oldObject.metadata.annotations) && \
'prestop-injector.io/status' in oldObject.metadata.annotations) || \
(has(oldObject.spec) && has(oldObject.spec.template) && \
has(oldObject.spec.template.metadata) && \
has(oldObject.spec.template.metadata.annotations) && \
'prestop-injector.io/status' in oldObject.spec.template.metadata.annotations))";

/// How the mutating webhook chooses what it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Every namespace but the system ones; only annotated objects reach the webhook.
    ClusterWide,
    /// Only namespaces labelled `prestop-injector.io/inject=enabled`, processed by default.
    NamespaceOptIn,
}

/// How the API server reaches the webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint<'a> {
    /// The webhook's Service, port 443.
    Service { name: &'a str, namespace: &'a str },
    /// `https://HOST:PORT` (no path): a webhook outside the cluster. Each webhook's path
    /// is appended (`/mutate`, `/mutate/auto`, `/validate`).
    Url(&'a str),
}

/// The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration, in that order.
/// `ca_bundle` is the base64 of the CA's PEM; `None` leaves `caBundle` out (kustomize base).
/// `namespace` is the webhook's own namespace, never sent to the webhook.
pub fn configurations(
    mode: Mode,
    service: &str,
    namespace: &str,
    ca_bundle: Option<&str>,
) -> [Value; 2] {
    configurations_for(
        mode,
        Endpoint::Service {
            name: service,
            namespace,
        },
        namespace,
        ca_bundle,
    )
}

/// [`configurations`] with any [`Endpoint`].
pub fn configurations_for(
    mode: Mode,
    endpoint: Endpoint<'_>,
    namespace: &str,
    ca_bundle: Option<&str>,
) -> [Value; 2] {
    let (path, mut selector, conditions) = match mode {
        Mode::ClusterWide => (
            "/mutate",
            json!({}),
            vec![
                condition("prestop-annotated", ANNOTATED_EXPRESSION),
                condition("not-opted-out", NOT_OPTED_OUT_EXPRESSION),
            ],
        ),
        Mode::NamespaceOptIn => (
            "/mutate/auto",
            json!({ "matchLabels": { OPT_IN_LABEL.0: OPT_IN_LABEL.1 } }),
            vec![condition("not-opted-out", NOT_OPTED_OUT_EXPRESSION)],
        ),
    };
    selector["matchExpressions"] = excluded_namespaces(namespace);
    let rules: Vec<Value> = MUTATING_RULES
        .iter()
        .map(|(group, resources, operations)| rule(group, resources, operations))
        .collect();
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata(),
        "webhooks": [{
            "name": "mutate.prestop-injector.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config(endpoint, path, ca_bundle),
            "failurePolicy": "Fail",
            "matchConditions": conditions,
            "matchPolicy": "Equivalent",
            "namespaceSelector": selector,
            "reinvocationPolicy": "IfNeeded",
            "rules": rules,
            "sideEffects": "None",
            "timeoutSeconds": 5,
        }],
    });
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata(),
        "webhooks": [{
            "name": "validate.prestop-injector.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config(endpoint, "/validate", ca_bundle),
            // A guard that warns by default must not block every Job delete while the
            // webhook is down (or already uninstalled).
            "failurePolicy": "Ignore",
            "matchConditions": [condition("managed-job", MANAGED_JOB_EXPRESSION)],
            "matchPolicy": "Equivalent",
            "namespaceSelector": { "matchExpressions": excluded_namespaces(namespace) },
            "rules": [rule("batch", &["jobs"], &["DELETE"])],
            "sideEffects": "None",
            "timeoutSeconds": 5,
        }],
    });
    [mutating, validating]
}

/// Name and the labels kustomize puts on every object of `deploy/base/webhook`.
fn metadata() -> Value {
    json!({
        "name": CONFIGURATION_NAME,
        "labels": {
            "app.kubernetes.io/name": "prestop-injector",
            "app.kubernetes.io/part-of": "prestop-injector",
        },
    })
}

fn client_config(endpoint: Endpoint<'_>, path: &str, ca_bundle: Option<&str>) -> Value {
    let mut config = match endpoint {
        Endpoint::Service { name, namespace } => json!({
            "service": { "name": name, "namespace": namespace, "path": path, "port": 443 },
        }),
        Endpoint::Url(base) => json!({ "url": format!("{}{path}", base.trim_end_matches('/')) }),
    };
    if let Some(ca_bundle) = ca_bundle {
        config["caBundle"] = json!(ca_bundle);
    }
    config
}

fn excluded_namespaces(own_namespace: &str) -> Value {
    let mut names: Vec<&str> = SYSTEM_NAMESPACES.to_vec();
    if !names.contains(&own_namespace) {
        names.push(own_namespace);
    }
    json!([{ "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": names }])
}

fn rule(group: &str, resources: &[&str], operations: &[&str]) -> Value {
    json!({
        "apiGroups": [group],
        "apiVersions": ["v1"],
        "operations": operations,
        "resources": resources,
        "scope": "Namespaced",
    })
}

fn condition(name: &str, expression: &str) -> Value {
    json!({ "name": name, "expression": expression })
}

/// Removes what a server older than `version` does not know: `matchConditions` (before
/// 1.28 kubectl refuses the field, and `--validate=false` would make the server drop it
/// without a word). The webhook decides the same without them; they only save round trips.
pub fn for_version(configurations: &mut [Value], version: KubeVersion) {
    if version.has(kube_version::MATCH_CONDITIONS) {
        return;
    }
    for configuration in configurations {
        let webhooks = configuration
            .get_mut("webhooks")
            .and_then(Value::as_array_mut);
        for webhook in webhooks.into_iter().flatten() {
            if let Some(webhook) = webhook.as_object_mut() {
                webhook.remove("matchConditions");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_namespace_is_not_excluded_twice() {
        let [mutating, validating] = configurations(Mode::ClusterWide, "hook", "kube-system", None);
        for configuration in [mutating, validating] {
            let webhook = &configuration["webhooks"][0];
            let values = &webhook["namespaceSelector"]["matchExpressions"][0]["values"];
            assert_eq!(values, &json!(SYSTEM_NAMESPACES));
            assert!(webhook["clientConfig"].get("caBundle").is_none());
        }
    }

    #[test]
    fn only_the_mutating_path_and_selector_differ_between_modes() {
        let [cluster, _] = configurations(Mode::ClusterWide, "s", "n", Some("Q0E="));
        let [opt_in, _] = configurations(Mode::NamespaceOptIn, "s", "n", Some("Q0E="));
        let (cluster, opt_in) = (&cluster["webhooks"][0], &opt_in["webhooks"][0]);
        assert_eq!(cluster["clientConfig"]["service"]["path"], "/mutate");
        assert_eq!(opt_in["clientConfig"]["service"]["path"], "/mutate/auto");
        assert_eq!(opt_in["clientConfig"]["caBundle"], "Q0E=");
        assert_eq!(
            opt_in["namespaceSelector"]["matchLabels"],
            json!({ "prestop-injector.io/inject": "enabled" })
        );
        assert_eq!(cluster["matchConditions"].as_array().unwrap().len(), 2);
        assert_eq!(opt_in["matchConditions"][0]["name"], "not-opted-out");
    }
}
