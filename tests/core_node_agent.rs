//! Issue 26: with `nodeAgent` configured, every cleaner program the webhook injects (the
//! exec hook and the sidecar) is given the node agent's socket: a read-only hostPath
//! mount of the agent's directory and `--node-agent` in its argv. Nothing else changes;
//! without the key nothing of it is injected; our volume never becomes a target, a
//! finding or a use the rules trip on (docs/CONFIG.md#the-node-agent).

mod core_support;
#[path = "support/deploy.rs"]
mod deploy;

use core_support::*;
use prestop_injector::config::Config;
use prestop_injector::mutation::hook::{sidecar_targets, Hook};
use prestop_injector::mutation::inject::node_agent::{MOUNT_PATH, SOCKET, VOLUME_NAME};
use prestop_injector::mutation::targets::{check_target, container_mounts};
use prestop_injector::mutation::Endpoint;
use prestop_injector::reaper::derive::pod_facts;
use serde_json::{json, Value};

const HOST_DIRECTORY: &str = "/var/run/prestop-injector";

fn with_agent() -> Config {
    test_config_with(&format!("nodeAgent: {{hostDirectory: {HOST_DIRECTORY}}}\n"))
}

fn with_agent_and(yaml: &str) -> Config {
    test_config_with(&format!(
        "{yaml}\nnodeAgent: {{hostDirectory: {HOST_DIRECTORY}}}\n"
    ))
}

fn our_volume(name: &str) -> Value {
    json!({"name": name, "hostPath": {"path": HOST_DIRECTORY, "type": "DirectoryOrCreate"}})
}

fn our_mount(name: &str) -> Value {
    json!({"name": name, "mountPath": MOUNT_PATH, "readOnly": true})
}

fn argv_of(value: Option<&Value>) -> Vec<String> {
    value
        .map(|v| serde_json::from_value(v.clone()).expect("argv of strings"))
        .unwrap_or_default()
}

/// `object` with everything of the node agent taken out: our volume, our mounts, and the
/// `--node-agent SOCKET` pair in any argv.
fn without_agent(mut object: Value, volume: &str) -> Value {
    fn strip_argv(argv: &mut Value) {
        if let Some(list) = argv.as_array_mut() {
            if let Some(at) = list.iter().position(|a| a == "--node-agent") {
                list.drain(at..at + 2);
            }
        }
    }
    let spec = object
        .pointer_mut("/spec/template/spec")
        .expect("template spec");
    if let Some(volumes) = spec["volumes"].as_array_mut() {
        volumes.retain(|v| v["name"] != volume);
    }
    for key in ["containers", "initContainers"] {
        for container in spec[key].as_array_mut().into_iter().flatten() {
            if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                mounts.retain(|m| m != &our_mount(volume));
            }
            if let Some(argv) = container.pointer_mut("/lifecycle/preStop/exec/command") {
                strip_argv(argv);
            }
            if let Some(argv) = container.get_mut("command") {
                strip_argv(argv);
            }
        }
    }
    object
}

fn exec_job() -> Value {
    scratch_job(json!({"prestop-injector.io/cleanup": "/scratch"}))
}

fn sidecar_job() -> Value {
    let mut container = scratch_container();
    container["securityContext"] = json!({"runAsUser": 1000, "runAsGroup": 3000});
    job(
        json!({"prestop-injector.io/cleanup": "/scratch", "prestop-injector.io/mode": "sidecar"}),
        container,
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    )
}

fn our_sidecar(object: &Value) -> &Value {
    template_spec(object)["initContainers"]
        .as_array()
        .and_then(|list| {
            list.iter()
                .find(|c| sidecar_targets(&argv_of(c.get("command"))).is_some())
        })
        .expect("our sidecar")
}

#[test]
fn node_agent_socket_is_given_to_the_exec_hook() {
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), exec_job());
    assert_eq!(outcome.decision.denial, None);
    let spec = template_spec(&outcome.patched);
    let volumes = spec["volumes"].as_array().expect("volumes");
    assert!(volumes.contains(&our_volume(VOLUME_NAME)), "{volumes:?}");
    let app = container(&outcome.patched, 0);
    assert!(
        app["volumeMounts"]
            .as_array()
            .unwrap()
            .contains(&our_mount(VOLUME_NAME)),
        "{app}"
    );
    let argv = pre_stop_argv(app);
    assert_eq!(
        argv[1..6],
        strings(&["hook", "--deadline", "38", "--node-agent", SOCKET])[..]
    );
    assert_eq!(cleanup_targets(app), ["/scratch"]);
    // Only what the feature needs: the same patch as without the key, plus the volume,
    // the mount and the option.
    let plain = mutate_with(Endpoint::Mutate, &test_config(), exec_job());
    assert_eq!(
        without_agent(outcome.patched.clone(), VOLUME_NAME),
        plain.patched
    );
    // The same warnings, and the one the plain pod gets for having no agent to ask.
    assert_eq!(
        plain.decision.warnings,
        [
            outcome.decision.warnings.clone(),
            vec![fixed_without_agent("app", "/scratch")]
        ]
        .concat()
    );
    // Its operations are the plain patch's, plus one add each for the mount and volume.
    let plain_paths = plain.paths();
    let added: Vec<String> = outcome
        .paths()
        .into_iter()
        .filter(|p| !plain_paths.contains(p))
        .collect();
    assert_eq!(
        added,
        [
            "/spec/template/spec/containers/0/volumeMounts/2",
            "/spec/template/spec/volumes/2"
        ]
    );
}

