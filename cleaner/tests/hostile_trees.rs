//! The real binary against trees an application could leave behind, as root and as an
//! unprivileged user (65534, owning the tree): everything below the target goes, the
//! target stays, and nothing outside it is touched.

mod support;

use std::ffi::OsStr;
use std::fs;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Instant;

use rustix::fs::{mkdirat, mknodat, openat, FileType, Mode, OFlags, CWD};
use support::{clean, entries, stderr, users, Sandbox, User};

/// Names a shell or a careless parser would trip on.
fn hostile_names() -> Vec<Vec<u8>> {
    vec![
        b"a\nb".to_vec(),
        b"\n".to_vec(),
        b"-rf".to_vec(),
        b"--target".to_vec(),
        b"--".to_vec(),
        b"\xff\xfe invalid utf-8".to_vec(),
        vec![b'x'; 255],
        b".dot".to_vec(),
        b"...".to_vec(),
        b" leading space".to_vec(),
        b"*".to_vec(),
        b"$(touch pwned)".to_vec(),
        b"back\\slash".to_vec(),
    ]
}

/// Every kind of entry, with links that point at the canary.
fn plant_hostile_tree(sandbox: &Sandbox) {
    let t = &sandbox.target;
    let canary = &sandbox.canary;
    for name in hostile_names() {
        let name = OsStr::from_bytes(&name);
        fs::write(t.join(name), "junk").expect("write hostile name");
        let mut dir_name = [b"d", name.as_bytes()].concat();
        dir_name.truncate(255);
        let dir = t.join(OsStr::from_bytes(&dir_name));
        fs::create_dir(&dir).expect("mkdir hostile name");
        fs::write(dir.join(name), "junk").expect("write");
    }
    // Symlinks to outside directories and files, absolute and relative; loops; dangling.
    symlink(canary, t.join("to-canary-dir")).expect("symlink");
    symlink(canary.join("keep"), t.join("to-canary-file")).expect("symlink");
    symlink("../canary", t.join("relative-to-canary")).expect("symlink");
    symlink("/", t.join("to-root")).expect("symlink");
    symlink("loop2", t.join("loop1")).expect("symlink");
    symlink("loop1", t.join("loop2")).expect("symlink");
    symlink("self", t.join("self")).expect("symlink");
    symlink("/nonexistent/x", t.join("dangling")).expect("symlink");
    fs::create_dir_all(t.join("sub/deeper")).expect("mkdir");
    symlink("../../../canary", t.join("sub/deeper/up")).expect("symlink");
    symlink(canary, t.join("sub/deeper/abs")).expect("symlink");
    // A hard link to an outside file: the link goes, the file stays.
    fs::hard_link(canary.join("hardkeep"), t.join("hard")).expect("hard link");
    // FIFO and socket (nobody ever opens them; unlinking does not block).
    mknodat(
        CWD,
        t.join("fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    drop(UnixListener::bind(t.join("sock")).expect("bind socket"));
    // Read-only file and read-only file in a subdirectory: unlink needs only the dir.
    fs::write(t.join("ro"), "junk").expect("write");
    fs::set_permissions(t.join("ro"), fs::Permissions::from_mode(0o444)).expect("chmod");
    fs::write(t.join("sub/ro"), "junk").expect("write");
    fs::set_permissions(t.join("sub/ro"), fs::Permissions::from_mode(0o000)).expect("chmod");
    // An empty mode-000 directory: anyone who may write the parent can remove it.
    fs::create_dir(t.join("locked-empty")).expect("mkdir");
    fs::set_permissions(t.join("locked-empty"), fs::Permissions::from_mode(0o000)).expect("chmod");
    // Dot-files at the top.
    fs::write(t.join(".env"), "secret").expect("write");
    fs::create_dir(t.join(".cache")).expect("mkdir");
    fs::write(t.join(".cache/x"), "junk").expect("write");
}

#[test]
fn hostile_tree_is_emptied_and_canaries_survive() {
    for user in users() {
        let sandbox = Sandbox::new();
        plant_hostile_tree(&sandbox);
        sandbox.give_to(user);
        let output = clean(user, &[&sandbox.target]);
        let err = stderr(&output);
        assert_eq!(output.status.code(), Some(0), "{user:?}: {err}");
        assert!(
            err.starts_with("prestop-clean: emptied "),
            "{user:?}: {err}"
        );
        assert_eq!(
            err.lines().count(),
            1,
            "one summary line, even with newlines in names: {err}"
        );
        sandbox.assert_emptied();
        sandbox.assert_canary();
        assert!(!sandbox.path("pwned").exists());
        assert!(!Path::new("pwned").exists());
    }
}

#[test]
fn mode_000_directories_go_as_root_and_are_reported_otherwise() {
    for user in users() {
        let sandbox = Sandbox::new();
        let locked = sandbox.target.join("locked");
        fs::create_dir_all(locked.join("inner")).expect("mkdir");
        fs::write(locked.join("inner/file"), "junk").expect("write");
        fs::write(sandbox.target.join("other"), "junk").expect("write");
        sandbox.give_to(user);
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).expect("chmod");
        let output = clean(user, &[&sandbox.target]);
        let err = stderr(&output);
        sandbox.assert_canary();
        match user {
            User::Root if support::is_root() => {
                assert_eq!(output.status.code(), Some(0), "{err}");
                sandbox.assert_emptied();
            }
            _ => {
                assert_eq!(output.status.code(), Some(1), "{err}");
                assert!(err.contains("1 entry left"), "{err}");
                assert!(err.contains("/target/locked permission denied"), "{err}");
                // It went on with the rest.
                assert_eq!(entries(&sandbox.target), ["locked"]);
            }
        }
    }
}

/// A sticky target (like /tmp) holding another user's file: as 65534 that file is
/// `EPERM`, reported, and the rest goes.
#[test]
fn another_users_file_in_a_sticky_directory_is_reported() {
    if !support::is_root() {
        return support::skip("needs root to switch users");
    }
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("roots"), "x").expect("write");
    fs::write(sandbox.target.join("mine"), "x").expect("write");
    support::chown_tree(&sandbox.target.join("mine"), support::NOBODY);
    fs::set_permissions(&sandbox.target, fs::Permissions::from_mode(0o1777)).expect("chmod");
    let output = clean(User::Nobody, &[&sandbox.target]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/target/roots operation not permitted"),
        "{err}"
    );
    assert_eq!(entries(&sandbox.target), ["roots"]);
}

