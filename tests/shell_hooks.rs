//! The `cleaner.mode: shell` hooks run in real shells (busybox `sh`, `dash`, `bash`) over
//! directories full of hostile names. See `support/shells.rs` for how the shells are found.

#[path = "support/shells.rs"]
mod shells;

use prestop_injector::mutation::hook::{sidecar_argv, Action, Before, Hook};
use proptest::prelude::*;
use shells::{children, fake_find, run_sidecar, shells, spawn_sidecar, wait_until, Shell, Tree};
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn hook(shell: &Shell, before: Before, action: Action) -> Vec<String> {
    Hook {
        shell: shell.path.display().to_string(),
        before,
        action,
    }
    .to_shell_argv()
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn cleanup_empties_hostile_tree() {
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let argv = hook(
            &shell,
            Before::Nothing,
            Action::Cleanup(vec![tree.path(&tree.target).into()]),
        );
        let output = shell.run(&argv, &tree.cwd);
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        // No find warnings or rmdir noise on the happy path: stderr ends up in events.
        assert_eq!(stderr(&output), "", "{}", shell.name);
        tree.assert_clean(&tree.target, shell.name);
    }
}

#[test]
fn missing_and_multiple_targets() {
    for shell in shells() {
        let tree = Tree::new();
        let second = tree.root.path().join("-second $(touch pwned)");
        fs::create_dir(&second).expect("mkdir");
        tree.fill(&tree.target);
        tree.fill(&second);
        let missing = tree.root.path().join("missing");
        let targets = vec![
            tree.path(&missing),
            tree.path(&tree.target),
            tree.path(&second),
        ];
        let output = shell.run(
            &hook(
                &shell,
                Before::Nothing,
                Action::Cleanup(targets.into_iter().map(Into::into).collect()),
            ),
            &tree.cwd,
        );
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        tree.assert_clean(&tree.target, shell.name);
        tree.assert_clean(&second, shell.name);
        assert!(!missing.exists());

        // Only a missing target: nothing to do, still success.
        let output = shell.run(
            &hook(
                &shell,
                Before::Nothing,
                Action::Cleanup(vec![tree.path(&missing).into()]),
            ),
            &tree.cwd,
        );
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
    }
}

#[test]
fn symlinked_target_is_skipped() {
    for shell in shells() {
        let tree = Tree::new();
        let link = tree.root.path().join("link");
        symlink(&tree.outside, &link).expect("symlink");
        let argv = hook(
            &shell,
            Before::Nothing,
            Action::Cleanup(vec![tree.path(&link).into()]),
        );
        let output = shell.run(&argv, &tree.cwd);
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("symlink"),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        tree.assert_safe(shell.name);
    }
}

#[test]
fn script_refuses_root_empty_and_relative_targets() {
    for shell in shells().into_iter().filter(|s| s.name != "busybox sh") {
        let tree = Tree::new();
        let (log, path) = fake_find(&tree);
        let targets = ["/", "//", "", "relative", "/..", "/a/../b", "/./x", "/a/."];
        let argv = hook(
            &shell,
            Before::Nothing,
            Action::Cleanup(targets.map(Into::into).to_vec()),
        );
        let output = shell
            .command(&argv, &tree.cwd)
            .env("PATH", path)
            .output()
            .expect("run");
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        assert!(
            !log.exists(),
            "{}: find ran: {:?}",
            shell.name,
            fs::read_to_string(&log)
        );
        assert_eq!(
            stderr(&output).matches("skipping").count(),
            targets.len(),
            "{}",
            shell.name
        );
    }
}

#[test]
fn failed_delete_fails_a_fresh_hook() {
    for shell in shells().into_iter().filter(|s| s.name != "busybox sh") {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let (log, path) = fake_find(&tree);
        let argv = hook(
            &shell,
            Before::Nothing,
            Action::Cleanup(vec![tree.path(&tree.target).into()]),
        );
        let output = shell
            .command(&argv, &tree.cwd)
            .env("PATH", path)
            .output()
            .expect("run");
        assert_eq!(
            output.status.code(),
            Some(1),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        assert!(
            stderr(&output).contains("could not empty"),
            "{}",
            shell.name
        );
        assert!(log.exists(), "{}: fake find not called", shell.name);
    }
}

#[test]
fn composed_hook_passes_exact_argv_and_keeps_status() {
    let args = [
        "a b",
        "$(touch pwned)",
        "`touch pwned`",
        "*",
        "",
        "-x",
        "new\nline",
        "'\"\\",
    ];
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let mut user = vec![
            shell.path.display().to_string(),
            "-c".to_owned(),
            "printf '<%s>' \"$@\" > user.out; exit 3".to_owned(),
            "user0".to_owned(),
        ];
        user.extend(args.iter().map(|a| (*a).to_owned()));
        let argv = hook(
            &shell,
            Before::Exec(user),
            Action::Cleanup(vec![tree.path(&tree.target).into()]),
        );
        let output = shell.run(&argv, &tree.cwd);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        let seen = fs::read_to_string(tree.cwd.join("user.out")).expect("user.out");
        let want: String = args.iter().map(|a| format!("<{a}>")).collect();
        assert_eq!(seen, want, "{}", shell.name);
        tree.assert_clean(&tree.target, shell.name);
    }
}

