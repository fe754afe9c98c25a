//! docs/DESIGN.md#scope: which kinds carry a pod template, where it is, and for which operations.

use crate::mutation::request::{GroupVersionKind, Operation};

/// A kind we mutate and where its pod template lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    pub kind: &'static str,
    /// JSON Pointer of the pod template; `""` when the object is the pod itself.
    pub template: &'static str,
    /// JSON Pointer of `ttlSecondsAfterFinished`'s parent for Jobs and CronJobs.
    pub job_spec: Option<&'static str>,
    pub on_update: bool,
}

const WORKLOADS: &[(&str, Workload)] = &[
    (
        "batch",
        Workload {
            kind: "Job",
            template: "/spec/template",
            job_spec: Some("/spec"),
            on_update: false,
        },
    ),
    (
        "batch",
        Workload {
            kind: "CronJob",
            template: "/spec/jobTemplate/spec/template",
            job_spec: Some("/spec/jobTemplate/spec"),
            on_update: true,
        },
    ),
    (
        "",
        Workload {
            kind: "Pod",
            template: "",
            job_spec: None,
            on_update: false,
        },
    ),
    (
        "apps",
        Workload {
            kind: "Deployment",
            template: "/spec/template",
            job_spec: None,
            on_update: true,
        },
    ),
    (
        "apps",
        Workload {
            kind: "StatefulSet",
            template: "/spec/template",
            job_spec: None,
            on_update: true,
        },
    ),
    (
        "apps",
        Workload {
            kind: "DaemonSet",
            template: "/spec/template",
            job_spec: None,
            on_update: true,
        },
    ),
    (
        "apps",
        Workload {
            kind: "ReplicaSet",
            template: "/spec/template",
            job_spec: None,
            on_update: true,
        },
    ),
];

/// The workload for a request, or `None` when the kind, version or operation is not ours.
pub fn find(kind: &GroupVersionKind, operation: Operation) -> Option<&'static Workload> {
    if kind.version != "v1" {
        return None;
    }
    let (_, workload) = WORKLOADS
        .iter()
        .find(|(group, workload)| *group == kind.group && workload.kind == kind.kind)?;
    match operation {
        Operation::Create => Some(workload),
        Operation::Update if workload.on_update => Some(workload),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
        GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn the_spec_table() {
        use Operation::*;
        let cases = [
            ("batch", "Job", Create, Some("/spec/template")),
            ("batch", "Job", Update, None),
            (
                "batch",
                "CronJob",
                Create,
                Some("/spec/jobTemplate/spec/template"),
            ),
            (
                "batch",
                "CronJob",
                Update,
                Some("/spec/jobTemplate/spec/template"),
            ),
            ("", "Pod", Create, Some("")),
            ("", "Pod", Update, None),
            ("apps", "Deployment", Update, Some("/spec/template")),
            ("apps", "StatefulSet", Create, Some("/spec/template")),
            ("apps", "DaemonSet", Update, Some("/spec/template")),
            ("apps", "ReplicaSet", Create, Some("/spec/template")),
            ("apps", "Deployment", Delete, None),
            ("batch", "Job", Delete, None),
            ("batch", "Job", Connect, None),
            ("", "ConfigMap", Create, None),
            ("apps", "Job", Create, None),
            ("example.com", "Deployment", Create, None),
        ];
        for (group, kind, operation, template) in cases {
            assert_eq!(
                find(&gvk(group, "v1", kind), operation).map(|w| w.template),
                template,
                "{group}/{kind} {operation:?}"
            );
        }
        assert_eq!(find(&gvk("batch", "v1beta1", "CronJob"), Create), None);
    }
}
