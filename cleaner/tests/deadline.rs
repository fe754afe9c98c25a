//! `--deadline S`: a cleanup that cannot finish in time stops itself, prints one line
//! saying how far it got and what it left, leaves the reaper's marker, and exits 1; one
//! that finishes in time is unchanged.

mod support;

use std::fs;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use prestop_clean::argv::{Before, HookArgs, Target};
use prestop_clean::CUT_OFF_MARKER;
use support::agent::NodeAgent;
use support::{stderr, Sandbox, BIN};

fn hook(sandbox: &Sandbox, deadline: Option<u64>, before: Before) -> HookArgs {
    let path = sandbox.target.display().to_string();
    HookArgs {
        deadline,
        node_agent: None,
        before,
        targets: vec![Target {
            whole_filesystem: true,
            ..Target::on_host(path.clone(), path)
        }],
        script: None,
    }
}

/// Runs the hook; its stderr through a file, as the program's own exit is what counts
/// (a handler it left running may hold a pipe open).
fn run(sandbox: &Sandbox, args: &HookArgs) -> (Output, Duration) {
    // The sandbox is on the test machine's filesystem: cleaned on the node's word.
    let agent = NodeAgent::start();
    let args = HookArgs {
        node_agent: Some(agent.socket.display().to_string()),
        ..args.clone()
    };
    let argv = args.render(BIN);
    let log = sandbox.dir.path().join("stderr");
    let start = Instant::now();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        // One worker: the slowest walk, so that the tree below outlasts the deadline.
        .env("PRESTOP_CLEAN_JOBS", "1")
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stderr(fs::File::create(&log).unwrap())
        .status()
        .expect("run prestop-clean");
    let took = start.elapsed();
    let output = Output {
        status,
        stdout: Vec::new(),
        stderr: fs::read(&log).unwrap(),
    };
    (output, took)
}

/// Every entry below `dir`, the marker left out.
fn count(dir: &std::path::Path) -> u64 {
    let mut n = 0;
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == CUT_OFF_MARKER {
            continue;
        }
        n += 1;
        if entry.file_type().unwrap().is_dir() {
            n += count(&entry.path());
        }
    }
    n
}

/// The number after `removed ` in the cut-off line.
fn removed_in(line: &str) -> u64 {
    let after = line.split("removed ").nth(1).expect(line);
    let digits: String = after
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().expect(line)
}

#[test]
fn a_cleanup_cut_off_by_its_deadline_reports_what_it_did_and_left() {
    let sandbox = Sandbox::new();
    // 120,000 files: with one worker, far more than the ~0.2 s the deadline leaves
    // after the user's handler.
    for d in 0..60 {
        let dir = sandbox.target.join(format!("d{d}"));
        fs::create_dir(&dir).unwrap();
        for f in 0..2000 {
            fs::write(dir.join(format!("f{f}")), b"x").unwrap();
        }
    }
    let total = count(&sandbox.target);
    // The user's handler runs inside the deadline, as in a real hook.
    let before = Before::Exec(vec!["sleep".into(), "0.8".into()]);
    let (output, took) = run(&sandbox, &hook(&sandbox, Some(1), before));
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one line, the cut-off's: {text}");
    let line = lines[0];
    let target = sandbox.target.display().to_string();
    assert!(
        line.starts_with("prestop-clean: cut off by its deadline, 1 s after the start: removed ")
            && line.ends_with(&format!(
                "; left for the node reaper: {target} (not finished)"
            )),
        "{line}"
    );
    // Stopped by itself at the deadline, not by the timer's fallback: exact counts.
    assert!(!line.contains("had not returned"), "{line}");
    let left = count(&sandbox.target);
    assert!(left > 0, "the tree outlasted the deadline: {line}");
    assert_eq!(removed_in(line), total - left, "{line}");
    assert!(line.contains(" B in ") || line.contains("iB in "), "{line}");
    // Before the kubelet's kill, which the webhook puts a margin after the deadline.
    assert!(took < Duration::from_secs(2), "took {took:?}");
    let marker = fs::symlink_metadata(sandbox.target.join(CUT_OFF_MARKER)).unwrap();
    assert!(marker.file_type().is_file() && marker.len() == 0);
    sandbox.assert_canary();
}

#[test]
fn a_handler_that_outlasts_the_deadline_still_gets_a_report_in_time() {
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("a"), b"x").unwrap();
    let before = Before::Exec(vec!["sleep".into(), "4".into()]);
    let (output, took) = run(&sandbox, &hook(&sandbox, Some(1), before));
    let text = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let target = sandbox.target.display().to_string();
    assert!(
        text.contains("cut off by its deadline, 1 s after the start: removed 0 entries, 0 B")
            && text.ends_with(&format!(
                "left for the node reaper: {target} (not started)\n"
            )),
        "{text}"
    );
    // The deadline plus the one second the walk has to stop, not the handler's 4.
    assert!(took < Duration::from_millis(3500), "took {took:?}");
    assert!(sandbox.target.join("a").exists());
}

#[test]
fn a_cleanup_that_ends_in_time_is_unchanged_by_its_deadline() {
    let sandbox = Sandbox::new();
    fs::create_dir(sandbox.target.join("d")).unwrap();
    fs::write(sandbox.target.join("d/f"), b"hello").unwrap();
    let (with, _) = run(&sandbox, &hook(&sandbox, Some(30), Before::Nothing));
    fs::create_dir(sandbox.target.join("d")).unwrap();
    fs::write(sandbox.target.join("d/f"), b"hello").unwrap();
    let (without, _) = run(&sandbox, &hook(&sandbox, None, Before::Nothing));
    assert_eq!(with.status.code(), Some(0), "{}", stderr(&with));
    assert_eq!(without.status.code(), Some(0));
    // The same line but for the seconds.
    let shape = |o: &Output| stderr(o).split(" in ").next().unwrap().to_owned();
    assert_eq!(shape(&with), shape(&without));
    assert!(stderr(&with).starts_with("prestop-clean: emptied "));
    sandbox.assert_emptied();
    assert!(!sandbox.target.join(CUT_OFF_MARKER).exists());
}
