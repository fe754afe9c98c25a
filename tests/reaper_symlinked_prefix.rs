//! Issue 32, finding 1: a prefix behind a symlink made the reaper decide blind. On RHCOS
//! `/mnt` is a link to `var/mnt`: the kubelet follows it when it mounts `/mnt/scratch` in
//! the reaper, but the reaper opened `/mnt/scratch/job` in the node's root refusing every
//! symlink, got "absent", and answered "not in use" without looking at any pod.
//!
//! Now the allowed prefix is resolved on the node by the cleaner's one rule
//! (`prestop_clean::resolve_prefix`: root's links in root-only directories, nothing below
//! the prefix), and a path that still cannot be resolved is `in_use_unknown`, never free.
//!
//! The layout is the DaemonSet's, for real, in a mount namespace of the test's own
//! (`unshare -m`): the node's tree with `/mnt -> var/mnt` and a tmpfs at
//! `/var/mnt/scratch`, and the reaper's `/host/mnt/scratch` a bind mount of it, as the
//! kubelet makes it.

mod core_support;
mod reaper_support;

use core_support::host_path_volume;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::reaper::in_use::Busy;
use prestop_injector::reaper::node::Reaper;
use prestop_injector::reaper::users;
use reaper_support::{config, entries, injected_pod, listed, metric, Node};
use serde_json::json;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

const DIR: &str = "/mnt/scratch/job";

/// A pod of another tenant on node-a, crash-looping (no process, so no mountinfo),
/// whose hostPath is `host_path`.
fn crash_looping(name: &str, host_path: &str) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "other", "uid": format!("uid-{name}")},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "busybox",
                 "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
                 "volumes": [host_path_volume("v", host_path)]},
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": false,
            "restartCount": 7, "image": "busybox", "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}))
    .unwrap()
}

fn refusals(reaper: &Reaper, reason: &str) -> f64 {
    metric(
        reaper,
        &format!("prestop_injector_reaper_refusals_total{{reason=\"{reason}\"}}"),
    )
}

fn prefixes() -> Vec<String> {
    config().allowed_host_path_prefixes
}

/// Fail closed, without any prefix link: a symlink *below* the prefix on the
/// candidate's way is not followed, and is not "absent" either.
#[test]
fn a_candidate_behind_a_symlink_is_unknown_not_free() {
    let node = Node::new();
    node.scratch("/mnt/scratch/real/job");
    symlink("real", node.on_host("/mnt/scratch/link")).unwrap();
    std::fs::write(node.on_host("/mnt/scratch/file"), b"x").unwrap();
    for directory in ["/mnt/scratch/link/job", "/mnt/scratch/file/job"] {
        let verdict = users::pods_on_the_node(
            Some(&node.host),
            &[],
            &[],
            &node.on_host(directory),
            directory,
            &prefixes(),
        );
        match verdict {
            Err(Busy::Unknown(why)) => assert!(why.contains(directory), "{why}"),
            other => panic!("{directory}: {other:?}"),
        }
    }
    // Truly missing on the node and in the reaper: nothing to empty, nothing to keep.
    let gone = "/mnt/scratch/gone";
    let verdict = users::pods_on_the_node(
        Some(&node.host),
        &[],
        &[],
        &node.on_host(gone),
        gone,
        &prefixes(),
    );
    assert_eq!(verdict, Ok(()));
}

const CHILD: &str = "PRESTOP_TEST_REAPER_SYMLINKED_PREFIX";