#[test]
fn the_target_directory_itself_is_kept_with_its_mode() {
    let sandbox = Sandbox::new();
    fs::set_permissions(&sandbox.target, fs::Permissions::from_mode(0o1777)).expect("chmod");
    fs::write(sandbox.target.join("f"), "x").expect("write");
    let output = clean(User::Root, &[&sandbox.target]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let meta = fs::symlink_metadata(&sandbox.target).expect("target still there");
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o7777, 0o1777);
    sandbox.assert_emptied();
}

#[test]
fn a_200_deep_tree_is_emptied() {
    for user in users() {
        let sandbox = Sandbox::new();
        let mut dir = sandbox.target.clone();
        for level in 0..200 {
            dir.push(format!("level{level:03}"));
        }
        fs::create_dir_all(&dir).expect("mkdir -p");
        fs::write(dir.join("bottom"), "junk").expect("write");
        std::os::unix::fs::symlink(&sandbox.canary, dir.join("link")).expect("symlink");
        sandbox.give_to(user);
        let output = clean(user, &[&sandbox.target]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{user:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(": 202 entries,"),
            "{}",
            stderr(&output)
        );
        sandbox.assert_emptied();
        sandbox.assert_canary();
    }
}

/// `levels` directories named `name`, one inside the other, below `dir`, and a file
/// `bottom` in the deepest: made by descriptor, as no path reaches that deep.
fn chain(dir: &Path, levels: usize, name: &str) {
    let mut fd: OwnedFd = openat(CWD, dir, OFlags::DIRECTORY, Mode::empty()).expect("open");
    for _ in 0..levels {
        mkdirat(&fd, name, Mode::from_raw_mode(0o755)).expect("mkdirat");
        fd = openat(&fd, name, OFlags::DIRECTORY, Mode::empty()).expect("openat");
    }
    let bottom = openat(
        &fd,
        "bottom",
        OFlags::CREATE | OFlags::WRONLY,
        Mode::from_raw_mode(0o644),
    );
    drop(bottom.expect("create bottom"));
}

/// Deeper than any path the kernel resolves at once (PATH_MAX 4096): 1,500 levels of
/// 100-byte names, 150 kB of path. The walk holds a bounded number of descriptors
/// (run under `ulimit -n 16`) and climbs back by `..`, checking each step.
#[test]
fn a_tree_deeper_than_path_max_is_emptied() {
    let sandbox = Sandbox::new();
    chain(&sandbox.target, 1500, &"d".repeat(100));
    // With 16 descriptors at most, fewer than WINDOW: one per level would fail with
    // EMFILE, and the walk holds fewer when it meets EMFILE.
    let agent = support::agent::NodeAgent::start();
    let output = std::process::Command::new("sh")
        .args([
            "-c",
            "ulimit -n 16 && exec \"$0\" hook --node-agent \"$2\" --target \"$1\" --host \"$1\" \
             --whole-filesystem",
        ])
        .arg(support::BIN)
        .arg(&sandbox.target)
        .arg(&agent.socket)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(": 1,501 entries,"),
        "{}",
        stderr(&output)
    );
    sandbox.assert_emptied();
}

