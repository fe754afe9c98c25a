//! docs/DESIGN.md, from the hook to the responses: the injected hook, grace period, shell fix,
//! sidecar, TTL, status, the orphan guard and the wire response — each asserted on the patched
//! object.

mod core_support;
use core_support::{test_config, test_config_with};

use base64::Engine as _;
use core_support::*;
use prestop_injector::admission::{self, Operation};
use prestop_injector::config::DEFAULT_CLEANER_IMAGE;
use prestop_injector::mutation::hook::{self, Action, Before, Hook, Target, PROGRAM};
use prestop_injector::mutation::{decide, Endpoint, ORPHAN_DELETE_MESSAGE, SIDECAR_NAME};
use serde_json::{json, Value};

fn seed_job() -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "job-worker", "annotations": {"prestop-injector.io/cleanup": "auto"}},
        "spec": {
            "template": {"spec": {
                "containers": [{
                    "name": "busybox", "image": "busybox:stable", "imagePullPolicy": "Always",
                    "lifecycle": {"preStop": {"exec": {"command": ["bash", "-c", "rm -rf /cadm-package/*"]}}},
                    "command": ["bash", "-c", "set -x\nmv test /test-package/\necho 'Hello job-worker' > /test-package/test.txt\nsleep 360000000\n"],
                    "volumeMounts": [{"name": "package", "mountPath": "/test-package"}]
                }],
                "volumes": [{"name": "package", "hostPath": {
                    "path": "/test-package/143319e8-5061-4bd7-b926-59efe1d85350-all/package", "type": "DirectoryOrCreate"}}],
                "restartPolicy": "Never"
            }},
            "backoffLimit": 1, "activeDeadlineSeconds": 2400
        }
    })
}

fn hook_of(container: &Value) -> Hook {
    Hook::from_argv(&pre_stop_argv(container)).expect("our hook")
}

#[test]
fn the_seed_job_gets_sh_a_composed_cleanup_and_a_grace_period() {
    let outcome = mutate(seed_job());
    let container = container(&outcome.patched, 0);
    assert_eq!(container["command"][0], "/bin/sh");
    // No shell of ours: the program runs the user's (shell-fixed) hook, then cleans.
    assert_eq!(
        pre_stop_argv(container),
        strings(&[
            PROGRAM,
            "hook",
            "--deadline",
            "38",
            "--target",
            "/test-package",
            "--host",
            "/test-package/143319e8-5061-4bd7-b926-59efe1d85350-all/package",
            "--",
            "/bin/sh",
            "-c",
            "rm -rf /cadm-package/*"
        ])
    );
    assert_eq!(
        hook_of(container),
        Hook {
            shell: String::new(),
            before: Before::Exec(vec![
                "/bin/sh".into(),
                "-c".into(),
                "rm -rf /cadm-package/*".into()
            ]),
            // The host directory the program checks at run time (docs/DESIGN.md#targets).
            action: Action::Cleanup(vec![Target::on_host(
                "/test-package",
                "/test-package/143319e8-5061-4bd7-b926-59efe1d85350-all/package"
            )]),
        }
    );
    assert_delivered(&outcome.patched, &[0]);
    assert_eq!(grace(&outcome.patched), Some(40));
    assert_eq!(
        status(&outcome.patched),
        Some(json!({"version": 1, "containers": ["busybox"], "grace": 40}))
    );
    assert!(
        outcome.warnings().contains("\"busybox\""),
        "{}",
        outcome.warnings()
    );
    assert!(
        outcome
            .warnings()
            .contains("preStop deletes /cadm-package/*, which is on no volume mount"),
        "{}",
        outcome.warnings()
    );
    assert!(outcome
        .decision
        .warnings
        .iter()
        .all(|w| w.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS));
    // Targeted operations only: nothing above the fields the feature needs.
    for path in outcome.paths() {
        assert!(
            [
                "/spec/template/spec/containers/0/command/0",
                "/spec/template/spec/containers/0/lifecycle/preStop/exec/command/",
                "/spec/template/spec/containers/0/volumeMounts/1",
                "/spec/template/spec/volumes/1",
                "/spec/template/spec/initContainers",
                "/spec/template/spec/terminationGracePeriodSeconds",
                "/spec/template/metadata"
            ]
            .iter()
            .any(|allowed| path.starts_with(allowed)),
            "unexpected patch path {path}"
        );
    }
    // Untouched fields keep their values and their order.
    let keys: Vec<&String> = container.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "name",
            "image",
            "imagePullPolicy",
            "lifecycle",
            "command",
            "volumeMounts"
        ]
    );
    assert_eq!(outcome.patched["spec"]["activeDeadlineSeconds"], 2400);
}

