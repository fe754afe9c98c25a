//! Issue 9, classes 4 and 8: the cleanup sidecar's own mount list obeys the target rules, and the
//! sidecar is a container the API server, Pod Security `restricted` and the kubelet
//! accept (docs/DESIGN.md#the-sidecar).

mod core_support;
use core_support::test_config;
#[path = "support/deploy.rs"]
mod deploy;

use core_support::*;
use prestop_injector::mutation::hook::sidecar_targets;
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

const SIDECAR: &str = "prestop-injector.io/mode";

fn app(name: &str, mounts: Value) -> Value {
    json!({"name": name, "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1"],
           "securityContext": {"runAsUser": 1000, "runAsGroup": 3000}, "volumeMounts": mounts})
}

fn sidecar_job(cleanup: &str, containers: Value, volumes: Value) -> Value {
    let mut object = job(
        json!({"prestop-injector.io/cleanup": cleanup, SIDECAR: "sidecar"}),
        json!({}),
        volumes,
    );
    object["spec"]["template"]["spec"]["containers"] = containers;
    object
}

/// The generated sidecar (recognised by its command, as the core does).
fn sidecar_of(object: &Value) -> Option<&Value> {
    sidecar_in(template_spec(object))
}

fn sidecar_in(spec: &Value) -> Option<&Value> {
    spec.get("initContainers")?
        .as_array()?
        .iter()
        .find(|c| sidecar_argv(c).is_some())
}

fn sidecar_argv(container: &Value) -> Option<Vec<String>> {
    let argv: Vec<String> = serde_json::from_value(container.get("command")?.clone()).ok()?;
    sidecar_targets(&argv)
}

fn normalized(path: &str) -> String {
    let joined: Vec<&str> = path
        .split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    format!("/{}", joined.join("/"))
}

fn below(path: &str, base: &str) -> bool {
    path == base || base == "/" || path.starts_with(&format!("{base}/"))
}

