//! docs/DESIGN.md, the hook and the sidecar: the cleaner program in the mutation — delivery by the
//! installer init container, shell-less images, names already taken, mounts in the way, migration
//! from the v1 shell hook and the busybox sidecar, `cleaner.mode: shell`, and the API server's
//! defaults.

mod core_support;
use core_support::test_config_with;

use core_support::*;
use prestop_injector::config::DEFAULT_CLEANER_IMAGE;
use prestop_injector::mutation::hook::{Action, Before, Hook, IMAGE_PROGRAM, PROGRAM};
use prestop_injector::mutation::inject::delivery::{INSTALLER_NAME, VOLUME_NAME};
use prestop_injector::mutation::{Endpoint, SIDECAR_NAME};
use serde_json::{json, Value};

fn seed_job() -> Value {
    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    object["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"exec": {"command": ["/bin/echo", "bye"]}}});
    object
}

fn spec_mut(object: &mut Value) -> &mut Value {
    &mut object["spec"]["template"]["spec"]
}

#[test]
fn v1_shell_hooks_are_rebuilt_into_program_hooks_never_wrapped() {
    let v1 = mutate_with(Endpoint::Mutate, &shell_mode(), seed_job()).patched;
    let v1_argv = pre_stop_argv(container(&v1, 0));
    assert_eq!(v1_argv[1], "-c", "the shell form: {v1_argv:?}");
    assert_eq!(template_spec(&v1).get("initContainers"), None);

    let outcome = mutate(v1.clone());
    assert_eq!(
        pre_stop_argv(container(&outcome.patched, 0)),
        [
            PROGRAM,
            "hook",
            "--deadline",
            "38",
            "--target",
            "/scratch",
            "--host",
            "/mnt/scratch",
            "--whole-filesystem",
            "--",
            "/bin/echo",
            "bye"
        ]
    );
    assert_delivered(&outcome.patched, &[0]);
    assert_targeted(&outcome);
    // The same result as injecting into the fresh object.
    assert_eq!(
        template_spec(&outcome.patched),
        template_spec(&mutate(seed_job()).patched)
    );

    // cleanup: off gives the user's hook back from either form.
    for injected in [v1, mutate(seed_job()).patched] {
        let mut off = injected;
        off["metadata"]["annotations"]["prestop-injector.io/cleanup"] = json!("off");
        let outcome = mutate(off);
        assert_eq!(
            template_spec(&outcome.patched)["containers"][0],
            template_spec(&seed_job())["containers"][0]
        );
        assert_eq!(template_spec(&outcome.patched).get("initContainers"), None);
        assert_eq!(
            template_spec(&outcome.patched)["volumes"],
            template_spec(&seed_job())["volumes"]
        );
    }
}

#[test]
fn switching_to_shell_mode_takes_the_delivery_back_out() {
    let injected = mutate(seed_job()).patched;
    let outcome = mutate_with(Endpoint::Mutate, &shell_mode(), injected);
    let spec = template_spec(&outcome.patched);
    assert_eq!(spec.get("initContainers"), None);
    assert_eq!(spec["volumes"], template_spec(&seed_job())["volumes"]);
    let hook = Hook::from_argv(&pre_stop_argv(container(&outcome.patched, 0))).unwrap();
    assert_eq!(
        hook.before,
        Before::Exec(vec!["/bin/echo".into(), "bye".into()])
    );
    assert_eq!(hook.shell, "/bin/sh");
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        template_spec(&seed_job())["containers"][0]["volumeMounts"]
    );
}

#[test]
fn the_busybox_sidecar_is_replaced_by_the_program() {
    let mut sidecar_job = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
    );
    // A numeric non-root user: the sidecar meets Pod Security `restricted`.
    sidecar_job["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 1000});
    let old = mutate_with(Endpoint::Mutate, &shell_mode(), sidecar_job.clone()).patched;
    assert_eq!(
        template_spec(&old)["initContainers"][0]["image"],
        "busybox:1.37.0"
    );
    let outcome = mutate(old);
    let init = template_spec(&outcome.patched)["initContainers"]
        .as_array()
        .unwrap();
    assert_eq!(init.len(), 1, "{init:?}");
    assert_eq!(init[0]["name"], SIDECAR_NAME);
    assert_eq!(init[0]["image"], DEFAULT_CLEANER_IMAGE);
    assert_eq!(
        init[0]["command"],
        json!([
            IMAGE_PROGRAM,
            "sidecar",
            "--deadline",
            "28",
            "--target",
            "/scratch",
            "--host",
            "/mnt/scratch",
            "--whole-filesystem"
        ])
    );
    assert_eq!(
        template_spec(&outcome.patched),
        template_spec(&mutate(sidecar_job).patched)
    );
}