#[test]
fn a_sleep_70_bash_hook_in_nginx_keeps_bash_and_gets_80_seconds() {
    let script = "nginx -s quit\nwhile pgrep -x nginx; do\n  sleep 1\ndone\nsleep 70\n";
    let object = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {"prestop-injector.io/shutdown-seconds": "10s"}},
        "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
            "lifecycle": {"preStop": {"exec": {"command": ["/bin/bash", "-c", script]}}}}]}}}
    });
    let outcome = mutate(object);
    let container = container(&outcome.patched, 0);
    assert_eq!(pre_stop_argv(container), ["/bin/bash", "-c", script]);
    assert!(
        grace(&outcome.patched).unwrap() >= 80,
        "{:?}",
        grace(&outcome.patched)
    );
    assert_eq!(grace(&outcome.patched), Some(81));
}

#[test]
fn a_sleep_action_becomes_sleep_then_cleanup() {
    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    object["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
        json!({"preStop": {"sleep": {"seconds": 5}}});
    let outcome = mutate(object);
    let container = container(&outcome.patched, 0);
    assert_eq!(hook_of(container).before, Before::Sleep(5));
    assert_eq!(
        pre_stop_argv(container),
        strings(&[
            PROGRAM,
            "hook",
            "--deadline",
            "43",
            "--sleep",
            "5",
            "--target",
            "/scratch",
            "--host",
            "/mnt/scratch",
            "--whole-filesystem"
        ])
    );
    assert_eq!(container.pointer("/lifecycle/preStop/sleep"), None);
    assert_eq!(grace(&outcome.patched), Some(5 + 30 + 10));
    assert_targeted(&outcome);
}

#[test]
fn grace_is_never_lowered_and_is_capped() {
    let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(600);
    assert_eq!(grace(&mutate(object).patched), Some(600));

    let object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/hook-seconds": "2h"}),
    );
    let outcome = mutate(object);
    assert_eq!(grace(&outcome.patched), Some(3600));
    assert!(
        outcome.warnings().contains("capped"),
        "{}",
        outcome.warnings()
    );

    // The pod's own period above the cap: kept, and a warning only where it falls short
    // of what is needed (it said "capped at 3600s" while 7200 s stayed and sufficed).
    let long = |grace_seconds: u64, hook: &str| {
        let mut object = scratch_job(
            json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/hook-seconds": hook}),
        );
        object["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = json!(grace_seconds);
        mutate(object)
    };
    let covered = long(7200, "5000s");
    assert_eq!(grace(&covered.patched), Some(7200));
    assert!(
        !covered.warnings().contains("maxGraceSeconds"),
        "7200 s covers the 5010 s needed: {}",
        covered.warnings()
    );
    let short = long(4000, "5000s");
    assert_eq!(grace(&short.patched), Some(4000));
    assert!(
        short.warnings().contains("hook and shutdown need 5010s, more than terminationGracePeriodSeconds 4000s; not raised beyond maxGraceSeconds 3600s"),
        "{}",
        short.warnings()
    );

    let object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/hook-seconds": "5"}),
    );
    assert_eq!(
        grace(&mutate(object).patched),
        None,
        "5 + 10 fits the default 30 s: no grace field is added"
    );

    let config = test_config_with("cleanupBudgetSeconds: 50\nshutdownSeconds: 20\n");
    let object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
    assert_eq!(
        grace(&mutate_with(Endpoint::Mutate, &config, object).patched),
        Some(70)
    );
}