/// Runs `name` again in a mount namespace of its own, with `CHILD` set.
fn in_own_mount_namespace(name: &str) {
    let unshare = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    let usable = unshare.is_some_and(|u| {
        Command::new(u)
            .args(["-m", "true"])
            .status()
            .is_ok_and(|s| s.success())
    });
    if !usable {
        let why = "unshare -m (as root) is needed";
        if std::env::var("PRESTOP_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("required (PRESTOP_REQUIRE_TOOLS=1): {why}");
        }
        eprintln!("note: skipped: {why}");
        return;
    }
    let output = Command::new(unshare.unwrap())
        .args(["-m", "--propagation", "private"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("child-passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn mount(args: &[&std::ffi::OsStr]) {
    let status = Command::new("mount").args(args).status().unwrap();
    assert!(status.success(), "mount {args:?}");
}

/// The RHCOS node: `<root>/node` is the node's `/` with `/mnt -> var/mnt` (root's link,
/// in root's 0755 `/`), a tmpfs at `/var/mnt/scratch`, and the reaper's
/// `/host/mnt/scratch` a bind mount of it. The reaper's node root is `<root>/node`.
fn rhcos_node() -> (Node, PathBuf) {
    linked_node("var/mnt")
}

/// The node's `/mnt` a root-owned link to `target`, with a tmpfs at `target/scratch` that
/// the reaper's `/host/mnt/scratch` shows, as the kubelet mounts it through the link.
fn linked_node(target: &str) -> (Node, PathBuf) {
    let node = Node::new();
    let root = node.root.join("node");
    let scratch = root.join(target).join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    symlink(target, root.join("mnt")).unwrap();
    mount(&[
        "-t".as_ref(),
        "tmpfs".as_ref(),
        "scratch".as_ref(),
        scratch.as_os_str(),
    ]);
    mount(&[
        "--bind".as_ref(),
        scratch.as_os_str(),
        node.on_host("/mnt/scratch").as_os_str(),
    ]);
    node.scratch(DIR);
    (node, root)
}

fn reaper_on(node: &Node, root: &Path) -> Reaper {
    let mut reaper = node.reaper(config(), false);
    reaper.node_root = Some(root.to_path_buf());
    reaper
}

#[test]
fn a_prefix_behind_a_root_owned_link_is_kept_while_a_pod_reaches_it() {
    if std::env::var_os(CHILD).is_none() {
        return in_own_mount_namespace(
            "a_prefix_behind_a_root_owned_link_is_kept_while_a_pod_reaches_it",
        );
    }
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (node, root) = rhcos_node();
        let dir = node.on_host(DIR);
        let job = injected_pod("job-a", DIR);
        // It names the directory by its real path (a local PV's spelling): only the
        // node, not the spelling, says it is the recorded one.
        let user = crash_looping("web", "/var/mnt/scratch/job");
        let mut reaper = reaper_on(&node, &root);
        listed(&mut reaper, &[&job, &user]);
        reaper.on_event(Event::Delete(job));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 3, "a crash-looping pod reaches it: kept");
        assert_eq!(
            refusals(&reaper, "in_use"),
            1.0,
            "{}",
            reaper.metrics.encode()
        );
        reaper.on_event(Event::Delete(user));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 0, "emptied once the pod is gone");
        assert!(reaper.ledger.records().is_empty());
    });
    println!("child-passed");
}

/// A reaper that sees the node's own tree (`--host-root` the node's `/`, a process on the
/// node rather than the DaemonSet) meets the operator's link itself: its walk, which
/// follows no symlink, starts from the prefix resolved by the same rule. Before, the walk
/// refused (`…/mnt is a symlink`) and the directory was never emptied (e2e/node
/// `behind_link_is_kept_while_a_pod_reaches_it`).
#[test]
fn a_reaper_on_the_nodes_own_tree_walks_behind_the_link() {
    if std::env::var_os(CHILD).is_none() {
        return in_own_mount_namespace("a_reaper_on_the_nodes_own_tree_walks_behind_the_link");
    }
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (node, root) = rhcos_node();
        let dir = root.join("var/mnt/scratch/job");
        assert_eq!(entries(&dir), 3);
        let job = injected_pod("job-a", DIR);
        let mut reaper = reaper_on(&node, &root);
        reaper.host_root = root.clone();
        listed(&mut reaper, &[&job]);
        reaper.on_event(Event::Delete(job));
        reaper.act_on_due().await;
        assert_eq!(
            entries(&dir),
            0,
            "emptied behind the link: {}",
            reaper.metrics.encode()
        );
        assert!(reaper.ledger.records().is_empty());
    });
    println!("child-passed");
}

#[test]
fn a_prefix_behind_a_users_link_is_kept_and_unknown() {
    if std::env::var_os(CHILD).is_none() {
        return in_own_mount_namespace("a_prefix_behind_a_users_link_is_kept_and_unknown");
    }
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (node, root) = rhcos_node();
        std::os::unix::fs::lchown(root.join("mnt"), Some(1000), Some(1000)).unwrap();
        let dir = node.on_host(DIR);
        let job = injected_pod("job-a", DIR);
        let mut reaper = reaper_on(&node, &root);
        listed(&mut reaper, &[&job]);
        reaper.on_event(Event::Delete(job));
        reaper.act_on_due().await;
        assert_eq!(
            entries(&dir),
            3,
            "no pod, but the prefix cannot be placed: kept"
        );
        assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
        assert_eq!(
            reaper.ledger.records().len(),
            1,
            "it stays recorded, visibly"
        );
    });
    println!("child-passed");
}

/// Root's link is the node's layout, but not a way into the node's own directories: an
/// operator's `/mnt -> run` puts the prefix in protected `/run`, and nothing there is
/// emptied, pod or no pod (the rule the node agent applies too).
#[test]
fn a_prefix_behind_roots_link_into_a_protected_directory_is_kept_and_unknown() {
    if std::env::var_os(CHILD).is_none() {
        return in_own_mount_namespace(
            "a_prefix_behind_roots_link_into_a_protected_directory_is_kept_and_unknown",
        );
    }
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (node, root) = linked_node("run");
        let dir = node.on_host(DIR);
        let job = injected_pod("job-a", DIR);
        let mut reaper = reaper_on(&node, &root);
        listed(&mut reaper, &[&job]);
        reaper.on_event(Event::Delete(job));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 3, "the prefix is in /run on the node: kept");
        assert_eq!(refusals(&reaper, "in_use_unknown"), 1.0);
    });
    println!("child-passed");
}
