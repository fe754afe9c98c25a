//! Explicit targets an attacker shaped: symlinks in any component of the path, a target
//! that is a symlink, a file, a magic link; targets that are not normalized.

mod support;

use std::fs;
use std::os::unix::fs::symlink;

use support::{clean, stderr, Sandbox, User};

#[test]
fn an_intermediate_symlink_skips_the_target() {
    // /t/jobs → canary, target /t/jobs/sub: the shell script emptied canary/sub.
    let sandbox = Sandbox::new();
    symlink(&sandbox.canary, sandbox.target.join("jobs")).expect("symlink");
    let target = sandbox.target.join("jobs/sub");
    let output = clean(User::Root, &[&target]);
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "prestop-clean: skipped {}: {} is a symlink\n",
            target.display(),
            sandbox.target.join("jobs").display()
        )
    );
    sandbox.assert_canary();
}

#[test]
fn a_relative_intermediate_symlink_skips_the_target_too() {
    let sandbox = Sandbox::new();
    fs::create_dir(sandbox.target.join("real")).expect("mkdir");
    symlink("../canary", sandbox.target.join("real/up")).expect("symlink");
    let target = sandbox.target.join("real/up/sub");
    let output = clean(User::Root, &[&target]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("/real/up is a symlink"),
        "{}",
        stderr(&output)
    );
    sandbox.assert_canary();
}

#[test]
fn a_target_that_is_a_symlink_is_skipped() {
    let sandbox = Sandbox::new();
    let link = sandbox.path("link");
    symlink(&sandbox.canary, &link).expect("symlink");
    let output = clean(User::Root, &[&link]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains(&format!("{} is a symlink", link.display())),
        "{}",
        stderr(&output)
    );
    sandbox.assert_canary();
}

#[test]
fn a_magic_link_on_the_way_is_refused() {
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("f"), "x").expect("write");
    let via_proc = format!("/proc/self/root{}", sandbox.target.display());
    let output = clean(User::Root, &[via_proc.as_ref()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("/proc/self is a symlink"),
        "{}",
        stderr(&output)
    );
    assert!(sandbox.target.join("f").exists());
}

#[test]
fn files_on_the_way_are_not_directories() {
    let sandbox = Sandbox::new();
    let file = sandbox.target.join("file");
    fs::write(&file, "x").expect("write");
    for target in [file.clone(), file.join("below")] {
        let output = clean(User::Root, &[&target]);
        assert_eq!(output.status.code(), Some(1));
        assert!(
            stderr(&output).contains(&format!("{} is not a directory", file.display())),
            "{}",
            stderr(&output)
        );
    }
    assert!(file.exists());
}

#[test]
fn a_missing_target_is_not_an_error() {
    let sandbox = Sandbox::new();
    for target in [sandbox.path("nope"), sandbox.path("nope/deeper")] {
        let output = clean(User::Root, &[&target]);
        assert_eq!(output.status.code(), Some(0));
        assert_eq!(
            stderr(&output),
            format!(
                "prestop-clean: {} is missing: nothing to clean\n",
                target.display()
            )
        );
    }
}

#[test]
fn one_line_per_target_and_a_skipped_one_fails_the_hook() {
    let sandbox = Sandbox::new();
    fs::create_dir(sandbox.path("second")).expect("mkdir");
    fs::write(sandbox.path("second/f"), "x").expect("write");
    symlink(&sandbox.canary, sandbox.path("link")).expect("symlink");
    let output = clean(
        User::Root,
        &[
            &sandbox.target,
            &sandbox.path("link"),
            &sandbox.path("second"),
        ],
    );
    let err = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with("prestop-clean: emptied "));
    assert!(lines[1].starts_with("prestop-clean: skipped "));
    assert!(lines[2].starts_with("prestop-clean: emptied "));
    assert!(!sandbox.path("second/f").exists());
    sandbox.assert_canary();
}

#[test]
fn paths_that_are_not_normalized_are_usage_errors_and_nothing_runs() {
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("f"), "x").expect("write");
    let t = sandbox.target.display().to_string();
    for bad in [
        "/".to_owned(),
        "relative".to_owned(),
        format!("{t}/"),
        format!("{t}/."),
        format!("{t}/../target"),
        format!("{}//target", sandbox.dir.path().display()),
        String::new(),
    ] {
        // A valid target first: it must not be cleaned either.
        let output = support::command(
            User::Root,
            &[
                "hook".as_ref(),
                "--target".as_ref(),
                t.as_ref(),
                "--target".as_ref(),
                bad.as_ref(),
            ],
        )
        .output()
        .expect("run");
        assert_eq!(output.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&output).contains("refused"), "{}", stderr(&output));
        assert!(sandbox.target.join("f").exists(), "{bad:?}");
    }
}
