//! Issue 26, items 2 and 4, end to end in one process on real directories: the reaper
//! removes only what the gone pod's own user could have removed (its walk is the
//! cleaner program as that user), refuses when that user is not known, and stops its
//! walk when a container starts using the directory meanwhile.

mod core_support;
mod reaper_support;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use prestop_injector::reaper::user::{PodUser, RecordedUser};
use reaper_support::container::Container;
use reaper_support::{
    config, entries, injected_pod, injected_pod_with, listed, metric, Node, PREFIX,
};
use serde_json::{json, Value};
use std::os::unix::fs::{chown, PermissionsExt as _};
use std::path::Path;
use std::time::{Duration, Instant};

fn refusals(reaper: &prestop_injector::reaper::node::Reaper, reason: &str) -> f64 {
    metric(
        reaper,
        &format!("prestop_injector_reaper_refusals_total{{reason=\"{reason}\"}}"),
    )
}

fn owned(path: &Path, uid: u32, mode: Option<u32>) {
    chown(path, Some(uid), Some(uid)).unwrap();
    if let Some(mode) = mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

fn as_user(uid: u32, gid: u32) -> Value {
    json!({"runAsUser": uid, "runAsGroup": gid})
}

/// A uid-1000 Job's directory holding another tenant's 0700 directory and a sticky
/// directory with another user's file: after a force delete the reaper removes the
/// pod's own files and leaves the rest, reported as survivors, as the pod's own hook
/// would have.
#[tokio::test]
async fn other_tenants_directory_is_not_emptied() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    for entry in [
        "",
        "out.bin",
        ".hidden",
        "nested",
        "nested/deeper",
        "nested/deeper/x",
    ] {
        owned(&dir.join(entry), 1000, None);
    }
    let tenant = dir.join("other-tenant");
    std::fs::create_dir(&tenant).unwrap();
    std::fs::write(tenant.join("secret"), b"theirs").unwrap();
    owned(&tenant.join("secret"), 2000, None);
    owned(&tenant, 2000, Some(0o700));
    let sticky = dir.join("sticky");
    std::fs::create_dir(&sticky).unwrap();
    owned(&sticky, 0, Some(0o1777));
    std::fs::write(sticky.join("theirs"), b"theirs").unwrap();
    owned(&sticky.join("theirs"), 2000, None);

    let pod = injected_pod_with("job-a", "/mnt/scratch/job", as_user(1000, 1000));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;

    assert_eq!(std::fs::read(tenant.join("secret")).unwrap(), b"theirs");
    assert_eq!(std::fs::read(sticky.join("theirs")).unwrap(), b"theirs");
    let mut left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["other-tenant", "sticky"], "the pod's own files go");
    assert_eq!(refusals(&reaper, "survivors"), 1.0);
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_entries_removed_total"),
        5.0
    );
    assert!(reaper.ledger.records().is_empty(), "dealt with: forgotten");
}

/// No runAsUser/runAsGroup anywhere (the image's USER decides): nothing is emptied, the
/// metric and the record say why. A record of an older reaper's state file (no user)
/// is refused the same way.
#[tokio::test]
async fn unknown_user_is_refused() {
    for context in [
        json!({}),
        json!({"runAsUser": 1000}),
        json!({"runAsGroup": 1000}),
    ] {
        let node = Node::new();
        let dir = node.scratch("/mnt/scratch/job");
        let pod = injected_pod_with("job-a", "/mnt/scratch/job", context.clone());
        let mut reaper = node.reaper(config(), false);
        listed(&mut reaper, &[&pod]);
        let user = &reaper.ledger.records()["/mnt/scratch/job"][0].user;
        assert!(
            matches!(user, RecordedUser::Unknown(why) if why.contains("set both")),
            "{context}: {user:?}"
        );
        reaper.on_event(Event::Delete(pod));
        reaper.act_on_due().await;
        assert_eq!(entries(&dir), 3, "{context}");
        assert_eq!(refusals(&reaper, "user_unknown"), 1.0, "{context}");
        assert!(reaper.ledger.records().is_empty());
    }

    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let old = json!({"version": 1, "node": "node-a", "directories": [
        {"path": "/mnt/scratch/job", "pods": [{"uid": "u1", "namespace": "x", "name": "x"}]}]});
    std::fs::write(&node.state, old.to_string()).unwrap();
    let mut reaper = node.reaper(config(), false);
    assert_eq!(
        reaper.ledger.records().len(),
        1,
        "an old state file still loads"
    );
    listed(&mut reaper, &[]);
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "user_unknown"), 1.0);
}

