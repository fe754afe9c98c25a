//! docs/CLEANUP.md#the-deadline: the `--deadline` the webhook renders into the program's
//! argv follows the pod's final grace period (the kubelet's kill) minus the margin for
//! the report, and hooks of the release before it are still recognised as ours.

mod core_support;

use core_support::*;
use prestop_injector::mutation::hook::{Hook, PROGRAM};
use serde_json::{json, Value};

fn job_with(annotations: Value, grace: Option<u64>) -> Value {
    let mut object = scratch_job(annotations);
    object["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"exec": {"command": ["/bin/drain", "--wait"]}}});
    if let Some(grace) = grace {
        object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(grace);
    }
    object
}

fn deadline_of(argv: &[String]) -> Option<&str> {
    match argv {
        [_, _, flag, seconds, ..] if flag == "--deadline" => Some(seconds),
        _ => None,
    }
}

fn grace_of(object: &Value) -> u64 {
    template_spec(object)["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap()
}

#[test]
fn the_deadline_is_the_grace_period_minus_the_margin_for_the_report() {
    let cases = [
        // The webhook's own grace period: the budget and the shutdown (40 s).
        (None, "38"),
        // A larger grace period of the user's own: the kill comes later, so does the stop.
        (Some(600), "598"),
    ];
    for (grace, expected) in cases {
        let outcome = mutate(job_with(
            json!({"prestop-injector.io/cleanup": "auto"}),
            grace,
        ));
        let argv = pre_stop_argv(container(&outcome.patched, 0));
        assert_eq!(argv[..2], [PROGRAM, "hook"], "{argv:?}");
        assert_eq!(deadline_of(&argv), Some(expected), "{argv:?}");
        assert_eq!(
            grace_of(&outcome.patched) - 2,
            expected.parse::<u64>().unwrap()
        );
        // The user's handler stays last, untouched.
        assert_eq!(argv[argv.len() - 3..], ["--", "/bin/drain", "--wait"]);
    }
}

#[test]
fn a_grace_period_capped_by_max_grace_seconds_moves_the_deadline_with_it() {
    // Raised from the user's 5 s towards the 40 s it needs, and capped at 12 s.
    let config = test_config_with("maxGraceSeconds: 12\n");
    let object = job_with(json!({"prestop-injector.io/cleanup": "auto"}), Some(5));
    let outcome = mutate_with(
        prestop_injector::mutation::Endpoint::Mutate,
        &config,
        object,
    );
    assert_eq!(grace_of(&outcome.patched), 12);
    let argv = pre_stop_argv(container(&outcome.patched, 0));
    assert_eq!(deadline_of(&argv), Some("10"), "{argv:?}");
}

#[test]
fn a_grace_period_without_room_for_the_margin_renders_no_deadline() {
    let config = test_config_with("maxGraceSeconds: 2\n");
    let object = job_with(json!({"prestop-injector.io/cleanup": "auto"}), Some(2));
    let outcome = mutate_with(
        prestop_injector::mutation::Endpoint::Mutate,
        &config,
        object,
    );
    assert_eq!(grace_of(&outcome.patched), 2);
    let argv = pre_stop_argv(container(&outcome.patched, 0));
    assert_eq!(argv[..2], [PROGRAM, "hook"], "{argv:?}");
    assert_eq!(deadline_of(&argv), None, "{argv:?}");
}

/// A pod template injected by the previous release (its hook without `--deadline`) is
/// still recognised as ours, never wrapped again, and comes back with the deadline.
#[test]
fn a_hook_of_the_previous_release_is_recognised_and_given_its_deadline() {
    let fresh = mutate(job_with(
        json!({"prestop-injector.io/cleanup": "auto"}),
        None,
    ))
    .patched;
    let mut old = fresh.clone();
    let argv = pre_stop_argv(container(&old, 0));
    let mut without: Vec<String> = argv.clone();
    without.drain(2..4);
    assert!(!without.contains(&"--deadline".to_owned()));
    let hook = Hook::from_argv(&without).expect("the previous release's hook is ours");
    assert_eq!(Hook::from_argv(&argv), Some(hook));
    old["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]["exec"]["command"] =
        json!(without);
    let again = mutate(old).patched;
    assert_eq!(pre_stop_argv(container(&again, 0)), argv);
    assert_eq!(template_spec(&again), template_spec(&fresh));
}

#[test]
fn the_sidecar_stops_within_its_own_budget() {
    let mut object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
    );
    // A numeric non-root user: the sidecar meets Pod Security `restricted`.
    object["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 1000});
    let outcome = mutate(object);
    let init = template_spec(&outcome.patched)["initContainers"]
        .as_array()
        .unwrap();
    let sidecar = init
        .iter()
        .find(|c| c["name"] == prestop_injector::mutation::SIDECAR_NAME)
        .expect("the sidecar");
    // Signalled after the app containers stopped: its share is cleanupBudgetSeconds (30).
    assert_eq!(sidecar["command"][2], "--deadline");
    assert_eq!(sidecar["command"][3], "28");
}
