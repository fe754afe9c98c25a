//! The CEL matchConditions of the rendered webhook configurations, evaluated with a real
//! CEL implementation (the `cel` crate) against the objects the API server would send.
//!
//! The API server calls a webhook only when every matchCondition is true; an expression
//! that errors fails the request under failurePolicy: Fail. So each case also asserts
//! that no expression errors.

#[path = "support/deploy.rs"]
mod common;

use serde_json::{json, Value};

/// Evaluates every matchCondition of `webhook` for a request with `object` and
/// `oldObject`, as the API server does: called iff all are true.
fn calls_webhook(webhook: &Value, object: &Value, old_object: &Value) -> bool {
    let conditions = webhook["matchConditions"]
        .as_array()
        .expect("matchConditions");
    assert!(!conditions.is_empty());
    conditions.iter().all(|condition| {
        let name = condition["name"].as_str().unwrap();
        let expression = condition["expression"].as_str().unwrap();
        let program = cel::Program::compile(expression)
            .unwrap_or_else(|error| panic!("matchCondition {name} does not parse: {error}"));
        let mut context = cel::Context::default();
        context.add_variable("object", object).unwrap();
        context.add_variable("oldObject", old_object).unwrap();
        match program.execute(&context) {
            Ok(cel::Value::Bool(result)) => result,
            other => panic!("matchCondition {name} must give a bool, gave {other:?} for {object}"),
        }
    })
}

fn annotations(pairs: &[(&str, &str)]) -> Value {
    Value::Object(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

/// `kind` with `on_object` annotations on its metadata and `on_template` on its pod
/// template's metadata (`None`: the template has no metadata at all).
fn object(kind: &str, on_object: &[(&str, &str)], on_template: Option<&[(&str, &str)]>) -> Value {
    let mut metadata = json!({ "name": "demo", "namespace": "team-a" });
    if !on_object.is_empty() {
        metadata["annotations"] = annotations(on_object);
    }
    let pod_spec = json!({ "containers": [{ "name": "main", "image": "busybox" }] });
    let template = match on_template {
        Some(pairs) if !pairs.is_empty() => {
            json!({ "metadata": { "annotations": annotations(pairs) }, "spec": pod_spec })
        }
        Some(_) => json!({ "metadata": { "labels": { "app": "demo" } }, "spec": pod_spec }),
        None => json!({ "spec": pod_spec }),
    };
    let spec = match kind {
        "Pod" => pod_spec,
        "CronJob" => {
            json!({ "schedule": "* * * * *", "jobTemplate": { "spec": { "template": template } } })
        }
        _ => json!({ "template": template }),
    };
    json!({ "apiVersion": "v1", "kind": kind, "metadata": metadata, "spec": spec })
}

const CLEANUP: (&str, &str) = ("prestop-injector.io/cleanup", "auto");
const STATUS: (&str, &str) = (
    "prestop-injector.io/status",
    r#"{"version":1,"containers":["main"],"grace":40}"#,
);
const OPT_OUT: (&str, &str) = ("prestop-injector.io/inject", "false");
const OPT_IN: (&str, &str) = ("prestop-injector.io/inject", "true");
const FOREIGN: (&str, &str) = ("example.com/prestop-injector.io/cleanup", "auto");
const KINDS: [&str; 6] = [
    "Job",
    "CronJob",
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
];

type Annotations = &'static [(&'static str, &'static str)];
/// (what, object annotations, template annotations (`None`: no metadata), webhook called)
type Case = (&'static str, Annotations, Option<Annotations>, bool);

#[test]
fn cluster_wide_sends_only_annotated_objects_that_are_not_opted_out() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, "cluster-wide");
    let mutating = common::webhook(&objects, "MutatingWebhookConfiguration");
    // (what, object annotations, template annotations, webhook called)
    let cases: [Case; 10] = [
        ("annotated object", &[CLEANUP], Some(&[]), true),
        ("annotated template", &[], Some(&[CLEANUP]), true),
        ("no annotations", &[], Some(&[]), false),
        ("template without metadata", &[], None, false),
        (
            "only other annotations",
            &[FOREIGN],
            Some(&[("a", "b")]),
            false,
        ),
        ("status only on template", &[], Some(&[STATUS]), false),
        ("status only on object", &[STATUS], Some(&[]), false),
        ("opted out on object", &[OPT_OUT, CLEANUP], Some(&[]), false),
        ("opted out on template", &[CLEANUP], Some(&[OPT_OUT]), false),
        (
            "template opts back in",
            &[OPT_OUT, CLEANUP],
            Some(&[OPT_IN]),
            true,
        ),
    ];
    for kind in KINDS {
        for (what, on_object, on_template, expected) in cases {
            let object = object(kind, on_object, on_template);
            let called = calls_webhook(mutating, &object, &Value::Null);
            assert_eq!(called, expected, "{kind}: {what}");
        }
    }
    // A Pod is its own template.
    let pod_cases: [(&str, Annotations, bool); 5] = [
        ("annotated", &[CLEANUP], true),
        ("annotated and carrying status", &[CLEANUP, STATUS], true),
        (
            "created from a mutated template: status only",
            &[STATUS],
            false,
        ),
        ("no annotations", &[], false),
        ("opted out", &[CLEANUP, OPT_OUT], false),
    ];
    for (what, on_pod, expected) in pod_cases {
        let pod = object("Pod", on_pod, None);
        assert_eq!(
            calls_webhook(mutating, &pod, &Value::Null),
            expected,
            "Pod: {what}"
        );
    }
    // DELETE (never in these rules, but must not error): object is null.
    let old = object("Job", &[CLEANUP], Some(&[]));
    assert!(!calls_webhook(mutating, &Value::Null, &old));
}

#[test]
fn namespace_opt_in_sends_everything_but_opted_out_objects() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, "namespace-opt-in");
    let mutating = common::webhook(&objects, "MutatingWebhookConfiguration");
    let cases: [Case; 6] = [
        ("no annotations", &[], Some(&[]), true),
        ("template without metadata", &[], None, true),
        ("status only", &[], Some(&[STATUS]), true),
        ("opted out on object", &[OPT_OUT], Some(&[]), false),
        ("opted out on template", &[], Some(&[OPT_OUT]), false),
        ("template opts back in", &[OPT_OUT], Some(&[OPT_IN]), true),
    ];
    for kind in KINDS {
        for (what, on_object, on_template, expected) in cases {
            let object = object(kind, on_object, on_template);
            assert_eq!(
                calls_webhook(mutating, &object, &Value::Null),
                expected,
                "{kind}: {what}"
            );
        }
    }
    assert!(calls_webhook(
        mutating,
        &object("Pod", &[], None),
        &Value::Null
    ));
    assert!(!calls_webhook(
        mutating,
        &object("Pod", &[OPT_OUT], None),
        &Value::Null
    ));
}