/// What the pod's preStop leaves: its directory, empty.
fn empty_as_its_prestop_did(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
}

/// A pod without runAsUser whose cleanup in the pod emptied its directory (the common
/// case): nothing is left to walk, so its user is not needed and no refusal is counted.
/// Counting one made PrestopInjectorReaperKeepingDirectories page for every such pod
/// (issue 39, seen by e2e/install's live Prometheus). A directory that holds anything is
/// still refused as before (`unknown_user_is_refused`).
#[tokio::test]
async fn a_directory_its_cleanup_emptied_needs_no_user() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let pod = injected_pod_with("job-a", "/mnt/scratch/job", json!({}));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    // The pod's preStop empties it, then the pod goes.
    empty_as_its_prestop_did(&dir);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(refusals(&reaper, "user_unknown"), 0.0);
    assert_eq!(
        metric(
            &reaper,
            "prestop_injector_reaper_directories_already_empty_total"
        ),
        1.0
    );
    assert!(dir.is_dir(), "the directory itself stays");
    assert!(reaper.ledger.records().is_empty(), "dealt with: forgotten");
}

/// The same, for a per-pod directory (issue 38, class 8): emptied by its pod's own cleanup,
/// it is removed with no user needed; one that still holds a file keeps it, and is refused
/// as `user_unknown`: nothing is removed on an unknown user's behalf.
#[tokio::test]
async fn a_per_pod_directory_its_cleanup_emptied_is_removed_without_a_user() {
    const UID: &str = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d";
    let node = Node::new();
    let dir = node.scratch(&format!("/mnt/scratch/{UID}"));
    let mut pod = injected_pod_with("job-a", &format!("/mnt/scratch/{UID}"), json!({}));
    pod.metadata.uid = Some(UID.to_owned());
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    empty_as_its_prestop_did(&dir);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert!(!dir.exists(), "its own emptied directory is removed");
    assert_eq!(refusals(&reaper, "user_unknown"), 0.0);

    const FULL: &str = "6b5c4d3e-2f10-4b0c-9d8e-7f6a5b4c3d2e";
    let node = Node::new();
    let dir = node.scratch(&format!("/mnt/scratch/{FULL}"));
    let mut pod = injected_pod_with("job-b", &format!("/mnt/scratch/{FULL}"), json!({}));
    pod.metadata.uid = Some(FULL.to_owned());
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3, "not emptied by the pod: kept whole");
    assert_eq!(refusals(&reaper, "user_unknown"), 1.0);
}

/// `hostUsers: false`: the pod's uids are mapped to others on the node, so its rights
/// there are not known, whatever runAsUser says.
#[tokio::test]
async fn user_namespace_pod_is_refused() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let mut pod = serde_json::to_value(injected_pod("job-a", "/mnt/scratch/job")).unwrap();
    pod["spec"]["hostUsers"] = json!(false);
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "user_unknown"), 1.0);
}

/// The kubelet's `status.containerStatuses[].user.linux` is what the container really
/// ran as (the image's USER included): it wins over the spec, and a pod first seen
/// without it is recorded again once the kubelet reports it.
#[tokio::test]
async fn the_identity_comes_from_the_kubelet_when_it_says() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let mine = dir.join("mine");
    std::fs::write(&mine, b"x").unwrap();
    owned(&mine, 1000, None);
    owned(&dir, 1000, None);
    // The spec knows nothing: the image decides.
    let pending = injected_pod_with("job-a", "/mnt/scratch/job", json!({}));
    let mut running = serde_json::to_value(&pending).unwrap();
    running["status"] = json!({"containerStatuses": [{
        "name": "app", "image": "busybox", "imageID": "", "ready": true, "restartCount": 0,
        "user": {"linux": {"uid": 1000, "gid": 3000, "supplementalGroups": [4000, 3000]}}}]});
    let running: Pod = serde_json::from_value(running).unwrap();
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pending]);
    assert!(matches!(
        reaper.ledger.records()["/mnt/scratch/job"][0].user,
        RecordedUser::Unknown(_)
    ));
    reaper.on_event(Event::Apply(running.clone()));
    assert_eq!(
        reaper.ledger.records()["/mnt/scratch/job"][0].user,
        RecordedUser::Known(PodUser {
            uid: 1000,
            gid: 3000,
            groups: vec![3000, 4000]
        })
    );
    // And over a spec that says otherwise (root).
    let mut spec_says_root = serde_json::to_value(&running).unwrap();
    spec_says_root["spec"]["securityContext"] = as_user(0, 0);
    reaper.on_event(Event::Apply(
        serde_json::from_value(spec_says_root).unwrap(),
    ));
    reaper.on_event(Event::Delete(running));
    reaper.act_on_due().await;
    // As uid 1000: everything in its own directory went (unlinking needs rights on the
    // directory, not the file), but not what is inside root's `nested`, which root
    // would have removed.
    assert!(!mine.exists());
    assert_eq!(entries(&dir), 1);
    assert!(dir.join("nested/deeper/x").exists());
    assert_eq!(refusals(&reaper, "survivors"), 1.0);
}