#[test]
fn custom_command_runs_instead_of_the_cleanup() {
    let object =
        scratch_job(json!({"prestop-injector.io/command": "curl -s localhost/drain\nsleep 25"}));
    let outcome = mutate(object);
    let hook = hook_of(container(&outcome.patched, 0));
    assert_eq!(
        hook.action,
        Action::Custom("curl -s localhost/drain\nsleep 25".into())
    );
    assert_eq!(
        pre_stop_argv(container(&outcome.patched, 0)),
        strings(&[
            PROGRAM,
            "hook",
            "--shell",
            "/bin/sh",
            "--script",
            "curl -s localhost/drain\nsleep 25"
        ])
    );
    assert_delivered(&outcome.patched, &[0]);
    assert_eq!(
        grace(&outcome.patched),
        Some(35),
        "25 s of sleep + 10 s shutdown, no cleanup budget"
    );
}

#[test]
fn shell_annotation_and_fix_shell_off() {
    // The program's cleanup needs no shell: the annotation only matters for scripts.
    let object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/shell": "/bin/bash"}),
    );
    let outcome = mutate(object.clone());
    assert_eq!(hook_of(container(&outcome.patched, 0)).shell, "");
    assert!(
        !outcome.warnings().contains("preStop hook"),
        "{}",
        outcome.warnings()
    );
    let outcome = mutate_with(Endpoint::Mutate, &shell_mode(), object);
    assert_eq!(
        hook_of(container(&outcome.patched, 0)).shell,
        "/bin/sh",
        "busybox has no bash"
    );
    let object = scratch_job(
        json!({"prestop-injector.io/command": "echo bye", "prestop-injector.io/shell": "/bin/bash"}),
    );
    assert_eq!(
        hook_of(container(&mutate(object).patched, 0)).shell,
        "/bin/sh",
        "busybox has no bash"
    );

    let mut object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/fix-shell": "false"}),
    );
    object["spec"]["template"]["spec"]["containers"][0]["command"] = json!(["bash", "-c", "true"]);
    let outcome = mutate(object);
    assert_eq!(container(&outcome.patched, 0)["command"][0], "bash");
}

#[test]
fn a_hook_is_given_back_when_cleanup_is_turned_off() {
    let injected = mutate(seed_job()).patched;
    let mut turned_off = injected.clone();
    turned_off["metadata"]["annotations"]["prestop-injector.io/cleanup"] = json!("off");
    let outcome = mutate(turned_off);
    assert_eq!(
        pre_stop_argv(container(&outcome.patched, 0)),
        ["/bin/sh", "-c", "rm -rf /cadm-package/*"]
    );
    assert_eq!(status(&outcome.patched).unwrap()["containers"], json!([]));
    // The installer, its volume and the mount go too: the pod is the user's again.
    let spec = template_spec(&outcome.patched);
    let seed = seed_job();
    let original = template_spec(&seed);
    assert_eq!(spec.get("initContainers"), None);
    assert_eq!(spec["volumes"], original["volumes"]);
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        original["containers"][0]["volumeMounts"]
    );
    assert_targeted(&outcome);
}

