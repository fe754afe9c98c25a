//! Who may share a host directory (kinds, replicas, overlapping runs) and which
//! `subPathExpr` makes it per-pod.

use super::*;
use crate::json::json;

#[test]
fn who_shares() {
    let cases = [
        ("Pod", json!({}), None),
        ("Job", json!({"spec": {}}), Some((JOB_REPLACED, POD_UID))),
        (
            "Job",
            json!({"spec": {"parallelism": 1}}),
            Some((JOB_REPLACED, POD_UID)),
        ),
        (
            "Job",
            json!({"spec": {"parallelism": 4}}),
            Some(("pods of a Job with parallelism 4", POD_NAME)),
        ),
        (
            "CronJob",
            json!({"spec": {"jobTemplate": {"spec": {"parallelism": 2}}}}),
            Some(("pods of a CronJob with parallelism 2", POD_NAME)),
        ),
        (
            "CronJob",
            json!({"spec": {}}),
            Some((
                "pods of a CronJob's overlapping runs (concurrencyPolicy: Allow, the default)",
                POD_UID,
            )),
        ),
        (
            "CronJob",
            json!({"spec": {"concurrencyPolicy": "Allow"}}),
            Some((
                "pods of a CronJob's overlapping runs (concurrencyPolicy: Allow)",
                POD_UID,
            )),
        ),
        (
            "CronJob",
            json!({"spec": {"concurrencyPolicy": "Replace"}}),
            Some((
                "a CronJob's next run, started while the replaced run still stops \
                 (concurrencyPolicy: Replace)",
                POD_UID,
            )),
        ),
        (
            "CronJob",
            json!({"spec": {"concurrencyPolicy": "Forbid"}}),
            Some((CRON_JOB_REPLACED, POD_UID)),
        ),
        (
            "Deployment",
            json!({"spec": {"replicas": 3}}),
            Some(("pods of a Deployment with 3 replicas", POD_NAME)),
        ),
        (
            "Deployment",
            json!({"spec": {}}),
            Some(("pods of a Deployment's rolling update", POD_NAME)),
        ),
        (
            "Deployment",
            json!({"spec": {"strategy": {"type": "Recreate"}}}),
            Some(("pods of a Deployment", POD_NAME)),
        ),
        (
            "ReplicaSet",
            json!({"spec": {}}),
            Some(("pods of a ReplicaSet", POD_NAME)),
        ),
        (
            "StatefulSet",
            json!({"spec": {"replicas": 1}}),
            Some(("pods of a StatefulSet", POD_UID)),
        ),
        (
            "DaemonSet",
            json!({}),
            Some(("pods of a DaemonSet", POD_NAME)),
        ),
        (
            "Pod",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "CloneSet", "name": "c", "controller": true}]}}),
            Some(("pods of a CloneSet controller", POD_NAME)),
        ),
    ];
    for (kind, object, expected) in cases {
        let shared = shared_by(kind, &object);
        assert_eq!(
            shared.as_ref().map(|s| (s.who.as_ref(), s.fix)),
            expected,
            "{kind} {object}"
        );
        // Only a StatefulSet's names come back.
        assert_eq!(
            shared.is_some_and(|s| !s.name_is_own),
            kind == "StatefulSet",
            "{kind}"
        );
    }
}

#[test]
fn per_pod_sub_path_expressions() {
    let container = json!({"env": [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": "FIXED", "value": "x"},
        {"name": "SHADOWED", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "SHADOWED", "value": "same-for-all"},
    ]});
    for (expression, per_pod) in [
        ("$(POD_NAME)", true),
        ("jobs/$(UID)/work", true),
        ("$(NODE)", false),
        ("$(FIXED)", false),
        ("$(SHADOWED)", false),
        ("$$(POD_NAME)", false),
        ("$(MISSING)", false),
    ] {
        let mount = json!({"name": "v", "mountPath": "/x", "subPathExpr": expression});
        assert_eq!(is_per_pod(&container, &mount), per_pod, "{expression}");
    }
    assert!(!is_per_pod(&container, &json!({"subPath": "$(POD_NAME)"})));
}