/// Two gone pods recorded one directory as different users: the reaper does not pick.
#[tokio::test]
async fn pods_of_one_directory_as_different_users_are_refused() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    let a = injected_pod_with("job-a", "/mnt/scratch/job", as_user(1000, 1000));
    let b = injected_pod_with("job-b", "/mnt/scratch/job", as_user(2000, 2000));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&a, &b]);
    reaper.on_event(Event::Delete(a));
    reaper.on_event(Event::Delete(b));
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 3);
    assert_eq!(refusals(&reaper, "user_ambiguous"), 1.0);
}

/// Set in the child of `a_walk_of_another_uid_is_stopped_without_cap_kill`.
const NO_CAP_KILL: &str = "PRESTOP_TEST_REAPER_NO_CAP_KILL";

/// Issue 26, item 4: a container that mounts the directory while the reaper walks it
/// (a new mount namespace with a bind mount of it, as a runtime makes one). The walk is
/// stopped within one check interval, the files not yet reached stay, the directory
/// stays recorded and is emptied once that container is gone.
#[tokio::test]
async fn a_user_arriving_mid_walk_stops_the_walk() {
    if std::env::var_os(NO_CAP_KILL).is_some() {
        return;
    }
    mid_walk_arrival(0, 200).await;
}

/// The same as the DaemonSet runs it: the reaper without CAP_KILL (this test binary
/// again, under `setpriv`), the walk as uid 1000, which the reaper may not signal. The
/// closed stop line ends it all the same.
#[tokio::test]
async fn a_walk_of_another_uid_is_stopped_without_cap_kill() {
    if std::env::var_os(NO_CAP_KILL).is_some() {
        mid_walk_arrival(1000, 100).await;
        return;
    }
    let Some(setpriv) = ["/usr/bin/setpriv", "/bin/setpriv"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
    else {
        reaper_support::container::skip("setpriv is needed");
        return;
    };
    let output = std::process::Command::new(setpriv)
        .args(["--bounding-set", "-kill", "--inh-caps", "-kill", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_walk_of_another_uid_is_stopped_without_cap_kill",
            "--nocapture",
        ])
        .env(NO_CAP_KILL, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}: {stdout}\n{stderr}",
        output.status
    );
    assert!(
        stderr.contains("walk as uid 1000 (without CAP_KILL) stopped"),
        "{stderr}"
    );
}

/// A walk of `dirs` × 1,000 files as `uid`, and a container arriving once it has begun.
async fn mid_walk_arrival(uid: u32, dirs: usize) {
    const FILES: usize = 1000;
    let node = Node::new();
    let dir = node.on_host("/mnt/scratch/job");
    for d in 0..dirs {
        let sub = dir.join(format!("d{d:03}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..FILES {
            std::fs::write(sub.join(format!("f{f:04}")), b"").unwrap();
        }
    }
    let chowned = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(chowned.success());
    let pod = injected_pod_with("job-a", "/mnt/scratch/job", as_user(uid, uid));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod]);
    reaper.on_event(Event::Delete(pod));

    // The arriving container: started once the walk has removed a first directory.
    let (watched, scratch) = (dir.clone(), node.root.clone());
    let arrival = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while (0..dirs).all(|d| watched.join(format!("d{d:03}")).exists()) {
            assert!(Instant::now() < deadline, "the walk did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        let container = Container::start(&scratch, &watched);
        (container, Instant::now())
    });
    let walk_started = Instant::now();
    reaper.act_on_due().await;
    let walk_ended = Instant::now();
    let (container, arrived) = arrival.join().unwrap();
    let Some(container) = container else {
        return;
    };
    let left: usize = (0..dirs)
        .map(|d| entries(&dir.join(format!("d{d:03}"))))
        .sum();
    let removed = metric(&reaper, "prestop_injector_reaper_entries_removed_total");
    let cap_kill = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|bits| u64::from_str_radix(bits.trim(), 16).ok())
        .is_some_and(|bits| bits & (1 << 5) != 0);
    eprintln!(
        "walk as uid {uid} ({}) stopped {:?} after the container arrived ({:?} into the \
         walk): {left} files left, {removed} entries reported removed",
        if cap_kill {
            "with CAP_KILL"
        } else {
            "without CAP_KILL"
        },
        walk_ended - arrived,
        arrived - walk_started
    );
    assert!(
        left > dirs * FILES / 2,
        "the walk went on after the container arrived: {left} files left"
    );
    assert_eq!(refusals(&reaper, "in_use"), 1.0);
    assert!(removed > 0.0, "the partial counts are reported");
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_directories_emptied_total"),
        0.0
    );
    assert!(
        reaper
            .ledger
            .records()
            .contains_key(&format!("{PREFIX}/job")),
        "it stays recorded"
    );

    drop(container);
    reaper.act_on_due().await;
    assert_eq!(entries(&dir), 0, "emptied once the container is gone");
}

