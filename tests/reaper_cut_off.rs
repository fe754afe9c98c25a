//! docs/REAPER.md#metrics: `prestop_injector_reaper_cut_off_cleanups_finished_total` counts
//! the directories the reaper empties that hold the marker of a cleanup cut off by its
//! deadline, and the marker never changes what is emptied.

mod core_support;
mod reaper_support;

use kube::runtime::watcher::Event;
use prestop_clean::CUT_OFF_MARKER;
use reaper_support::{config, entries, injected_pod, listed, metric, other_pod, Node};

const CUT_OFF: &str = "prestop_injector_reaper_cut_off_cleanups_finished_total";

#[tokio::test]
async fn a_cut_off_cleanup_finished_by_the_reaper_is_counted_once() {
    let node = Node::new();
    let cut = node.scratch("/mnt/scratch/cut");
    std::fs::write(cut.join(CUT_OFF_MARKER), b"").unwrap();
    let plain = node.scratch("/mnt/scratch/plain");
    let (a, b) = (
        injected_pod("job-a", "/mnt/scratch/cut"),
        injected_pod("job-b", "/mnt/scratch/plain"),
    );
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&a, &b]);
    reaper.on_event(Event::Delete(a));
    reaper.on_event(Event::Delete(b));
    reaper.act_on_due().await;
    let text = reaper.metrics.encode();
    assert_eq!(entries(&cut), 0, "{text}");
    assert_eq!(entries(&plain), 0, "{text}");
    assert_eq!(metric(&reaper, CUT_OFF), 1.0, "{text}");
    assert_eq!(
        metric(&reaper, "prestop_injector_reaper_directories_emptied_total"),
        2.0
    );
}

/// The attacker's test: a tenant forges the marker in a directory a pod still uses. The
/// reaper empties nothing it would not have, and counts nothing.
#[tokio::test]
async fn a_forged_marker_in_a_directory_in_use_changes_nothing() {
    let node = Node::new();
    let dir = node.scratch("/mnt/scratch/job");
    std::fs::write(dir.join(CUT_OFF_MARKER), b"").unwrap();
    let gone = injected_pod("job-a", "/mnt/scratch/job");
    let user = other_pod("still-here", "/mnt/scratch/job");
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&gone, &user]);
    reaper.on_event(Event::Delete(gone));
    reaper.act_on_due().await;
    let text = reaper.metrics.encode();
    assert_eq!(entries(&dir), 4, "kept, marker and all: {text}");
    assert_eq!(metric(&reaper, CUT_OFF), 0.0, "{text}");
}
