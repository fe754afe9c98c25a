//! What the offline decision cannot tell by itself: whether the installed webhook would
//! be asked at all. `mutate` decides every document it is given; the API server sends the
//! webhook only what its configuration's rules and `namespaceSelector` match
//! ([`crate::cli::webhook_config::rules`]), so a document outside them gets a note saying what the
//! cluster does with it instead.

use crate::admission::Request;
use crate::cli::webhook_config::rules::SYSTEM_NAMESPACES;
use crate::mutation::scope::workload;

/// The namespace the shipped manifests (`deploy/`, the chart) install the webhook in; the
/// webhooks exclude their own namespace too.
const INSTALL_NAMESPACE: &str = "prestop-system";

/// One sentence per reason the installed webhook would not decide `request` as `mutate`
/// just did.
pub(super) fn notes(request: &Request) -> Vec<String> {
    let mut notes = Vec::new();
    let kind = &request.kind;
    let mut as_v1 = kind.clone();
    as_v1.version = "v1".to_owned();
    if kind.version != "v1" && workload::find(&as_v1, request.operation).is_some() {
        let group = if kind.group.is_empty() {
            String::new()
        } else {
            format!("{}/", kind.group)
        };
        notes.push(format!(
            "{group}{} {} is left unchanged here; the webhook's rules list {group}v1 only \
             (matchPolicy: Equivalent), so where the cluster still serves {group}{} the API \
             server converts it to {group}v1 before calling the webhook, which decides it as \
             that: run mutate on the {group}v1 form to see the result",
            kind.version, kind.kind, kind.version
        ));
    }
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let excluded = SYSTEM_NAMESPACES.contains(&namespace) || namespace == INSTALL_NAMESPACE;
    if excluded && workload::find(&as_v1, request.operation).is_some() {
        notes.push(format!(
            "namespace {namespace}: the installed webhook never sees it (its namespaceSelector \
             excludes {} and its own namespace, {INSTALL_NAMESPACE} by default); the cluster \
             admits this object unchanged",
            SYSTEM_NAMESPACES.join(", ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{GroupVersionKind, Operation};

    fn request(group: &str, version: &str, kind: &str, namespace: Option<&str>) -> Request {
        Request {
            kind: GroupVersionKind {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
            },
            namespace: namespace.map(str::to_owned),
            operation: Operation::Create,
            ..Request::default()
        }
    }

    #[test]
    fn only_what_the_webhook_would_not_be_sent() {
        for (group, version, kind, namespace, expected) in [
            ("batch", "v1", "CronJob", Some("default"), 0),
            ("batch", "v1", "CronJob", None, 0),
            ("batch", "v1beta1", "CronJob", Some("default"), 1),
            ("apps", "v1beta2", "Deployment", None, 1),
            ("batch", "v1", "Job", Some("kube-system"), 1),
            ("", "v1", "Pod", Some("kube-node-lease"), 1),
            ("", "v1", "Pod", Some("prestop-system"), 1),
            ("batch", "v1beta1", "CronJob", Some("kube-public"), 2),
            ("", "v1", "ConfigMap", Some("kube-system"), 0),
            ("example.com", "v1beta1", "CronJob", None, 0),
        ] {
            let notes = notes(&request(group, version, kind, namespace));
            assert_eq!(
                notes.len(),
                expected,
                "{group}/{version} {kind} {namespace:?}: {notes:?}"
            );
        }
    }
}