/// docs/DESIGN.md#targets on the sidecar's mount list: no other mount at or below a target, one
/// mount per normalized path.
fn assert_mount_list_is_safe(sidecar: &Value) {
    let targets = sidecar_argv(sidecar).unwrap();
    let paths: Vec<String> = sidecar["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| normalized(m["mountPath"].as_str().unwrap()))
        .collect();
    for (i, path) in paths.iter().enumerate() {
        assert!(
            !paths[..i].contains(path),
            "two mounts at {path}: {sidecar}"
        );
    }
    for target in &targets {
        let own = paths
            .iter()
            .filter(|p| below(target, p))
            .max_by_key(|p| p.len())
            .unwrap_or_else(|| panic!("{target} is on no mount: {sidecar}"));
        for path in &paths {
            assert!(
                path == own || !below(path, target),
                "{path} is mounted inside the target {target}: {sidecar}"
            );
        }
    }
}

#[test]
fn class_4_a_volume_of_another_container_is_not_mounted_inside_a_sidecar_target() {
    for nested in ["/data/keep", "/data/keep/", "//data//keep", "/data/./keep"] {
        pvc_inside_the_target(nested);
    }
}

fn pvc_inside_the_target(nested: &str) {
    let containers = json!([
        app("a", json!([{"name": "host", "mountPath": "/data"}])),
        app("b", json!([{"name": "keep", "mountPath": nested}])),
    ]);
    // A PVC was the example before issue 17 class 5; a path on a PVC is no target any
    // more (below no allowed prefix), so b's own target is a hostPath elsewhere.
    let volumes = json!([
        host_path_volume("host", "/mnt/data"),
        host_path_volume("keep", "/mnt/scratch/keep")
    ]);
    let outcome = mutate(sidecar_job("/data,/data/keep", containers, volumes));
    let sidecar = sidecar_of(&outcome.patched).expect("a sidecar for container a");
    assert_mount_list_is_safe(sidecar);
    assert_eq!(
        sidecar["volumeMounts"],
        json!([{"name": "host", "mountPath": "/data"}])
    );
    // Container b keeps its own exec hook: in its own mount namespace /data/keep is the
    // PVC and nothing else is inside it, which is what its own check passed.
    assert_eq!(
        cleanup_targets(container(&outcome.patched, 1)),
        ["/data/keep"]
    );
    assert!(
        outcome
            .warnings()
            .contains("container \"b\": no cleanup sidecar: the sidecar would mount /data/keep inside the target /data"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn class_4_two_volumes_at_one_normalized_path_are_a_conflict() {
    let containers = json!([
        app("a", json!([{"name": "one", "mountPath": "/data"}])),
        app("b", json!([{"name": "two", "mountPath": "/data/"}])),
    ]);
    let volumes = json!([
        host_path_volume("one", "/mnt/data/one"),
        host_path_volume("two", "/mnt/data/two")
    ]);
    let outcome = mutate(sidecar_job("auto", containers, volumes));
    let sidecar = sidecar_of(&outcome.patched).expect("a sidecar for container a");
    assert_mount_list_is_safe(sidecar);
    assert_eq!(sidecar["volumeMounts"].as_array().unwrap().len(), 1);
    assert!(
        !pre_stop_argv(container(&outcome.patched, 1)).is_empty(),
        "b is cleaned by its own hook"
    );
    assert!(outcome.warnings().contains("another volume at /data"));
}

#[test]
fn class_4_an_identical_mount_of_two_containers_is_mounted_once() {
    let mount = json!([{"name": "host", "mountPath": "/data", "subPath": "x"}]);
    let containers = json!([app("a", mount.clone()), app("b", mount.clone())]);
    let outcome = mutate(sidecar_job(
        "auto",
        containers,
        json!([host_path_volume("host", "/mnt/data")]),
    ));
    let sidecar = sidecar_of(&outcome.patched).unwrap();
    assert_eq!(sidecar["volumeMounts"], mount);
    // The fixed directory may still be a replacement pod's (issue 31), and without a node
    // agent it is not cleaned.
    assert_eq!(
        outcome.decision.warnings,
        [
            replaced("a", "/data"),
            fixed_without_agent("a", "/data"),
            replaced("b", "/data"),
            fixed_without_agent("b", "/data"),
        ]
    );
}

fn restricted_fields(sidecar: &Value, uid: u64, gid: Option<u64>) {
    let security = &sidecar["securityContext"];
    assert_eq!(security["runAsNonRoot"], true, "{security}");
    assert_eq!(security["runAsUser"], uid, "{security}");
    assert_eq!(security.get("runAsGroup").and_then(Value::as_u64), gid);
    assert_eq!(
        security["seccompProfile"],
        json!({"type": "RuntimeDefault"})
    );
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security.get("privileged"), None);
}

fn per_pod_job() -> Value {
    let mut worker = app(
        "worker",
        json!([{"name": "host", "mountPath": "/scratch", "subPathExpr": "jobs/$(DIR)",
                "mountPropagation": "HostToContainer", "readOnly": false}]),
    );
    worker["env"] = json!([
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "DIR", "value": "$(POD_NAME)"},
    ]);
    sidecar_job(
        "auto",
        json!([worker]),
        json!([host_path_volume("host", "/mnt/scratch")]),
    )
}

#[test]
fn class_8_the_sidecar_copies_the_mount_exactly_with_the_env_it_references() {
    let outcome = mutate(per_pod_job());
    let sidecar = sidecar_of(&outcome.patched).unwrap();
    assert_eq!(
        sidecar["volumeMounts"],
        json!([{"name": "host", "mountPath": "/scratch", "subPathExpr": "jobs/$(DIR)",
                "mountPropagation": "HostToContainer", "readOnly": false}])
    );
    assert_eq!(
        sidecar["env"],
        json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "DIR", "value": "$(POD_NAME)"},
        ]),
        "only what the subPathExpr needs, in order; never the secret"
    );
    restricted_fields(sidecar, 1000, Some(3000));
}