#[test]
fn http_get_and_tcp_socket_hooks_use_the_sidecar() {
    for handler in [
        json!({"httpGet": {"path": "/quit", "port": 8080}}),
        json!({"tcpSocket": {"port": 8080}}),
    ] {
        let mut object = scratch_job(json!({"prestop-injector.io/cleanup": "auto"}));
        object["spec"]["template"]["spec"]["containers"][0]["lifecycle"] =
            json!({"preStop": handler});
        // The sidecar runs as the container's numeric user (Pod Security `restricted`).
        object["spec"]["template"]["spec"]["securityContext"] = json!({"runAsUser": 1000});
        let outcome = mutate(object.clone());
        let spec = template_spec(&outcome.patched);
        assert_eq!(spec["initContainers"][0]["name"], SIDECAR_NAME);
        assert_eq!(spec["initContainers"].as_array().unwrap().len(), 1);
        assert_eq!(spec["containers"][0]["lifecycle"]["preStop"], handler);
        assert_eq!(
            spec["volumes"],
            template_spec(&object)["volumes"],
            "no program volume"
        );
        assert_targeted(&outcome);

        let config = test_config_with("sidecar: {allowed: false}\n");
        let outcome = mutate_with(Endpoint::Mutate, &config, object);
        assert_eq!(template_spec(&outcome.patched).get("initContainers"), None);
        let kind = handler.as_object().unwrap().keys().next().unwrap().clone();
        assert!(
            outcome
                .warnings()
                .contains(&format!("its preStop is {kind}")),
            "{}",
            outcome.warnings()
        );
    }
}

#[test]
fn sidecar_mode_adds_one_native_sidecar_with_the_same_mounts_and_user() {
    let mut object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
    );
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"][0]["securityContext"] = json!({"runAsUser": 1000, "runAsGroup": 3000});
    spec["containers"][0]["volumeMounts"][0]["subPath"] = json!("job");
    spec["initContainers"] =
        json!([{"name": "setup", "image": "busybox", "command": ["sh", "-c", "true"]}]);
    let mut exec_container = scratch_container();
    exec_container["name"] = json!("plain");
    exec_container["volumeMounts"] = json!([]);
    spec["containers"]
        .as_array_mut()
        .unwrap()
        .push(exec_container.clone());
    let outcome = mutate(object);
    let spec = template_spec(&outcome.patched);
    let sidecar = &spec["initContainers"][1];
    assert_eq!(spec["initContainers"][0]["name"], "setup");
    assert_eq!(sidecar["name"], SIDECAR_NAME);
    assert_eq!(sidecar["restartPolicy"], "Always");
    assert_eq!(sidecar["image"], DEFAULT_CLEANER_IMAGE);
    assert_eq!(
        sidecar["volumeMounts"],
        json!([{"name": "scratch", "mountPath": "/scratch", "subPath": "job"}])
    );
    assert_eq!(sidecar["securityContext"]["runAsUser"], 1000);
    assert_eq!(sidecar["securityContext"]["runAsGroup"], 3000);
    assert_eq!(
        sidecar["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert!(sidecar["resources"]["limits"]["memory"].is_string());
    assert_eq!(sidecar.get("lifecycle"), None, "no preStop on the sidecar");
    let argv: Vec<String> = serde_json::from_value(sidecar["command"].clone()).unwrap();
    assert_eq!(
        argv,
        strings(&[
            "/usr/local/bin/prestop-clean",
            "sidecar",
            "--deadline",
            "28",
            "--target",
            "/scratch",
            "--host",
            "/mnt/scratch/job"
        ]),
        "the program, no shell"
    );
    assert_eq!(
        hook::sidecar_targets(&argv),
        Some(vec!["/scratch".to_owned()])
    );
    assert_eq!(
        spec["initContainers"].as_array().unwrap().len(),
        2,
        "no installer: the sidecar runs the program from its own image"
    );
    assert_eq!(
        spec["containers"][0].get("lifecycle"),
        None,
        "the app keeps no exec hook in sidecar mode"
    );
    assert_eq!(
        spec["containers"][1], exec_container,
        "other containers are untouched"
    );
    assert_eq!(grace(&outcome.patched), Some(10 + 30));
    assert_eq!(status(&outcome.patched).unwrap()["sidecar"], SIDECAR_NAME);
}

#[test]
fn the_pod_level_pass_of_a_controller_created_pod_is_a_no_op() {
    let mut object = scratch_job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
    );
    object["spec"]["template"]["metadata"] = json!({"annotations": {"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}});
    object["spec"]["template"]["spec"]["containers"][0]["securityContext"] =
        json!({"runAsUser": 1000});
    let job = mutate(object).patched;
    let template = &job["spec"]["template"];
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]});
    // Fields the API server defaults on the pod must not make us patch again.
    pod["spec"]["initContainers"][0]["imagePullPolicy"] = json!("IfNotPresent");
    pod["spec"]["initContainers"][0]["terminationMessagePath"] = json!("/dev/termination-log");
    pod["spec"]["containers"][0]["volumeMounts"].as_array_mut().unwrap().push(json!({
        "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}));
    assert_no_patch_on_either_endpoint(&pod);
}

#[test]
fn ttl_after_finished_is_set_only_when_unset() {
    let outcome = mutate(scratch_job(
        json!({"prestop-injector.io/ttl-after-finished": "10m"}),
    ));
    assert_eq!(outcome.patched["spec"]["ttlSecondsAfterFinished"], 600);

    let mut object = scratch_job(json!({"prestop-injector.io/ttl-after-finished": "10m"}));
    object["spec"]["ttlSecondsAfterFinished"] = json!(5);
    assert_eq!(mutate(object).patched["spec"]["ttlSecondsAfterFinished"], 5);

    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c",
        "annotations": {"prestop-injector.io/ttl-after-finished": "1h"}},
        "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "busybox"}]}}}}}});
    assert_eq!(
        mutate(cron).patched["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"],
        3600
    );

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d",
        "annotations": {"prestop-injector.io/ttl-after-finished": "1h"}},
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "nginx"}]}}}});
    let outcome = mutate(deployment);
    assert_eq!(outcome.decision.patch, None);
    assert!(
        outcome.warnings().contains("Jobs and CronJobs only"),
        "{}",
        outcome.warnings()
    );
}

