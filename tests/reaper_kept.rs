//! Issue 32, finding 2: "nothing says so". Every recorded directory that is not emptied
//! says why, by reason: `prestop_injector_reaper_kept_directories{reason}` (a gauge, the
//! closed set of docs/REAPER.md#what-you-see), and one log line when the reason changes.

mod core_support;
mod reaper_support;

use kube::runtime::watcher::Event;
use prestop_injector::reaper::ledger::Ledger;
use reaper_support::{config, injected_pod, listed, metric, other_pod, Node};
use std::os::unix::fs::symlink;
use std::process::Command;
use std::time::Duration;

const DIR: &str = "/mnt/scratch/job";

fn kept(reaper: &prestop_injector::reaper::node::Reaper, reason: &str) -> f64 {
    metric(
        reaper,
        &format!("prestop_injector_reaper_kept_directories{{reason=\"{reason}\"}}"),
    )
}

#[tokio::test]
async fn every_kept_directory_says_why() {
    let node = Node::new();
    node.scratch(DIR);
    let job = injected_pod("job-a", DIR);
    let other = other_pod("web", DIR);
    let mut reaper = node.reaper(config(), false);
    listed(&mut reaper, &[&job, &other]);
    reaper.act_on_due().await;
    assert_eq!(kept(&reaper, "pod_exists"), 1.0);
    reaper.on_event(Event::Delete(job.clone()));
    reaper.act_on_due().await;
    assert_eq!(kept(&reaper, "pod_exists"), 0.0);
    assert_eq!(kept(&reaper, "pod_uses"), 1.0, "web mounts it");
    // By identity only (a symlink on the node): the check's verdict.
    let link = node.on_host("/data/cache");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    symlink(DIR, &link).unwrap();
    reaper.on_event(Event::Delete(other));
    reaper.on_event(Event::Apply(other_pod("web2", "/data/cache")));
    reaper.act_on_due().await;
    assert_eq!(kept(&reaper, "pod_uses"), 0.0);
    assert_eq!(
        kept(&reaper, "in_use"),
        1.0,
        "web2 reaches it through /data/cache"
    );
    // A directory that cannot be placed: in_use_unknown.
    node.scratch("/mnt/scratch/real/job2");
    symlink("real", node.on_host("/mnt/scratch/link")).unwrap();
    let mut reaper = node.reaper(config(), false);
    let behind = injected_pod("job-b", "/mnt/scratch/link/job2");
    listed(&mut reaper, &[&behind]);
    reaper.on_event(Event::Delete(behind));
    reaper.act_on_due().await;
    assert_eq!(kept(&reaper, "in_use_unknown"), 1.0);
    // The delay, and a watch out of sync.
    let mut reaper = node.reaper(config(), false);
    reaper.ledger = Ledger::new(Duration::from_secs(60));
    listed(&mut reaper, &[&job]);
    reaper.on_event(Event::Delete(job));
    reaper.act_on_due().await;
    assert_eq!(kept(&reaper, "delay"), 1.0);
    reaper.ledger.watch_lost();
    reaper.report_kept();
    assert_eq!(kept(&reaper, "delay"), 0.0);
    assert_eq!(kept(&reaper, "watch_not_synced"), 1.0);
    // Prometheus's own linter accepts the family. (Only it: the counters are exposed in
    // OpenMetrics, `# HELP x` over `x_total`, which promtool's Prometheus-text linter
    // reports as "no help text"; the reaper serves application/openmetrics-text.)
    let promtool = std::path::Path::new("/usr/bin/promtool");
    if !promtool.is_file() {
        reaper_support::container::skip("promtool is needed");
        return;
    }
    let checked = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .output_with(
            reaper
                .metrics
                .encode()
                .lines()
                .filter(|line| line.contains("_kept_directories"))
                .map(|line| format!("{line}\n"))
                .collect(),
        );
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}

trait OutputWith {
    fn output_with(&mut self, input: String) -> std::process::Output;
}

impl OutputWith for Command {
    fn output_with(&mut self, input: String) -> std::process::Output {
        use std::io::Write as _;
        let mut child = self
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }
}