#[test]
fn class_8_a_sub_path_expr_with_an_undefined_variable_gets_no_sidecar() {
    let mut object = per_pod_job();
    object["spec"]["template"]["spec"]["containers"][0]["env"] = json!([]);
    object["spec"]["template"]["spec"]["containers"][0]["envFrom"] =
        json!([{"configMapRef": {"name": "dirs"}}]);
    let outcome = mutate(object);
    assert!(sidecar_of(&outcome.patched).is_none());
    assert!(!pre_stop_argv(container(&outcome.patched, 0)).is_empty());
    assert!(outcome
        .warnings()
        .contains("$(DIR), which is not in its env"));
}

#[test]
fn class_8_the_sidecar_runs_as_the_pods_numeric_user_and_never_as_root() {
    // The pod's user when the container has none.
    let mut object = sidecar_job(
        "auto",
        json!([scratch_container()]),
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    );
    object["spec"]["template"]["spec"]["securityContext"] =
        json!({"runAsUser": 2000, "fsGroup": 2000});
    let outcome = mutate(object.clone());
    restricted_fields(sidecar_of(&outcome.patched).unwrap(), 2000, None);

    // Root or a user only the image knows: `restricted` and deleting the app's files
    // cannot both hold, so the container keeps an exec hook instead.
    for security in [json!({"runAsUser": 0}), json!({})] {
        object["spec"]["template"]["spec"]["securityContext"] = security.clone();
        let outcome = mutate(object.clone());
        assert!(sidecar_of(&outcome.patched).is_none(), "{security}");
        assert_eq!(
            cleanup_targets(container(&outcome.patched, 0)),
            ["/scratch"]
        );
        assert!(
            outcome.warnings().contains("no cleanup sidecar"),
            "{}",
            outcome.warnings()
        );
    }

    // And when no exec hook is possible either, the container is not cleaned.
    object["spec"]["template"]["spec"]["securityContext"] = json!({});
    object["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"httpGet": {"path": "/quit", "port": 8080}}});
    let outcome = mutate(object);
    assert!(sidecar_of(&outcome.patched).is_none());
    assert_eq!(
        template_spec(&outcome.patched)["containers"][0]["lifecycle"],
        json!({"preStop": {"httpGet": {"path": "/quit", "port": 8080}}})
    );
    assert!(
        outcome.warnings().contains("container \"app\" not cleaned"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn class_8_the_sidecar_takes_a_name_no_container_has() {
    let taken = |init: &[&str], apps: &[&str], ephemeral: &[&str]| {
        let named = |names: &[&str]| -> Vec<Value> {
            names
                .iter()
                .map(|n| json!({"name": n, "image": "busybox", "command": ["sh", "-c", "true"]}))
                .collect()
        };
        let mut containers = vec![app(
            "worker",
            json!([{"name": "scratch", "mountPath": "/scratch"}]),
        )];
        containers.extend(named(apps));
        let mut object = sidecar_job(
            "/scratch",
            json!(containers),
            json!([host_path_volume("scratch", "/mnt/scratch")]),
        );
        let spec = &mut object["spec"]["template"]["spec"];
        if !init.is_empty() {
            spec["initContainers"] = json!(named(init));
        }
        if !ephemeral.is_empty() {
            spec["ephemeralContainers"] = json!(named(ephemeral));
        }
        // mutate() also asserts that a second pass, which finds our sidecar by its
        // command under its new name, gives no patch.
        let outcome = mutate(object);
        let name = sidecar_of(&outcome.patched).unwrap()["name"].clone();
        assert_eq!(status(&outcome.patched).unwrap()["sidecar"], name);
        name
    };
    assert_eq!(taken(&[], &[], &[]), "prestop-cleanup");
    assert_eq!(taken(&[], &["prestop-cleanup"], &[]), "prestop-cleanup-2");
    assert_eq!(
        taken(&["prestop-cleanup"], &["prestop-cleanup-2"], &[]),
        "prestop-cleanup-3"
    );
    assert_eq!(
        taken(&[], &[], &["prestop-cleanup", "prestop-cleanup-2"]),
        "prestop-cleanup-3"
    );
}

#[test]
fn class_8_a_mutated_pod_with_the_sidecar_validates_and_meets_restricted() {
    let job = mutate(per_pod_job()).patched;
    let template = &job["spec"]["template"];
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "worker-abc12", "annotations": template["metadata"]["annotations"]},
        "spec": template["spec"]});
    let sidecar = sidecar_in(&pod["spec"]).unwrap();
    assert_eq!(sidecar["restartPolicy"], "Always");
    restricted_fields(sidecar, 1000, Some(3000));
    // Pod Security `restricted` also looks at the pod: the sidecar adds no hostPath
    // volume of its own, no host namespaces, no privileged or capability fields.
    assert_eq!(
        template_spec(&job)["volumes"],
        json!([host_path_volume("host", "/mnt/scratch")])
    );
    let Some(validator) = deploy::kubernetes_validate() else {
        return;
    };
    deploy::validate(&validator, "sidecar", &[job.clone(), pod]);
}

#[test]
fn class_8_the_auto_endpoint_keeps_the_sidecar_idempotent() {
    let outcome = mutate_with(Endpoint::MutateAuto, &test_config(), per_pod_job());
    assert!(sidecar_of(&outcome.patched).is_some());
}

/// The Pod of a mutated Job as it reaches us: the ServiceAccount admission plugin has
/// mounted the token into every container, init containers included, and the Job
/// controller of an Indexed Job has appended `JOB_COMPLETION_INDEX` to every env.
fn pod_as_admitted(job: &Value) -> Value {
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "worker-", "annotations": template["metadata"]["annotations"],
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-worker", "controller": true}]},
        "spec": template["spec"]});
    for key in ["initContainers", "containers"] {
        for container in pod["spec"][key].as_array_mut().unwrap() {
            let token = json!({"name": "kube-api-access-x2z9q", "readOnly": true,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
            container["volumeMounts"]
                .as_array_mut()
                .unwrap()
                .push(token);
            let index = json!({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef":
                {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}});
            match container.get_mut("env").and_then(Value::as_array_mut) {
                Some(env) => env.push(index),
                None => container["env"] = json!([index]),
            }
        }
    }
    pod
}

#[test]
fn class_8_what_admission_plugins_add_to_the_sidecar_is_kept() {
    let job = mutate(per_pod_job()).patched;
    let pod = pod_as_admitted(&job);
    assert!(sidecar_in(&pod["spec"]).is_some());
    for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
        let decision = prestop_injector::mutation::decide(
            &request(prestop_injector::admission::Operation::Create, pod.clone()),
            endpoint,
            &test_config(),
        );
        assert_eq!(decision.patch.map(|p| json!(p)), None, "{endpoint:?}");
    }
}

