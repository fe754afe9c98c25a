//! Issue 17, class 10: sidecar order (docs/DESIGN.md#the-sidecar). Native sidecars stop in reverse
//! order, so a cleanup sidecar appended last stops first and empties what a user's uploader
//! sidecar was about to ship. It goes before every user native sidecar, stays there on
//! every pass, and gets there by a targeted `add` (or `remove` + `add`) at an index.

mod core_support;

use core_support::*;
use prestop_injector::config::Config;
use prestop_injector::json::patch::PatchOperation;
use prestop_injector::mutation::hook::sidecar_targets;
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

fn config() -> Config {
    Config::from_yaml("allowedHostPathPrefixes: [/scratch]\n").unwrap()
}

fn init(name: &str, native: bool) -> Value {
    let mut container =
        json!({"name": name, "image": "busybox:1.36", "command": ["sh", "-c", "true"]});
    if native {
        container["restartPolicy"] = json!("Always");
    }
    container
}

/// A sidecar-mode Job cleaning `/scratch`, with `init` as its init containers.
fn job_with_init(init: Value) -> Value {
    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "/scratch",
        "prestop-injector.io/mode": "sidecar"}));
    object["spec"]["template"]["spec"]["volumes"] =
        json!([host_path_volume("scratch", "/scratch/run")]);
    object["spec"]["template"]["spec"]["containers"][0]["securityContext"] =
        json!({"runAsUser": 1000});
    object["spec"]["template"]["spec"]["initContainers"] = init;
    object
}

fn names(object: &Value) -> Vec<String> {
    template_spec(object)["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let ours = serde_json::from_value(c["command"].clone())
                .ok()
                .and_then(|argv: Vec<String>| sidecar_targets(&argv))
                .is_some();
            if ours {
                "OURS".to_owned()
            } else {
                c["name"].as_str().unwrap().to_owned()
            }
        })
        .collect()
}

fn init_operations(outcome: &Outcome) -> Vec<(&'static str, String)> {
    outcome
        .decision
        .patch
        .iter()
        .flat_map(|p| p.0.iter())
        .filter(|op| {
            op.path()
                .to_string()
                .starts_with("/spec/template/spec/initContainers")
        })
        .map(|op| {
            let kind = match op {
                PatchOperation::Add(_) => "add",
                PatchOperation::Remove(_) => "remove",
                PatchOperation::Replace(_) => "replace",
            };
            (kind, op.path().to_string())
        })
        .collect()
}

#[test]
fn sidecar_stops_after_user_sidecars() {
    let user = json!([
        init("fetch", false),
        init("uploader", true),
        init("prepare", false),
        init("metrics", true)
    ]);
    let outcome = mutate_with(Endpoint::Mutate, &config(), job_with_init(user));
    assert_eq!(outcome.decision.denial, None);
    assert_eq!(
        names(&outcome.patched),
        ["fetch", "OURS", "uploader", "prepare", "metrics"]
    );
    assert_eq!(
        init_operations(&outcome),
        [("add", "/spec/template/spec/initContainers/1".to_owned())]
    );
    // Without user sidecars it goes last; without init containers the list is new.
    let plain = mutate_with(
        Endpoint::Mutate,
        &config(),
        job_with_init(json!([init("fetch", false)])),
    );
    assert_eq!(names(&plain.patched), ["fetch", "OURS"]);
    let none = mutate_with(Endpoint::Mutate, &config(), job_with_init(json!([])));
    assert_eq!(names(&none.patched), ["OURS"]);
}

/// A user sidecar added in front of ours later (a Deployment UPDATE, another webhook):
/// the next pass moves ours before it, by index, touching no user container.
#[test]
fn sidecar_stops_after_user_sidecars_added_later() {
    let first = mutate_with(
        Endpoint::Mutate,
        &config(),
        job_with_init(json!([init("fetch", false), init("uploader", true)])),
    );
    assert_eq!(names(&first.patched), ["fetch", "OURS", "uploader"]);
    let mut updated = first.patched.clone();
    let list = updated["spec"]["template"]["spec"]["initContainers"]
        .as_array_mut()
        .unwrap();
    list.insert(0, init("proxy", true));
    let second = mutate_with(Endpoint::Mutate, &config(), updated);
    assert_eq!(
        names(&second.patched),
        ["OURS", "proxy", "fetch", "uploader"]
    );
    let operations = init_operations(&second);
    assert!(
        operations.iter().all(|(kind, _)| *kind != "replace"),
        "{operations:?}"
    );
    assert_eq!(operations.len(), 2, "{operations:?}");
}