#[test]
fn delete_guard_sees_only_jobs_we_mutated() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for overlay in common::OVERLAYS {
        let objects = common::render(&kubectl, overlay);
        let validating = common::webhook(&objects, "ValidatingWebhookConfiguration");
        // On DELETE `object` is null and the Job being deleted is `oldObject`.
        let cases: [Case; 5] = [
            ("status on template", &[], Some(&[CLEANUP, STATUS]), true),
            ("status on object", &[STATUS], Some(&[]), true),
            ("annotated but never mutated", &[CLEANUP], Some(&[]), false),
            ("no annotations", &[], Some(&[]), false),
            ("template without metadata", &[], None, false),
        ];
        for (what, on_object, on_template, expected) in cases {
            let old = object("Job", on_object, on_template);
            let called = calls_webhook(validating, &Value::Null, &old);
            assert_eq!(called, expected, "{overlay}: DELETE of a Job, {what}");
        }
        assert!(
            !calls_webhook(validating, &Value::Null, &Value::Null),
            "{overlay}"
        );
    }
}

#[test]
fn a_typo_in_an_expression_is_caught() {
    // The harness itself must fail on a misspelt field or function, not quietly pass.
    let broken = json!({ "matchConditions": [{
        "name": "typo",
        "expression": "object.metadata.annotations.exists(k, k.startswith('prestop-injector.io/'))",
    }]});
    let object = object("Job", &[CLEANUP], Some(&[]));
    let result = std::panic::catch_unwind(|| calls_webhook(&broken, &object, &Value::Null));
    assert!(
        result.is_err(),
        "an unknown function must fail the evaluation"
    );
}
