//! Issue 17, class 8: "in use" by identity. A running container that sees a recorded
//! directory — through a hostPath spelled as a symlink on the node, a PV inside it, or a
//! bind-mount alias — keeps it from being emptied, although no pod spec names it.
//!
//! The container is real: a process in its own mount namespace (`unshare -m`), on its own
//! root (a tmpfs with a static busybox, entered with `chroot`), with the node's directory
//! bind-mounted in as the kubelet does it (the bind follows the symlink). The reaper runs
//! in this process, with this machine's `/proc` as the node's.

mod core_support;
mod reaper_support;

use kube::runtime::watcher::Event;
use reaper_support::container::{stamp as rand_suffix, tools, Container};
use reaper_support::{config, entries, injected_pod, listed, metric, other_pod, Node, PREFIX};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// job-a recorded `/mnt/scratch/job` and is gone; `user` (a pod spec that names the
/// directory differently, or not at all) runs `container`. Not emptied while it runs;
/// emptied once it is gone.
async fn kept_while_the_container_runs(
    node: &Node,
    user_spec: Option<&str>,
    container: impl FnOnce() -> Option<Container>,
) {
    let dir = node.scratch("/mnt/scratch/job");
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    let user = user_spec.map(|host_path| other_pod("user", host_path));
    let Some(container) = container() else {
        return;
    };
    let mut reaper = node.reaper(config(), false);
    let pods: Vec<_> = [Some(&pod), user.as_ref()].into_iter().flatten().collect();
    listed(&mut reaper, &pods);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3, "a running container sees it");
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_refusals_total{reason=\"in_use\"}"
        ),
        1.0
    );
    assert_eq!(reaper.ledger.records().len(), 1, "it stays recorded");
    // The container stops (and its pod goes): the next time it is due, it is emptied.
    drop(container);
    if let Some(user) = user {
        reaper.on_event(Event::Delete(user));
    }
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 0);
    assert!(reaper.ledger.records().is_empty());
}

#[tokio::test]
async fn in_use_by_identity_a_host_path_spelled_through_a_symlink() {
    let node = Node::new();
    // On the node: /srv/cache -> /mnt/scratch/job. The pod spec says /srv/cache, which
    // no string rule puts on the line of /mnt/scratch/job.
    std::fs::create_dir_all(node.on_host("/srv")).unwrap();
    let link = node.on_host("/srv/cache");
    std::os::unix::fs::symlink(node.on_host("/mnt/scratch/job"), &link).unwrap();
    kept_while_the_container_runs(&node, Some("/srv/cache"), || {
        Container::start_with(&node.root, &link, None)
    })
    .await;
}

#[tokio::test]
async fn in_use_by_identity_a_pv_inside_the_directory() {
    let node = Node::new();
    // A local PV whose path is inside the directory; the pod spec names only its claim.
    let pv = node.on_host("/mnt/scratch/job/nested");
    kept_while_the_container_runs(&node, None, || {
        std::fs::create_dir_all(&pv).unwrap();
        Container::start_with(&node.root, &pv, None)
    })
    .await;
}

#[tokio::test]
async fn in_use_by_identity_a_bind_mount_alias() {
    let node = Node::new();
    // /srv/alias is a bind mount of /mnt/scratch/job (made in the container's namespace,
    // so this machine's mounts stay as they are).
    let alias = node.on_host("/srv/alias");
    std::fs::create_dir_all(&alias).unwrap();
    let dir = node.on_host("/mnt/scratch/job");
    kept_while_the_container_runs(&node, Some("/srv/alias"), || {
        Container::start_with(&node.root, &alias, Some(&dir))
    })
    .await;
}

#[tokio::test]
async fn in_use_by_identity_a_container_of_another_directory_does_not_keep_it() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let other = node.scratch("/mnt/scratch/job2");
    let Some(_container) = Container::start_with(&node.root, &other, None) else {
        return;
    };
    let pod = injected_pod("job-a", "/mnt/scratch/job");
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 0, "job2 is not on the line of job");
    assert_eq!(entries(&other), 3);
}

/// Set in the child of the test below: the directory to check.
const CHECK: &str = "PRESTOP_TEST_REAPER_IN_USE_CHECK";

