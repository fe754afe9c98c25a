//! The hooks the webhook renders, run by the real `prestop-clean` program.
//!
//! Each case mutates a Job with the core, takes the preStop argv (or the sidecar's
//! command) from the patched pod template and runs it, with only two things mapped for
//! this machine (`support/cleaner.rs`): the in-pod program path to the built binary and
//! the container path `/scratch` to a temp dir full of hostile names. The contract is the
//! one in `cleaner/src/argv.rs` and issue 10: the user's handler first (exact argv, no
//! shell, or a sleep), then every target emptied (never the target itself, never through
//! a symlink); the user's exit status when non-zero, else non-zero only when something
//! survived; a missing target is no error; the sidecar cleans on SIGTERM and exits 0.

#[path = "support/cleaner.rs"]
mod cleaner;
mod core_support;
#[path = "support/shells.rs"]
mod shells;

use core_support::{container, host_path_volume, job, mutate, pre_stop_argv, template_spec};
use prestop_injector::mutation::hook::{IMAGE_PROGRAM, PROGRAM, PROGRAM_DIR};
use serde_json::{json, Value};
use shells::{wait_until, Tree, HOSTILE};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The preStop argv the pod gets for one container mounting hostPath at `/scratch`.
fn rendered_hook(image: &str, lifecycle: Option<Value>, annotations: Value) -> Vec<String> {
    let mut app = json!({"name": "app", "image": image, "command": ["/app"],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]});
    if let Some(lifecycle) = lifecycle {
        app["lifecycle"] = lifecycle;
    }
    let object = job(
        annotations,
        app,
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    );
    let argv = pre_stop_argv(container(&mutate(object).patched, 0));
    assert_eq!(argv[0], PROGRAM, "{argv:?}");
    argv
}

fn auto() -> Value {
    json!({"prestop-injector.io/cleanup": "auto"})
}

const DISTROLESS: &str = "gcr.io/distroless/static-debian12:nonroot";

/// An absolute path of a host tool (the program resolves nothing through a shell).
fn tool(name: &str) -> String {
    ["/usr/bin", "/bin"]
        .iter()
        .map(|dir| format!("{dir}/{name}"))
        .find(|path| Path::new(path).is_file())
        .unwrap_or_else(|| panic!("{name} not found"))
}

/// The host path of the `/scratch` volume in these pods: exactly an allowed prefix of the
/// test config, so the hook says the mount may be a whole filesystem's root.
const HOST: &str = "/mnt/scratch";

/// Runs the rendered hook with `/scratch` and its host path `/mnt/scratch` both mapped
/// to the tree's target, mounted as the kubelet mounts a hostPath volume.
fn run(binary: &Path, tree: &Tree, argv: &[String]) -> Output {
    let paths = [("/scratch", &*tree.target), (HOST, &*tree.target)];
    let mapped = cleaner::map_argv(argv, PROGRAM, binary, &paths);
    cleaner::as_mounted(&tree.target, &mapped)
        .current_dir(&tree.cwd)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .expect("run the hook")
}

/// A tree below a directory named by the pod's uid, which the program cleans without a
/// node agent (issue 31: only a per-pod directory then).
fn pod_tree() -> Tree {
    Tree::named(&format!("pod-{}-", cleaner::POD_UID))
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_fresh_hook_empties_the_target_and_nothing_else() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    let argv = rendered_hook(DISTROLESS, None, auto());
    assert_eq!(
        argv[1..],
        [
            "hook",
            "--deadline",
            "38",
            "--target",
            "/scratch",
            "--host",
            HOST,
            "--whole-filesystem"
        ]
    );
    let output = run(binary, &tree, &argv);
    assert!(output.status.success(), "{}", stderr(&output));
    tree.assert_clean(&tree.target, "prestop-clean");
}

/// The pod's own sequence: the installer's command copies the program into the (mapped)
/// `emptyDir`, and the hook runs that copy, not the image's.
#[test]
fn the_installer_delivers_the_program_the_hook_runs() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    let volume = tree.root.path().join("emptyDir");
    std::fs::create_dir(&volume).unwrap();
    let app = json!({"name": "app", "image": DISTROLESS, "command": ["/app"],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]});
    let patched = mutate(job(
        auto(),
        app,
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    ))
    .patched;
    let spec = template_spec(&patched);
    let installer: Vec<String> =
        serde_json::from_value(spec["initContainers"][0]["command"].clone()).unwrap();
    let mapped = cleaner::map_argv(&installer, IMAGE_PROGRAM, binary, &[(PROGRAM_DIR, &volume)]);
    let output = Command::new(&mapped[0])
        .args(&mapped[1..])
        .output()
        .expect("run the installer");
    assert!(output.status.success(), "{}", stderr(&output));
    let installed = volume.join(prestop_clean::argv::PROGRAM_NAME);
    assert!(installed.is_file(), "the installer wrote no program");

    let argv = pre_stop_argv(container(&patched, 0));
    let output = run(&installed, &tree, &argv);
    assert!(output.status.success(), "{}", stderr(&output));
    tree.assert_clean(&tree.target, "installed prestop-clean");
}