#[test]
fn names_in_use_get_a_suffix_and_the_user_init_containers_stay_put() {
    let mut object = seed_job();
    let spec = spec_mut(&mut object);
    spec["initContainers"] = json!([
        {"name": INSTALLER_NAME, "image": "busybox:1.36", "command": ["bash", "-c", "echo setup"]},
        {"name": "second", "image": "alpine:3"}
    ]);
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": VOLUME_NAME, "emptyDir": {}}));
    let outcome = mutate(object.clone());
    let spec = template_spec(&outcome.patched);
    assert_delivered(&outcome.patched, &[0]);
    assert_eq!(spec["initContainers"][0]["name"], "prestop-install-2");
    assert_eq!(
        spec["initContainers"][0]["volumeMounts"][0]["name"],
        "prestop-clean-2"
    );
    // The user's own: the shell fix rewrote one word, nothing else moved.
    assert_eq!(spec["initContainers"][1]["name"], INSTALLER_NAME);
    assert_eq!(spec["initContainers"][1]["command"][0], "/bin/sh");
    assert_eq!(
        spec["initContainers"][2],
        template_spec(&object)["initContainers"][1]
    );
    assert_eq!(
        spec["volumes"][1],
        json!({"name": VOLUME_NAME, "emptyDir": {}})
    );
    let paths = outcome.paths();
    assert!(
        paths.contains(&"/spec/template/spec/initContainers/0".to_owned()),
        "{paths:?}"
    );
    for path in &paths {
        if let Some(rest) = path.strip_prefix("/spec/template/spec/initContainers/") {
            assert!(
                rest == "0" || rest == "1/command/0",
                "only the add and the shell fix: {paths:?}"
            );
        }
    }
    assert_targeted(&outcome);
}