/// A chain deeper than any real tree (a tenant's `mkdir d; cd d` in a loop): the walk
/// enters `MAX_DEPTH` levels and no more, so a frame per level costs a few MB and not
/// hundreds (a million levels took 150–400 MB, in the pod's memory or the reaper's, whose
/// limit is 128 MiB). What is deeper stays, named; the rest of the target is emptied.
#[test]
fn a_chain_deeper_than_the_walk_goes_is_left_named_and_the_rest_emptied() {
    use prestop_clean::{empty_directory_jobs, Outcome, Reason, MAX_DEPTH};
    let sandbox = Sandbox::on_tmpfs();
    // The sandbox's own removal recurses once per level, past a test thread's stack: GNU
    // rm goes as deep as it must, first, pass or fail.
    struct RemoveDeep(std::path::PathBuf);
    impl Drop for RemoveDeep {
        fn drop(&mut self) {
            let _ = std::process::Command::new("rm")
                .arg("-rf")
                .arg(&self.0)
                .status();
        }
    }
    let _remove = RemoveDeep(sandbox.target.join("d"));
    // Deeper than one walk's frames plus every directory the concurrent walk's queue can
    // hold (4,096 slots at most), so that no number of workers reaches the bottom.
    let levels = MAX_DEPTH + 4_096 + 8;
    chain(&sandbox.target, levels, "d");
    let target = sandbox.target.to_str().expect("utf-8");
    for jobs in [1, 4] {
        fs::write(sandbox.target.join("beside"), b"x").expect("write");
        let report = empty_directory_jobs(target, jobs);
        let deep = report
            .survivors
            .iter()
            .find(|s| s.reason == Reason::TooDeep)
            .unwrap_or_else(|| panic!("{jobs} workers: no survivor too deep: {report:?}"));
        // Named by its first kilobyte and last three: 16,385 levels are 32 kB of path, and
        // 64 such names would be a report longer than the reaper reads.
        assert!(deep.path.starts_with(target.as_bytes()), "{jobs} workers");
        assert!(
            deep.path.len() <= 4096 + 5,
            "{jobs} workers: {}",
            deep.path.len()
        );
        assert!(deep.path.ends_with(b"/d/d/d"), "{jobs} workers");
        assert_eq!(report.outcome, Outcome::Incomplete, "{jobs} workers");
        assert!(!sandbox.target.join("beside").exists(), "{jobs} workers");
        let summary = report.summary();
        assert!(
            summary.contains("levels below the target (not entered)"),
            "{summary}"
        );
    }
}

/// On tmpfs, so the figure is the program's and not a shared disk's (on this machine's
/// ext4, mounted with `discard`, the same run took from 3 s to minutes with the load).
#[test]
fn a_hundred_thousand_files_are_quick() {
    let sandbox = Sandbox::on_tmpfs();
    let started = Instant::now();
    for d in 0..100 {
        let dir = sandbox.target.join(format!("dir{d}"));
        fs::create_dir(&dir).expect("mkdir");
        for f in 0..1000 {
            fs::write(dir.join(format!("file{f}")), "0123456789").expect("write");
        }
    }
    let made = started.elapsed();
    let started = Instant::now();
    let output = clean(User::Root, &[&sandbox.target]);
    let took = started.elapsed();
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(err.contains(": 100,100 entries, 976.6 KiB in "), "{err}");
    sandbox.assert_emptied();
    eprintln!(
        "100,000 files in 100 directories: created in {made:.2?}, cleaned in {took:.2?}: {err}"
    );
    assert!(took.as_secs() < 30, "100k files took {took:?}");
}

#[test]
fn bytes_count_regular_files_only() {
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("a"), vec![0u8; 3000]).expect("write");
    fs::write(sandbox.target.join("b"), vec![0u8; 72]).expect("write");
    symlink(
        "a-long-symlink-target-that-is-not-counted",
        sandbox.target.join("l"),
    )
    .expect("symlink");
    let output = clean(User::Root, &[&sandbox.target]);
    assert!(
        stderr(&output).contains(": 3 entries, 3.0 KiB in "),
        "{}",
        stderr(&output)
    );
}