#[test]
fn the_users_own_hook_runs_first_with_its_exact_argv_and_no_shell() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    // What a shell-less image's hook looks like: an absolute program and its arguments,
    // here ones a shell would mangle. The file it creates in /scratch must be gone
    // afterwards: the cleanup ran after it.
    let user = json!([
        tool("touch"),
        "user ran $(x) *",
        "/scratch/written-by-the-hook"
    ]);
    let argv = rendered_hook(
        DISTROLESS,
        Some(json!({"preStop": {"exec": {"command": user}}})),
        auto(),
    );
    assert_eq!(
        argv[1..10],
        [
            "hook",
            "--deadline",
            "38",
            "--target",
            "/scratch",
            "--host",
            HOST,
            "--whole-filesystem",
            "--"
        ]
    );
    let output = run(binary, &tree, &argv);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        tree.cwd.join("user ran $(x) *").is_file(),
        "the user's argv, exactly"
    );
    tree.assert_clean(&tree.target, "prestop-clean");
}

#[test]
fn the_users_failure_is_the_hooks_status_and_the_cleanup_still_runs() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    let user = json!([tool("sh"), "-c", "exit 7"]);
    let argv = rendered_hook(
        "busybox:1.36",
        Some(json!({"preStop": {"exec": {"command": user}}})),
        auto(),
    );
    let output = run(binary, &tree, &argv);
    assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
    tree.assert_clean(&tree.target, "prestop-clean");
}

#[test]
fn a_sleep_action_sleeps_then_cleans() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    let argv = rendered_hook(
        DISTROLESS,
        Some(json!({"preStop": {"sleep": {"seconds": 1}}})),
        auto(),
    );
    // The grace period holds the sleep too: 1 + 30 + 10 s, the kill 2 s after the deadline.
    assert_eq!(argv[1..6], ["hook", "--deadline", "39", "--sleep", "1"]);
    let started = Instant::now();
    let output = run(binary, &tree, &argv);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(started.elapsed() >= Duration::from_secs(1));
    tree.assert_clean(&tree.target, "prestop-clean");
}

#[test]
fn a_custom_command_runs_through_the_shell_instead_of_the_cleanup() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    let argv = rendered_hook(
        "busybox:1.36",
        None,
        json!({"prestop-injector.io/command": "touch custom-ran; exit 0"}),
    );
    assert_eq!(argv[1..4], ["hook", "--shell", "/bin/sh"]);
    let output = run(binary, &tree, &argv);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(tree.cwd.join("custom-ran").is_file());
    assert!(
        tree.target.join(HOSTILE[0]).exists(),
        "a custom command replaces the cleanup"
    );
}

#[test]
fn a_missing_target_is_not_an_error() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    std::fs::remove_dir(&tree.target).unwrap();
    let output = run(binary, &tree, &rendered_hook(DISTROLESS, None, auto()));
    assert!(output.status.success(), "{}", stderr(&output));
    tree.assert_safe("prestop-clean");
}

/// Whether `pid` catches or blocks SIGTERM (bit 15 of SigCgt / SigBlk), i.e. is idle.
fn handles_sigterm(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status.lines().any(|line| {
        ["SigCgt:", "SigBlk:"].iter().any(|key| {
            line.strip_prefix(key)
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                .is_some_and(|mask| mask & (1 << 14) != 0)
        })
    })
}

#[test]
fn the_sidecar_cleans_on_sigterm_and_exits_0() {
    let Some(binary) = cleaner::program() else {
        return;
    };
    let tree = pod_tree();
    tree.fill(&tree.target);
    // A numeric non-root user: the sidecar meets Pod Security `restricted`.
    let app = json!({"name": "app", "image": "busybox:1.36", "command": ["/app"],
        "securityContext": {"runAsUser": 1000},
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]});
    let object = job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
        app,
        json!([host_path_volume("scratch", "/mnt/scratch")]),
    );
    let patched = mutate(object).patched;
    let sidecar = &template_spec(&patched)["initContainers"][0];
    let argv: Vec<String> = serde_json::from_value(sidecar["command"].clone()).unwrap();
    assert_eq!(
        argv,
        [
            IMAGE_PROGRAM,
            "sidecar",
            "--deadline",
            "28",
            "--target",
            "/scratch",
            "--host",
            HOST,
            "--whole-filesystem"
        ]
    );
    let paths = [("/scratch", &*tree.target), (HOST, &*tree.target)];
    let mapped = cleaner::map_argv(&argv, IMAGE_PROGRAM, binary, &paths);
    let mut child = cleaner::as_mounted(&tree.target, &mapped)
        .current_dir(&tree.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the sidecar");
    // The program, not yet the shell that sets up its mount: exec'd, then idle.
    let running = |pid: u32| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|exe| std::fs::canonicalize(binary).is_ok_and(|bin| exe == bin))
    };
    let idle = wait_until(Duration::from_secs(10), || {
        running(child.id()) && handles_sigterm(child.id())
    });
    if !idle {
        let _ = child.kill();
    }
    assert!(idle, "the sidecar never started waiting for SIGTERM");
    assert!(
        tree.target.join(HOSTILE[0]).exists(),
        "deleted before SIGTERM"
    );
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert!(sent.is_ok_and(|s| s.success()));
    let mut status = None;
    let exited = wait_until(Duration::from_secs(10), || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if !exited {
        let _ = child.kill();
    }
    assert!(exited, "the sidecar ignored SIGTERM");
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    tree.assert_clean(&tree.target, "prestop-clean sidecar");
}