#[test]
fn nothing_of_the_node_agent_is_injected_without_the_key() {
    for object in [exec_job(), sidecar_job()] {
        let outcome = mutate_with(Endpoint::Mutate, &test_config(), object);
        let text = outcome.patched.to_string();
        assert!(text.contains("prestop-clean"), "injected: {text}");
        assert!(!text.contains("--node-agent"), "{text}");
        assert!(!text.contains(MOUNT_PATH), "{text}");
        assert!(!text.contains(HOST_DIRECTORY), "{text}");
    }
}

#[test]
fn node_agent_injection_is_idempotent_and_follows_the_config() {
    for object in [exec_job(), sidecar_job()] {
        // `mutate_with` asserts that a second pass with the key yields no patch.
        let on = mutate_with(Endpoint::Mutate, &with_agent(), object.clone());
        let off = mutate_with(Endpoint::Mutate, &test_config(), object);
        // Turned off later (an UPDATE seen by a webhook without the key): all of it goes.
        let turned_off = mutate_with(Endpoint::Mutate, &test_config(), on.patched.clone());
        assert_eq!(turned_off.patched, off.patched);
        // Turned on later: the same as injected with it from the start.
        let turned_on = mutate_with(Endpoint::Mutate, &with_agent(), off.patched.clone());
        assert_eq!(turned_on.patched, on.patched);
    }
}

#[test]
fn a_users_volume_with_our_name_is_never_overwritten() {
    let mut object = exec_job();
    let spec = object.pointer_mut("/spec/template/spec").unwrap();
    let users = json!({"name": VOLUME_NAME, "emptyDir": {}});
    let users_mount = json!({"name": VOLUME_NAME, "mountPath": "/cache"});
    spec["volumes"].as_array_mut().unwrap().push(users.clone());
    spec["containers"][0]["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(users_mount.clone());
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), object);
    let spec = template_spec(&outcome.patched);
    let ours = format!("{VOLUME_NAME}-2");
    let volumes = spec["volumes"].as_array().unwrap();
    assert!(volumes.contains(&users), "{volumes:?}");
    assert!(volumes.contains(&our_volume(&ours)), "{volumes:?}");
    let mounts = spec["containers"][0]["volumeMounts"].as_array().unwrap();
    assert!(mounts.contains(&users_mount), "{mounts:?}");
    assert!(mounts.contains(&our_mount(&ours)), "{mounts:?}");
    // Turned off, ours goes and the user's stays.
    let off = mutate_with(Endpoint::Mutate, &test_config(), outcome.patched.clone());
    let spec = template_spec(&off.patched);
    assert_eq!(spec["volumes"].as_array().unwrap().len(), 3, "{spec}");
    assert!(spec["volumes"].as_array().unwrap().contains(&users));
    assert!(!off.patched.to_string().contains(&ours));
}

#[test]
fn a_mount_in_the_way_of_the_socket_keeps_the_strict_rule() {
    // The container's own mount at, above or below the socket's directory could answer
    // for the agent: that container is not told to ask, and gets no mount of ours.
    for mount_path in [
        MOUNT_PATH,
        "/.prestop-injector-node/x",
        "/.prestop-injector-node/",
    ] {
        let mut object = exec_job();
        let spec = object.pointer_mut("/spec/template/spec").unwrap();
        spec["volumes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "fake", "emptyDir": {}}));
        spec["containers"][0]["volumeMounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "fake", "mountPath": mount_path}));
        let outcome = mutate_with(Endpoint::Mutate, &with_agent(), object);
        let app = container(&outcome.patched, 0);
        assert_eq!(cleanup_targets(app), ["/scratch"], "{mount_path}");
        let text = template_spec(&outcome.patched).to_string();
        assert!(!text.contains("--node-agent"), "{mount_path}: {text}");
        assert!(!text.contains(HOST_DIRECTORY), "{mount_path}: {text}");
    }
}

#[test]
fn the_sidecar_asks_the_node_agent() {
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), sidecar_job());
    let sidecar = our_sidecar(&outcome.patched);
    let argv = argv_of(sidecar.get("command"));
    assert_eq!(
        argv[1..6],
        strings(&["sidecar", "--deadline", "28", "--node-agent", SOCKET])[..]
    );
    assert_eq!(sidecar_targets(&argv), Some(strings(&["/scratch"])));
    let mounts = sidecar["volumeMounts"].as_array().unwrap();
    assert!(mounts.contains(&our_mount(VOLUME_NAME)), "{mounts:?}");
    let spec = template_spec(&outcome.patched);
    assert!(spec["volumes"]
        .as_array()
        .unwrap()
        .contains(&our_volume(VOLUME_NAME)));
    // The app container runs no program of ours: no mount of the agent there.
    assert!(!container(&outcome.patched, 0)
        .to_string()
        .contains(MOUNT_PATH));
    let plain = mutate_with(Endpoint::Mutate, &test_config(), sidecar_job());
    assert_eq!(
        without_agent(outcome.patched.clone(), VOLUME_NAME),
        plain.patched
    );
}