/// Without the node's processes (a pid namespace of its own, as a pod without
/// `hostPID`), the reaper cannot know who uses a directory: it says so and empties
/// nothing.
#[test]
fn in_use_by_identity_is_unknown_without_the_nodes_processes() {
    if let Some(dir) = std::env::var_os(CHECK) {
        let verdict = prestop_injector::reaper::in_use::check(Path::new(&dir), "/mnt/scratch/job");
        println!("verdict={verdict:?}");
        return;
    }
    let Some((unshare, _)) = tools() else {
        return;
    };
    let node = Node::new();
    let dir = node.scratch(&format!("{PREFIX}/job"));
    let output = Command::new(unshare)
        .args(["-p", "-f", "-m", "--mount-proc"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "in_use_by_identity_is_unknown_without_the_nodes_processes",
            "--nocapture",
        ])
        .env(CHECK, &dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("verdict=Err(Unknown(") && stdout.contains("hostPID"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // And in the node's pid namespace, nothing uses it.
    assert_eq!(
        prestop_injector::reaper::in_use::check(&dir, "/mnt/scratch/job"),
        Ok(())
    );
}

/// The reaper pod's node agent: its container sees the node's whole `/` (here, the
/// node's host directory, above the recorded one) and the pod's marker emptyDir.
const NODE_AGENT: &str = r#"set -eu
root=$1 node=$2 busybox=$3 marker=${4:-}
mount --make-rprivate /
mount -t tmpfs rootfs "$root"
mkdir -p "$root/bin" "$root/node" "$root/marker"
cp "$busybox" "$root/bin/busybox"
mount --bind -o ro "$node" "$root/node"
if [ -n "$marker" ]; then mount --bind -o ro "$marker" "$root/marker"; fi
exec chroot "$root" /bin/busybox sleep 600
"#;

/// Set in the child of the test below: the directory to check, and where the child's
/// own marker is mounted.
const AGENT_CHECK: &str = "PRESTOP_TEST_REAPER_AGENT_CHECK";
const AGENT_MARKER: &str = "PRESTOP_TEST_REAPER_AGENT_MARKER";

/// The reaper's verdict from a process (a mount namespace of its own, like the reaper's
/// container) that has `marker_source` mounted at `marker_point`.
fn verdict_with_marker(
    unshare: &str,
    dir: &Path,
    marker_source: &Path,
    marker_point: &Path,
) -> String {
    let script =
        r#"set -eu; mount --make-rprivate /; mount --bind -o ro "$1" "$2"; shift 2; exec "$@""#;
    let output = Command::new(unshare)
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(marker_source)
        .arg(marker_point)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "in_use_by_identity_the_reapers_own_node_agent_uses_nothing",
            "--nocapture",
        ])
        .env(AGENT_CHECK, dir)
        .env(AGENT_MARKER, marker_point)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        stdout.contains("verdict="),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Issue 26: the node agent runs in the reaper's pod with the node's `/` mounted, which is
/// above every directory. It is known by the pod's marker emptyDir (the same directory
/// mounted in the reaper's own container), never by its name, and uses nothing; the same
/// container without the marker is any container, and keeps the directory.
#[test]
fn in_use_by_identity_the_reapers_own_node_agent_uses_nothing() {
    if let (Some(dir), Some(marker)) = (
        std::env::var_os(AGENT_CHECK),
        std::env::var_os(AGENT_MARKER),
    ) {
        let verdict = prestop_injector::reaper::in_use::check_marked(
            Path::new(&dir),
            "/mnt/scratch/job",
            Path::new(&marker),
            None,
        );
        println!("verdict={verdict:?}");
        return;
    }
    let Some((unshare, busybox)) = tools() else {
        return;
    };
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let pod_marker = node.root.join("pod-marker");
    let other_marker = node.root.join("other-pod-marker");
    let marker_point = node.root.join("reaper-marker-point");
    for path in [&pod_marker, &other_marker, &marker_point] {
        std::fs::create_dir_all(path).unwrap();
    }
    let start = |marker: Option<&Path>| -> Container {
        let root = node.root.join(format!("agent-rootfs-{}", rand_suffix()));
        std::fs::create_dir_all(&root).unwrap();
        let mut command = Command::new(unshare);
        command
            .args(["-m", "sh", "-c", NODE_AGENT, "sh"])
            .arg(&root)
            .arg(&node.host)
            .arg(&busybox);
        if let Some(marker) = marker {
            command.arg(marker);
        }
        let container = Container(command.stdin(Stdio::null()).spawn().unwrap());
        let comm = PathBuf::from(format!("/proc/{}/comm", container.0.id()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::read_to_string(&comm)
            .ok()
            .as_deref()
            .map(str::trim)
            != Some("busybox")
        {
            assert!(Instant::now() < deadline, "the agent did not start");
            std::thread::sleep(Duration::from_millis(5));
        }
        container
    };
    // With the reaper pod's marker: the agent is the reaper's own, and uses nothing.
    let agent = start(Some(&pod_marker));
    let verdict = verdict_with_marker(unshare, &dir, &pod_marker, &marker_point);
    assert!(verdict.contains("verdict=Ok(())"), "{verdict}");
    drop(agent);
    // Another pod's marker, or none: any container with the node's `/` keeps it.
    for marker in [Some(other_marker.as_path()), None] {
        let _stranger = start(marker);
        let verdict = verdict_with_marker(unshare, &dir, &pod_marker, &marker_point);
        assert!(
            verdict.contains("verdict=Err(InUse("),
            "{marker:?}: {verdict}"
        );
    }
    assert_eq!(entries(&dir), 3);
}