/// The walk's first look comes before the cleaner starts, not one interval into the walk:
/// the last full check was made before the walk's own watch listed the node (seconds on a
/// busy API server), and a pod bound meanwhile is a user from its binding on. Here the
/// look finds a user at once: nothing is removed. Before, the cleaner ran for one
/// interval first (here 300 ms: every file).
#[test]
fn a_user_found_before_the_walk_starts_loses_nothing() {
    use prestop_clean::in_use::Busy;
    use prestop_injector::reaper::node::guard::{walk_as, Walked, GUARD_INTERVAL};
    let Some(cleaner) = reaper_support::cleaner::program() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for f in 0..100 {
        std::fs::write(dir.path().join(format!("f{f}")), b"").unwrap();
    }
    let user = PodUser {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
    };
    let looks = std::sync::atomic::AtomicUsize::new(0);
    let walked = walk_as(
        cleaner,
        &user,
        dir.path().to_str().unwrap(),
        GUARD_INTERVAL * 3,
        &|| {
            looks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(Busy::InUse(
                "a pod bound while the walk's watch listed".to_owned(),
            ))
        },
    );
    assert!(
        matches!(walked, Walked::Stopped { removed: 0, .. }),
        "{walked:?}"
    );
    assert_eq!(looks.into_inner(), 1);
    assert_eq!(entries(dir.path()), 100);
}

/// The reaper is stopped (a rollout, a node drain) during a long walk: the walk stops at
/// its next look instead of holding the reaper past its grace period, the directory stays
/// recorded, and the state file names no walk under way, so the restarted reaper walks
/// it again without counting a crash (three of which give a directory up). Before, the
/// stop was seen only once the walk ended; a kill at the grace period's end counted as
/// a crashed walk.
#[tokio::test]
async fn a_reaper_stopped_mid_walk_stops_the_walk_and_takes_it_up_again() {
    const DIRS: usize = 100;
    let node = Node::new();
    let dir = node.on_host("/mnt/scratch/job");
    for d in 0..DIRS {
        let sub = dir.join(format!("d{d:03}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..1000 {
            std::fs::write(sub.join(format!("f{f:04}")), b"").unwrap();
        }
    }
    let pod = injected_pod_with("job-a", "/mnt/scratch/job", as_user(0, 0));
    // A second directory due after it: not walked once the reaper is stopping.
    let next = node.scratch("/mnt/scratch/next");
    let other = injected_pod_with("job-b", "/mnt/scratch/next", as_user(0, 0));
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&pod, &other]);
    reaper.on_event(Event::Delete(pod));
    reaper.on_event(Event::Delete(other));
    let (stopping, watched) = (reaper.stopping.clone(), dir.clone());
    let stopper = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(120);
        while (0..DIRS).all(|d| watched.join(format!("d{d:03}")).exists()) {
            assert!(Instant::now() < deadline, "the walk did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        stopping.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    reaper.act_on_due().await;
    stopper.join().unwrap();
    let left: usize = (0..DIRS)
        .map(|d| entries(&dir.join(format!("d{d:03}"))))
        .sum();
    assert!(left > 0, "the walk went on to the end");
    assert_eq!(refusals(&reaper, "in_use_unknown"), 0.0, "not a refusal");
    let loaded = prestop_injector::reaper::state::load(&node.state, "node-a");
    assert!(loaded.walking.is_none(), "{:?}", loaded.walking);
    for directory in ["job", "next"] {
        assert!(
            loaded
                .records
                .contains_key(&format!("{PREFIX}/{directory}")),
            "{directory} stays recorded"
        );
    }
    assert_eq!(entries(&next), 3, "not walked while stopping");
}