#[test]
fn the_shell_form_never_asks_the_node_agent() {
    for object in [exec_job(), sidecar_job()] {
        let outcome = mutate_with(
            Endpoint::Mutate,
            &with_agent_and("cleaner: {mode: shell}"),
            object.clone(),
        );
        let plain = mutate_with(Endpoint::Mutate, &shell_mode(), object);
        assert_eq!(outcome.patched, plain.patched);
    }
}

#[test]
fn our_volume_is_never_a_target_nor_a_finding() {
    // `auto` on the injected template: the same targets, no warning about our volume.
    let auto = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), auto.clone());
    let plain = mutate_with(Endpoint::Mutate, &test_config(), auto);
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 0)),
        ["/scratch"]
    );
    assert_eq!(
        plain.decision.warnings,
        [
            outcome.decision.warnings.clone(),
            vec![fixed_without_agent("app", "/scratch")]
        ]
        .concat()
    );
    // Asked for by name, the socket's directory is refused: it is read-only, and no
    // prefix may reach it (even one built in code that allows every host path).
    // The core's functions read its own model.
    let patched = prestop_injector::json::Value::from(outcome.patched.clone());
    let spec = &patched["spec"]["template"]["spec"];
    let mounts = container_mounts(&spec["containers"][0]).expect("mounts");
    for config in [with_agent(), protected_list_only()] {
        let refused = check_target(spec, &mounts, MOUNT_PATH, &config);
        assert!(refused.is_err(), "{refused:?}");
        assert!(
            check_target(spec, &mounts, "/scratch", &config).is_ok(),
            "our volume is in the way of the real target"
        );
    }
}

#[test]
fn the_reaper_still_derives_the_targets_of_an_agent_asking_pod() {
    let mut config = Config::from_yaml(&format!(
        "allowedHostPathPrefixes: [/mnt/scratch]\nnodeAgent: {{hostDirectory: {HOST_DIRECTORY}}}\n"
    ))
    .unwrap();
    // The reaper acts only on what the webhook sealed (docs/REAPER.md#the-seal).
    config.seal = prestop_injector::seal_keys::SealKeys::parse(&"ab".repeat(32)).unwrap();
    for object in [exec_job(), sidecar_job()] {
        let injected = mutate_with(Endpoint::Mutate, &config, object).patched;
        assert!(injected.to_string().contains("--node-agent"), "{injected}");
        let template = &injected["spec"]["template"];
        let mut metadata = template["metadata"].clone();
        metadata["name"] = json!("job-worker-abcde");
        // The namespace the webhook sealed it for (the request's).
        metadata["namespace"] = json!("default");
        metadata["uid"] = json!("uid-1");
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                         "spec": template["spec"]});
        let facts = pod_facts(&pod.into(), &config).expect("a pod with a uid");
        assert_eq!(facts.cleanable, ["/mnt/scratch"]);
        assert!(facts.refused.is_empty(), "{:?}", facts.refused);
        // The agent's directory is a use like any hostPath, and trips nothing.
        assert!(facts.uses.iter().any(|u| u.known == HOST_DIRECTORY));
    }
}

#[test]
fn hooks_of_agent_asking_pods_read_back_as_ours() {
    let outcome = mutate_with(Endpoint::Mutate, &with_agent(), exec_job());
    let argv = pre_stop_argv(container(&outcome.patched, 0));
    let hook = Hook::from_argv(&argv).expect("ours");
    assert_eq!(hook.to_program_argv_until(Some(38), Some(SOCKET)), argv);
}

/// What the API server will be sent: the mutated Job, and a Pod of its template, for both
/// forms, validate strictly against the Kubernetes schema (an unknown or misplaced field of
/// ours would be rejected there, or dropped by a lenient server).
#[test]
fn pods_asking_the_node_agent_validate_strictly() {
    let mut objects = Vec::new();
    for object in [exec_job(), sidecar_job()] {
        let job = mutate_with(Endpoint::Mutate, &with_agent(), object).patched;
        let template = &job["spec"]["template"];
        objects.push(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "worker-abc12", "annotations": template["metadata"]["annotations"]},
            "spec": template["spec"]}));
        objects.push(job);
    }
    let Some(validator) = deploy::kubernetes_validate() else {
        return;
    };
    deploy::validate(&validator, "node-agent", &objects);
}