#[test]
fn a_container_with_a_mount_where_the_program_goes_is_not_cleaned() {
    for mount_path in ["/.prestop-injector", "/.prestop-injector/x", "/"] {
        let mut object = seed_job();
        let spec = spec_mut(&mut object);
        // On a directory of its own: one that "app" also mounts is cleaned by neither
        // exec hook (core_directory_users).
        let mut second = scratch_container();
        second["name"] = json!("second");
        second["volumeMounts"][0]["name"] = json!("work");
        spec["containers"].as_array_mut().unwrap().push(second);
        spec["containers"][0]["volumeMounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "tools", "mountPath": mount_path}));
        let volumes = spec["volumes"].as_array_mut().unwrap();
        volumes.push(json!({"name": "tools", "emptyDir": {}}));
        volumes.push(host_path_volume("work", "/mnt/work"));
        let outcome = mutate(object.clone());
        assert!(
            outcome.warnings().contains(&format!(
                "container \"app\" not cleaned: it mounts {mount_path}"
            )),
            "{}",
            outcome.warnings()
        );
        assert_eq!(
            template_spec(&outcome.patched)["containers"][0],
            template_spec(&object)["containers"][0],
            "{mount_path}: untouched"
        );
        assert_delivered(&outcome.patched, &[1]);
        assert_eq!(
            status(&outcome.patched).unwrap()["containers"],
            json!(["second"])
        );
    }
}

#[test]
fn api_server_defaults_on_the_installer_cause_no_second_patch() {
    let mut object = seed_job();
    object["spec"]["template"]["metadata"] =
        json!({"annotations": {"prestop-injector.io/cleanup": "auto"}});
    let job = mutate(object).patched;
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]});
    let installer = &mut pod["spec"]["initContainers"][0];
    installer["imagePullPolicy"] = json!("IfNotPresent");
    installer["terminationMessagePath"] = json!("/dev/termination-log");
    installer["terminationMessagePolicy"] = json!("File");
    // The ServiceAccount admission plugin mounts the token into every container, the
    // installer included: kept, as on the sidecar, so that no Pod of an injected
    // template is patched (it was taken out of the installer on every Pod before).
    for list in ["initContainers", "containers"] {
        pod["spec"][list][0]["volumeMounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "kube-api-access", "readOnly": true,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}));
    }
    pod["spec"]["volumes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "kube-api-access", "projected": {"sources": []}}));
    assert_no_patch_on_either_endpoint(&pod);
}

/// A mount on the installer that is not ours stays only where it cannot hide what the
/// installer writes: one at, above or below its directory goes, whoever added it, and
/// ours is put back in its place.
#[test]
fn a_mount_that_would_hide_the_program_leaves_the_installer() {
    let job = mutate(seed_job()).patched;
    let template = &job["spec"]["template"];
    let ours = template["spec"]["initContainers"][0]["volumeMounts"].clone();
    let token = json!({"name": "kube-api-access", "readOnly": true,
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
    // At, above and below, and the same places spelled otherwise: the kernel mounts at
    // the clean path, so `//x`, `/./x` and `x/../x` hide the program as well; a path
    // with `..` is not read at all and goes too.
    for hiding in [
        "/.prestop-injector",
        "/.prestop-injector/prestop-clean",
        "/.prestop-injector/",
        "//.prestop-injector",
        "/./.prestop-injector/./prestop-clean",
        "/.prestop-injector/../.prestop-injector",
        "/",
    ] {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]});
        let mounts = pod["spec"]["initContainers"][0]["volumeMounts"]
            .as_array_mut()
            .unwrap();
        mounts.push(json!({"name": "other", "mountPath": hiding}));
        mounts.push(token.clone());
        let patched = mutate(pod).patched;
        let mut expected = ours.as_array().unwrap().clone();
        expected.push(token.clone());
        assert_eq!(
            patched["spec"]["initContainers"][0]["volumeMounts"],
            Value::Array(expected),
            "{hiding}"
        );
    }
}

#[test]
fn cleaner_mode_shell_keeps_the_v1_hook_and_adds_no_installer() {
    let outcome = mutate_with(Endpoint::Mutate, &shell_mode(), seed_job());
    let argv = pre_stop_argv(container(&outcome.patched, 0));
    assert_eq!(argv[..2], ["/bin/sh", "-c"]);
    assert!(
        argv[2].starts_with("# prestop-injector hook v1 "),
        "{argv:?}"
    );
    assert_eq!(
        Hook::from_argv(&argv).unwrap().action,
        Action::Cleanup(vec!["/scratch".into()])
    );
    let spec = template_spec(&outcome.patched);
    assert_eq!(spec.get("initContainers"), None);
    assert_eq!(spec["volumes"], template_spec(&seed_job())["volumes"]);
    assert_eq!(grace(&outcome.patched), Some(40));
    assert_targeted(&outcome);
}

#[test]
fn every_cleaned_container_mounts_the_one_volume() {
    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    let spec = spec_mut(&mut object);
    let mut second = scratch_container();
    second["name"] = json!("second");
    second["volumeMounts"] = json!([{"name": "other", "mountPath": "/other"}]);
    let mut plain = scratch_container();
    plain["name"] = json!("plain");
    plain["volumeMounts"] = json!([]);
    spec["containers"]
        .as_array_mut()
        .unwrap()
        .extend([second, plain]);
    spec["volumes"]
        .as_array_mut()
        .unwrap()
        .push(host_path_volume("other", "/mnt/work/other"));
    let outcome = mutate(object);
    assert_delivered(&outcome.patched, &[0, 1]);
    assert_eq!(
        template_spec(&outcome.patched)["initContainers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        template_spec(&outcome.patched)["containers"][2]["volumeMounts"],
        json!([])
    );
    assert_targeted(&outcome);
}

#[test]
fn a_custom_cleaner_image_is_used_for_the_installer_and_the_sidecar() {
    let config = test_config_with("cleaner: {image: 'mirror.example/prestop:1'}\n");
    let outcome = mutate_with(Endpoint::Mutate, &config, seed_job());
    assert_eq!(
        template_spec(&outcome.patched)["initContainers"][0]["image"],
        "mirror.example/prestop:1"
    );
    let sidecar_job = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
    );
    let outcome = mutate_with(Endpoint::Mutate, &config, sidecar_job);
    assert_eq!(
        template_spec(&outcome.patched)["initContainers"][0]["image"],
        "mirror.example/prestop:1"
    );
}