#[test]
fn cleanup_runs_when_user_command_is_missing() {
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let user = vec!["/nonexistent/prestop".to_owned(), "arg".to_owned()];
        let argv = hook(
            &shell,
            Before::Exec(user),
            Action::Cleanup(vec![tree.path(&tree.target).into()]),
        );
        let output = shell.run(&argv, &tree.cwd);
        assert_eq!(
            output.status.code(),
            Some(127),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        tree.assert_clean(&tree.target, shell.name);
    }
}

#[test]
fn sleep_then_cleanup() {
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let start = Instant::now();
        let argv = hook(
            &shell,
            Before::Sleep(1),
            Action::Cleanup(vec![tree.path(&tree.target).into()]),
        );
        let output = shell.run(&argv, &tree.cwd);
        assert!(
            output.status.success(),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        assert!(
            start.elapsed() >= Duration::from_secs(1),
            "{}: did not sleep",
            shell.name
        );
        tree.assert_clean(&tree.target, shell.name);
    }
}

#[test]
fn custom_command_runs_instead_of_cleanup() {
    // Runs with no positional parameters of ours, and its own status decides.
    let custom = "printf '%s|%s' \"$#\" \"$(echo 'it ran')\" > custom.out\nexit 4".to_owned();
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let output = shell.run(
            &hook(&shell, Before::Nothing, Action::Custom(custom.clone())),
            &tree.cwd,
        );
        assert_eq!(
            output.status.code(),
            Some(4),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        let seen = fs::read_to_string(tree.cwd.join("custom.out")).expect("custom.out");
        assert_eq!(seen, "0|it ran", "{}", shell.name);
        assert!(
            tree.target.join(".hidden").exists(),
            "{}: cleanup ran",
            shell.name
        );

        // Composed: the user's hook first, then the custom script; the user's status wins.
        let user = vec![
            shell.path.display().to_string(),
            "-c".to_owned(),
            "touch user.out; exit 3".to_owned(),
        ];
        let argv = hook(&shell, Before::Exec(user), Action::Custom(custom.clone()));
        fs::remove_file(tree.cwd.join("custom.out")).expect("rm");
        let output = shell.run(&argv, &tree.cwd);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{}: {}",
            shell.name,
            stderr(&output)
        );
        assert!(tree.cwd.join("user.out").exists() && tree.cwd.join("custom.out").exists());
    }
}

#[test]
fn sidecar_cleans_only_on_sigterm() {
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        spawn_sidecar(&shell, &tree, sidecar_argv("", &[tree.path(&tree.target)]));
    }
}

/// As PID 1 of a new PID namespace a signal without a handler is dropped: the sidecar
/// must still react. Needs `unshare` and root; skipped without them.
#[test]
fn sidecar_cleans_on_sigterm_as_pid_1() {
    let Some(unshare) = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
    else {
        eprintln!("note: unshare not installed, PID 1 case skipped");
        return;
    };
    let works = Command::new(unshare)
        .args(["--pid", "--fork", "--kill-child", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        eprintln!("note: unshare --pid not available, PID 1 case skipped");
        return;
    }
    for shell in shells() {
        let tree = Tree::new();
        tree.fill(&tree.target);
        let argv = sidecar_argv(
            &shell.path.display().to_string(),
            &[tree.path(&tree.target)],
        );
        let child = Command::new(unshare)
            .args(["--pid", "--fork", "--kill-child"])
            .args(&argv)
            .env_clear()
            .env("PATH", &shell.path_env)
            .current_dir(&tree.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn");
        // unshare forks the shell, which is PID 1 inside; signal that process.
        let mut inner = None;
        assert!(wait_until(Duration::from_secs(10), || {
            inner = children(child.id()).first().copied();
            inner.is_some()
        }));
        let inner = inner.expect("inner pid");
        run_sidecar(&shell, &tree, child, inner);
    }
}

/// Bytes that mean something to a shell, plus a non-UTF-8 byte and a control character.
const ALPHABET: &[u8] = b"a -*?$()`'\"\\.;&|[]{}~#!\n\t\x01\xff";

fn hostile_name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(ALPHABET), 1..12)
        .prop_filter("not . or ..", |name| name != b"." && name != b"..")
}

proptest! {
    // Each case runs a real shell three times; 32 cases keep the suite quick.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn generated_names_are_deleted(names in prop::collection::vec(hostile_name(), 1..6)) {
        for shell in shells() {
            let tree = Tree::new();
            for name in &names {
                let name = OsStr::from_bytes(name);
                fs::write(tree.target.join(name), "x").expect("write");
                let mut dir = tree.target.join(format!("d{}", name.to_string_lossy()));
                dir.push(name);
                fs::create_dir_all(&dir).expect("mkdir");
                fs::write(dir.join(name), "x").expect("write");
            }
            let argv = hook(&shell, Before::Nothing, Action::Cleanup(vec![tree.path(&tree.target).into()]));
            let output = shell.run(&argv, &tree.cwd);
            prop_assert!(output.status.success(), "{}: {}", shell.name, stderr(&output));
            tree.assert_clean(&tree.target, shell.name);
        }
    }
}
