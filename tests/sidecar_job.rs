//! docs/DESIGN.md#the-sidecar end to end under `cleaner.mode: shell`: a Job annotated `mode:
//! sidecar` is mutated by the core, and the command of the init container it gets runs as a real
//! process in busybox `sh`, `dash` and `bash` — it deletes nothing while the Job runs, and empties
//! the scratch directory (dot-files included, the directory and a symlink's outside target kept)
//! when SIGTERM arrives, which is what the kubelet sends once the Job's containers have finished.

mod core_support;
#[path = "support/shells.rs"]
mod shells;

use core_support::{host_path_volume, job, mutate_with, shell_mode};
use prestop_injector::mutation::{Endpoint, SIDECAR_NAME};
use serde_json::json;
use shells::{shells, spawn_sidecar, Tree};

#[test]
fn a_finished_sidecar_job_has_its_scratch_directory_emptied() {
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let mount_path = tree.path(&tree.target);
        let container = json!({"name": "worker", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
            "securityContext": {"runAsUser": 1000},
            "volumeMounts": [{"name": "scratch", "mountPath": mount_path}]});
        let object = job(
            json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
            container,
            json!([host_path_volume("scratch", "/mnt/scratch")]),
        );
        let patched = mutate_with(Endpoint::Mutate, &shell_mode(), object).patched;
        let sidecar = &patched["spec"]["template"]["spec"]["initContainers"][0];
        assert_eq!(sidecar["name"], SIDECAR_NAME);
        assert_eq!(sidecar["restartPolicy"], "Always");
        let argv: Vec<String> = serde_json::from_value(sidecar["command"].clone()).unwrap();
        assert_eq!(argv[0], "/bin/sh");
        assert_eq!(argv.last(), Some(&mount_path));
        // The container's /bin/sh is the shell under test.
        spawn_sidecar(&shell, &tree, argv);
    }
}

/// The exec hook the core renders under `cleaner.mode: shell`, run in each real shell as
/// the container's `/bin/sh` would: the user's hook first, then the mount emptied.
#[test]
fn a_shell_mode_hook_from_the_core_runs_in_real_shells() {
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let mount_path = tree.path(&tree.target);
        let container = json!({"name": "worker", "image": "busybox:1.36", "command": ["sh", "-c", "true"],
            "lifecycle": {"preStop": {"exec": {"command": ["touch", "user-ran"]}}},
            "volumeMounts": [{"name": "scratch", "mountPath": mount_path}]});
        let object = job(
            json!({"prestop-injector.io/cleanup": "auto"}),
            container,
            json!([host_path_volume("scratch", "/mnt/scratch")]),
        );
        let patched = mutate_with(Endpoint::Mutate, &shell_mode(), object).patched;
        let pod = &patched["spec"]["template"]["spec"];
        assert_eq!(
            pod.get("initContainers"),
            None,
            "no installer in shell mode"
        );
        let argv: Vec<String> = serde_json::from_value(
            pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"].clone(),
        )
        .unwrap();
        assert_eq!(argv[..2], ["/bin/sh", "-c"]);
        let output = shell.run(&argv, &tree.cwd);
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(tree.cwd.join("user-ran").is_file(), "{}", shell.name);
        tree.assert_clean(&tree.target, shell.name);
    }
}