fn distroless_nginx_job(annotations: Value) -> Value {
    let mut object = scratch_job(annotations);
    let container = &mut object["spec"]["template"]["spec"]["containers"][0];
    container["image"] = json!("gcr.io/distroless/static-debian12:nonroot");
    container["command"] = json!(["/usr/sbin/nginx"]);
    container["lifecycle"] =
        json!({"preStop": {"exec": {"command": ["/usr/sbin/nginx", "-s", "quit"]}}});
    object
}

#[test]
fn shell_less_images_get_the_program_around_their_own_hook() {
    let object = distroless_nginx_job(json!({"prestop-injector.io/cleanup": "auto"}));
    let outcome = mutate(object.clone());
    let patched = container(&outcome.patched, 0);
    assert_eq!(
        pre_stop_argv(patched),
        strings(&[
            PROGRAM,
            "hook",
            "--deadline",
            "38",
            "--target",
            "/scratch",
            "--host",
            "/mnt/scratch",
            "--whole-filesystem",
            "--",
            "/usr/sbin/nginx",
            "-s",
            "quit"
        ])
    );
    assert!(
        !outcome.warnings().contains("no shell"),
        "{}",
        outcome.warnings()
    );
    assert_delivered(&outcome.patched, &[0]);
    assert_targeted(&outcome);

    // A custom command needs a shell: skipped with a warning, the user's hook kept.
    let object = distroless_nginx_job(json!({"prestop-injector.io/command": "echo bye"}));
    let outcome = mutate(object.clone());
    assert_eq!(
        container(&outcome.patched, 0)["lifecycle"],
        container(&object, 0)["lifecycle"]
    );
    assert_eq!(template_spec(&outcome.patched).get("initContainers"), None);
    assert!(
        outcome
            .warnings()
            .contains("has no shell; the custom command is not injected"),
        "{}",
        outcome.warnings()
    );

    // cleaner.mode: shell keeps the old answer: the busybox sidecar, or a warning.
    let mut object = distroless_nginx_job(json!({"prestop-injector.io/cleanup": "auto"}));
    object["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 65532});
    let outcome = mutate_with(Endpoint::Mutate, &shell_mode(), object.clone());
    let spec = template_spec(&outcome.patched);
    assert_eq!(spec["initContainers"][0]["name"], SIDECAR_NAME);
    assert_eq!(spec["initContainers"][0]["image"], "busybox:1.37.0");
    let config = test_config_with("sidecar: {allowed: false}\ncleaner: {mode: shell}\n");
    let outcome = mutate_with(Endpoint::Mutate, &config, object);
    assert!(
        outcome.warnings().contains("has no shell"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn a_new_cleaner_image_is_one_replace_on_the_next_pass() {
    let injected = mutate(seed_job()).patched;
    let config =
        test_config_with("cleaner: {image: 'ghcr.io/prestop-injector/prestop-injector:0.2.0'}\n");
    let outcome = mutate_with(Endpoint::Mutate, &config, injected);
    assert_eq!(
        outcome.paths(),
        ["/spec/template/spec/initContainers/0/image"],
        "an upgrade touches the image only"
    );
}

#[test]
fn a_program_hook_that_shell_mode_cannot_run_gives_the_users_hook_back() {
    let object = distroless_nginx_job(json!({"prestop-injector.io/cleanup": "auto"}));
    let injected = mutate(object.clone()).patched;
    let config = test_config_with("sidecar: {allowed: false}\ncleaner: {mode: shell}\n");
    let outcome = mutate_with(Endpoint::Mutate, &config, injected);
    assert_eq!(
        template_spec(&outcome.patched)["containers"][0],
        template_spec(&object)["containers"][0]
    );
    assert_eq!(template_spec(&outcome.patched).get("initContainers"), None);
    assert!(
        outcome.warnings().contains("has no shell"),
        "{}",
        outcome.warnings()
    );
}