#[test]
fn unknown_fields_survive_and_pointers_are_escaped() {
    let mut object = seed_job();
    object["spec"]["template"]["spec"]["someFutureField"] = json!({"x": [1, {"y": null}]});
    object["spec"]["template"]["spec"]["containers"][0]["futureContainerField"] = json!("keep me");
    object["spec"]["template"]["metadata"] =
        json!({"annotations": {"example.com/a~b": "1"}, "futureMeta": true});
    object["futureTopLevel"] = json!(1.5);
    let outcome = mutate(object.clone());
    let patched = &outcome.patched;
    assert_eq!(patched["futureTopLevel"], json!(1.5));
    assert_eq!(
        patched["spec"]["template"]["spec"]["someFutureField"],
        object["spec"]["template"]["spec"]["someFutureField"]
    );
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"][0]["futureContainerField"],
        "keep me"
    );
    assert_eq!(patched["spec"]["template"]["metadata"]["futureMeta"], true);
    assert_eq!(
        patched["spec"]["template"]["metadata"]["annotations"]["example.com/a~b"],
        "1"
    );
    assert!(
        outcome.paths().contains(
            &"/spec/template/metadata/annotations/prestop-injector.io~1status".to_owned()
        ),
        "{:?}",
        outcome.paths()
    );
}

fn delete_review(options: Value, annotated: bool) -> prestop_injector::admission::Request {
    let mut job = seed_job();
    if annotated {
        job["spec"]["template"]["metadata"] =
            json!({"annotations": {"prestop-injector.io/status": "{\"version\":1}"}});
    }
    let mut request = request(Operation::Delete, json!(null));
    request.kind.group = "batch".into();
    request.kind.version = "v1".into();
    request.kind.kind = "Job".into();
    request.object = None;
    request.old_object = Some(job.into());
    request.options = Some(options.into());
    request
}

