//! `prestop-clean hook`: the user's handler with its exact argv and status, `--sleep`,
//! the custom script through the configured shell, then the cleanup, in that order.

mod support;

use std::fs;
use std::process::Command;
use std::time::{Duration, Instant};

use prestop_clean::argv::{Before, HookArgs, Script, Target};
use support::agent::NodeAgent;
use support::{stderr, Sandbox, BIN};

/// The hook as the webhook renders it, run with a container's usual PATH (a PATH entry
/// we may not search would turn "not found" into "permission denied").
/// Runs the hook with a node agent of its own: the sandbox lies on the test machine's
/// filesystem under its own path, which only the node's word lets a cleaner empty.
fn run_hook(args: &HookArgs) -> std::process::Output {
    let agent = NodeAgent::start();
    let args = HookArgs {
        node_agent: Some(agent.socket.display().to_string()),
        ..args.clone()
    };
    let argv = args.render(BIN);
    Command::new(&argv[0])
        .args(&argv[1..])
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .output()
        .expect("run prestop-clean")
}

fn hook(before: Before, sandbox: &Sandbox, script: Option<Script>) -> HookArgs {
    HookArgs {
        deadline: None,
        node_agent: None,
        before,
        // The sandbox is on the test machine's whole root filesystem, under its own path.
        targets: vec![Target {
            whole_filesystem: true,
            ..Target::on_host(
                sandbox.target.display().to_string(),
                sandbox.target.display().to_string(),
            )
        }],
        script,
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_users_argv_arrives_verbatim_without_a_shell() {
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("f"), "x").expect("write");
    let out = sandbox.path("argv");
    let tricky = [
        "with space",
        "quote'\"",
        "$HOME",
        "$(touch pwned)",
        "new\nline",
        "--target",
        "/",
        "--",
        "-c",
        "",
        "*",
        "back\\slash",
    ];
    // sh here is the user's own program; it writes its arguments NUL-separated.
    let mut argv = strings(&["/bin/sh", "-c", "printf '%s\\0' \"$@\" > \"$0\""]);
    argv.push(out.display().to_string());
    argv.extend(strings(&tricky));
    let output = run_hook(&hook(Before::Exec(argv), &sandbox, None));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let written = fs::read(&out).expect("the handler ran");
    let got: Vec<&[u8]> = written.split(|b| *b == 0).collect();
    let want: Vec<&[u8]> = tricky
        .iter()
        .map(|s| s.as_bytes())
        .chain([&b""[..]])
        .collect();
    assert_eq!(got, want);
    sandbox.assert_emptied();
    assert!(!sandbox.path("pwned").exists());
}

#[test]
fn the_users_status_wins_and_the_cleanup_still_runs() {
    for (argv, status) in [
        (strings(&["sh", "-c", "exit 7"]), 7),
        (strings(&["/bin/sh", "-c", "kill -TERM $$"]), 128 + 15),
        (strings(&["/nonexistent/handler"]), 127),
        (strings(&["no-such-command-on-path"]), 127),
        (strings(&["true"]), 0),
    ] {
        let sandbox = Sandbox::new();
        fs::write(sandbox.target.join("f"), "x").expect("write");
        let output = run_hook(&hook(Before::Exec(argv.clone()), &sandbox, None));
        assert_eq!(
            output.status.code(),
            Some(status),
            "{argv:?}: {}",
            stderr(&output)
        );
        assert!(stderr(&output).contains("emptied"), "{}", stderr(&output));
        sandbox.assert_emptied();
    }
}

#[test]
fn sleep_comes_first() {
    let sandbox = Sandbox::new();
    fs::write(sandbox.target.join("f"), "x").expect("write");
    let started = Instant::now();
    let output = run_hook(&hook(Before::Sleep(1), &sandbox, None));
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    sandbox.assert_emptied();
}

#[test]
fn the_script_runs_through_the_shell_after_the_handler_and_before_the_cleanup() {
    let sandbox = Sandbox::new();
    let marker = sandbox.path("handler-ran");
    let seen = sandbox.path("script-saw");
    let handler = strings(&[
        "/bin/sh",
        "-c",
        "touch \"$0\"",
        &marker.display().to_string(),
    ]);
    let text = format!(
        "test -e '{}' && echo handler-first > '{}'; echo junk > '{}/from-script'",
        marker.display(),
        seen.display(),
        sandbox.target.display()
    );
    let script = Script {
        shell: "/bin/sh".into(),
        text,
    };
    let output = run_hook(&hook(Before::Exec(handler), &sandbox, Some(script)));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        fs::read_to_string(&seen).expect("script ran"),
        "handler-first\n"
    );
    // The script's file was cleaned: the cleanup came last.
    sandbox.assert_emptied();
}

#[test]
fn the_scripts_status_counts_when_the_handler_succeeded() {
    let sandbox = Sandbox::new();
    let script = Script {
        shell: "/bin/sh".into(),
        text: "exit 5".into(),
    };
    let output = run_hook(&hook(Before::Nothing, &sandbox, Some(script.clone())));
    assert_eq!(output.status.code(), Some(5));
    let handler = strings(&["sh", "-c", "exit 3"]);
    let output = run_hook(&hook(Before::Exec(handler), &sandbox, Some(script)));
    assert_eq!(output.status.code(), Some(3));
}

#[test]
fn survivors_fail_the_hook_missing_targets_do_not() {
    let sandbox = Sandbox::new();
    std::os::unix::fs::symlink(&sandbox.canary, sandbox.path("link")).expect("symlink");
    let mut args = hook(Before::Nothing, &sandbox, None);
    let on_host = |path: String| Target {
        whole_filesystem: true,
        ..Target::on_host(path.clone(), path)
    };
    args.targets = vec![on_host(sandbox.path("link").display().to_string())];
    assert_eq!(run_hook(&args).status.code(), Some(1));
    args.targets = vec![on_host(sandbox.path("missing").display().to_string())];
    assert_eq!(run_hook(&args).status.code(), Some(0));
    args.targets = vec![];
    assert_eq!(run_hook(&args).status.code(), Some(0));
    sandbox.assert_canary();
}

#[test]
fn usage_errors_exit_2_with_a_sentence() {
    for args in [
        &[][..],
        &["frob"][..],
        &["hook", "--bogus"][..],
        &["hook", "--target"][..],
        &["hook", "--sleep", "1", "--", "true"][..],
        &["sidecar", "extra"][..],
        &["install"][..],
        &["install", "/a", "/b"][..],
    ] {
        let output = Command::new(BIN).args(args).output().expect("run");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let err = stderr(&output);
        assert!(err.starts_with("prestop-clean: "), "{err}");
        assert!(err.contains("usage: prestop-clean hook"), "{err}");
    }
}