#[test]
fn class_4_a_mount_another_plugin_put_inside_a_sidecar_target_is_never_emptied() {
    // A webhook that ran before us mounted a volume into our sidecar inside its target:
    // the container falls back to its own exec hook (its mounts passed) and the sidecar
    // goes. Decided once: without that webhook the next pass would add the sidecar back.
    let job = mutate(per_pod_job()).patched;
    let mut pod = pod_as_admitted(&job);
    let init = &mut pod["spec"]["initContainers"][0];
    init["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "vault", "mountPath": "/scratch/secrets"}));
    let decision = prestop_injector::mutation::decide(
        &request(prestop_injector::admission::Operation::Create, pod.clone()),
        Endpoint::Mutate,
        &test_config(),
    );
    let mut patched = pod;
    json_patch::patch(
        &mut patched,
        &decision.patch.as_ref().unwrap().to_json_patch(),
    )
    .unwrap();
    assert!(sidecar_in(&patched["spec"]).is_none());
    assert_eq!(
        cleanup_targets(&patched["spec"]["containers"][0]),
        ["/scratch"]
    );
    let warnings = decision.warnings.join("\n");
    assert!(
        warnings.contains("the sidecar would mount /scratch/secrets inside the target /scratch"),
        "{warnings}"
    );
}