#[test]
fn the_orphan_delete_guard_warns_or_denies_and_never_patches() {
    let deny = test_config_with("orphanDelete: deny\n");
    let allow = test_config_with("orphanDelete: allow\n");
    let policies = [
        json!({}),
        json!({"propagationPolicy": "Orphan"}),
        json!({"propagationPolicy": "Background"}),
        json!({"propagationPolicy": "Foreground"}),
        json!({"orphanDependents": true}),
        json!({"orphanDependents": false}),
    ];
    for options in policies {
        let orphans = options.get("propagationPolicy").map_or(
            options.get("orphanDependents") != Some(&json!(false)),
            |p| p == "Orphan",
        );
        for annotated in [true, false] {
            let request = delete_review(options.clone(), annotated);
            let warned = decide(&request, Endpoint::Validate, &test_config());
            let denied = decide(&request, Endpoint::Validate, &deny);
            assert_eq!(warned.patch, None);
            assert_eq!(denied.patch, None);
            assert_eq!(
                decide(&request, Endpoint::Validate, &allow),
                Default::default()
            );
            let expect = orphans && annotated;
            assert_eq!(
                warned.warnings == [ORPHAN_DELETE_MESSAGE],
                expect,
                "{options} annotated={annotated}"
            );
            assert_eq!(warned.denial, None);
            assert_eq!(
                denied.denial.as_ref().map(|d| d.message.as_str()),
                expect.then_some(ORPHAN_DELETE_MESSAGE)
            );
            // The mutating endpoints never patch a DELETE.
            assert_eq!(
                decide(&request, Endpoint::MutateAuto, &test_config()),
                Default::default()
            );
        }
    }
}

#[test]
fn the_wire_response_carries_uid_and_a_base64_patch() {
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"}, "namespace": "default",
        "operation": "CREATE", "object": seed_job(), "oldObject": null, "dryRun": true}});
    let reviewed = admission::review(
        review.to_string().as_bytes(),
        Endpoint::Mutate,
        &test_config(),
    )
    .unwrap();
    let body: Value = serde_json::from_slice(&reviewed.body).unwrap();
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(body["kind"], "AdmissionReview");
    let response = &body["response"];
    assert_eq!(response["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("a base64 string"))
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut job = seed_job();
    json_patch::patch(&mut job, &patch).unwrap();
    assert_eq!(grace(&job), Some(40));
    assert!(response["warnings"]
        .as_array()
        .is_some_and(|w| !w.is_empty()));

    let denied = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-2", "kind": {"group": "batch", "version": "v1", "kind": "Job"}, "operation": "CREATE",
        "object": scratch_job(json!({"prestop-injector.io/hook-seconds": "x"}))}});
    let reviewed = admission::review(
        denied.to_string().as_bytes(),
        Endpoint::Mutate,
        &test_config(),
    )
    .unwrap();
    let body: Value = serde_json::from_slice(&reviewed.body).unwrap();
    assert_eq!(body["response"]["uid"], "u-2");
    assert_eq!(body["response"]["allowed"], false);
    assert_eq!(body["response"]["status"]["code"], 400);
    assert!(body["response"]["status"]["message"]
        .as_str()
        .unwrap()
        .contains("hook-seconds"));
    assert_eq!(body["response"].get("patch"), None);
}

#[test]
fn invalid_reviews_are_transport_errors() {
    let cases = [
        ("", "not a valid AdmissionReview"),
        ("{", "not a valid AdmissionReview"),
        ("[]", "not a valid AdmissionReview"),
        (
            r#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}"#,
            "expected kind AdmissionReview",
        ),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            "has no request",
        ),
        (
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
            "has no uid",
        ),
    ];
    for (body, message) in cases {
        let error =
            admission::review(body.as_bytes(), Endpoint::Mutate, &test_config()).unwrap_err();
        assert!(error.0.contains(message), "{body}: {}", error.0);
    }
}
