//! Issue 17, class 9: a directory of millions of entries must not take the walk's memory
//! with it. The walk streams each directory while it removes its entries, so its peak
//! memory does not depend on how many entries a directory holds.
//!
//! The walk runs in a child process (this test binary again, with [`CHILD`] set), which
//! prints its own peak RSS (`VmHWM` in `/proc/self/status`) after emptying the directory:
//! the parent compares a directory of 20,000 entries with one of 200,000.

mod support;

use std::fs;
use std::path::Path;
use std::process::Command;

use support::Sandbox;

/// Set in the child: the directory to empty.
const CHILD: &str = "PRESTOP_CLEAN_TEST_HUGE_TARGET";

/// Long names, as generated files have: a listing held in memory costs ~100 bytes per
/// entry, 20 MB for 200,000, which the old walk held at once.
fn name(i: usize) -> String {
    format!("part-{i:08}-0f3c9a1e7b2d4c5f8a6e9d0c1b2a3f4e5d6c7b8a.tmp")
}

/// `count` entries in `dir`: hard links to one file (cheap on tmpfs: a name each, no
/// inode), a few directories among them.
fn fill(dir: &Path, count: usize) {
    fs::create_dir_all(dir).unwrap();
    let file = dir.join("first");
    fs::write(&file, b"x").unwrap();
    for i in 1..count {
        if i % 10_000 == 0 {
            fs::create_dir(dir.join(name(i))).unwrap();
            fs::write(dir.join(name(i)).join("inner"), b"x").unwrap();
        } else {
            fs::hard_link(&file, dir.join(name(i))).unwrap();
        }
    }
}

/// Peak RSS in KiB of a child that empties `dir`, and what it removed.
fn walk_in_child(dir: &Path) -> (u64, u64) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "huge_directory_walk_uses_bounded_memory",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let value = |key: &str| -> u64 {
        stdout
            .lines()
            .find_map(|line| line.split(key).nth(1)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {stdout}"))
    };
    (value("hwm_kib="), value("removed="))
}

#[test]
fn huge_directory_walk_uses_bounded_memory() {
    if let Some(target) = std::env::var_os(CHILD) {
        let report = prestop_clean::empty_directory(target.to_str().unwrap());
        assert!(report.is_clean(), "{}", report.summary());
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let hwm = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim();
        println!("hwm_kib={hwm}");
        println!("removed={}", report.removed);
        return;
    }
    let sandbox = Sandbox::on_tmpfs();
    let small = sandbox.target.join("small");
    let huge = sandbox.target.join("huge");
    fill(&small, 20_000);
    fill(&huge, 200_000);
    let (small_hwm, small_removed) = walk_in_child(&small);
    let (huge_hwm, huge_removed) = walk_in_child(&huge);
    // Every entry, plus the file inside each of the directories among them.
    assert_eq!(small_removed, 20_000 + 1);
    assert_eq!(huge_removed, 200_000 + 19);
    assert_eq!(fs::read_dir(&huge).unwrap().count(), 0);
    // Ten times the entries; the old walk held every name: +18 MB here.
    let growth = huge_hwm.saturating_sub(small_hwm);
    assert!(
        growth < 2048,
        "peak RSS grew by {growth} KiB from 20,000 to 200,000 entries \
         ({small_hwm} KiB → {huge_hwm} KiB): the walk's memory depends on the directory's size"
    );
    sandbox.assert_canary();
}

/// A wide directory whose stream is closed while a deep child (deeper than the
/// descriptor window) is walked, and resumed after it: nothing is skipped, nothing is
/// walked twice, one pass.
#[test]
fn a_wide_directory_above_the_window_resumes_where_it_was() {
    let sandbox = Sandbox::on_tmpfs();
    let wide = sandbox.target.join("wide");
    fs::create_dir(&wide).unwrap();
    // The deep child in the middle of the directory, whatever order it is read in.
    let files = |range: std::ops::Range<usize>| {
        for i in range {
            fs::write(wide.join(name(i)), b"x").unwrap();
        }
    };
    files(0..1_500);
    let levels = prestop_clean::WINDOW + 8;
    let mut deep = wide.join("m-deep");
    for level in 0..levels {
        deep.push(format!("l{level}"));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("f"), b"x").unwrap();
    files(1_500..3_000);
    let report = prestop_clean::empty_directory(sandbox.target.to_str().unwrap());
    assert!(report.is_clean(), "{}", report.summary());
    assert_eq!(report.passes, 1, "{}", report.summary());
    // 3,000 files, `m-deep`, its levels and the file at the bottom, `wide` itself.
    assert_eq!(report.removed, 3_000 + 1 + levels as u64 + 1 + 1);
    assert_eq!(report.bytes, 3_000 + 1);
    assert!(fs::read_dir(&sandbox.target).unwrap().next().is_none());
    sandbox.assert_canary();
}
