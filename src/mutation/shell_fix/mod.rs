//! SPEC §6: `bash` in images that only have `sh`.
//!
//! Contract:
//! - Looks at every init and app container whose image lacks bash ([`image::lacks_bash`]):
//!   its `command` (+ `args`), `lifecycle.postStart/preStop.exec.command` and
//!   `liveness/readiness/startupProbe.exec.command`.
//! - `argv[0]` `bash` (any path) becomes `/bin/sh`; `env bash` becomes `env sh`. Only that
//!   one array element is replaced, so the JSON diff stays one targeted `replace`.
//! - Only when the run is **proven portable** ([`portable`](crate::mutation::shell_fix::portable)): bash's own options are ones
//!   `sh` takes alike and the `-c` script parses into constructs and builtins that behave
//!   the same in busybox `ash`, `dash` and `bash`, on errors too. Everything else — a
//!   script file (`bash run.sh`: its content is unknown), commands from stdin (`bash`
//!   alone, `bash -s`), `-l`, `-O`, `-o pipefail`, long options, `declare`, `[[ ]]`,
//!   `$RANDOM`, … — keeps bash with a warning naming what blocked the rewrite: "bash: not
//!   found" is a clear failure, a script whose meaning changed is not
//!   (`declare -r W=/x; rm -rf "$W"/*` under busybox `sh` is `rm -rf /*`).
//! - One warning (≤ 120 chars, naming the container) per correction or refusal.
//! - Odd JSON (wrong types, missing fields, non-string argv entries) is left untouched.

pub mod image;
pub mod portable;

use crate::config::{CleanerMode, Config};
use crate::mutation::hook::Action;
use portable::gate::basename;
use portable::{gate, Gate, Text};
use serde_json::{Map, Value};

/// Warnings are shown by kubectl; the API server truncates longer ones.
const MAX_WARNING: usize = 120;

/// Rewrites `argv[0]` `bash` (any path) to `/bin/sh` in every init and app container's
/// `command`, lifecycle and probe `exec.command` when the image lacks bash and the run is
/// proven portable (else only a warning). Returns one warning per correction or refusal.
pub fn fix_shells(pod_spec: &mut Value, config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod_spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            fix_container(container, config, &mut warnings);
        }
    }
    warnings
}

/// The shell our own preStop hook uses in `image`: `requested`, or `/bin/sh` with a
/// warning when `requested` is bash, the image lacks bash and [`gate`] proves what the
/// shell runs portable: the custom script (`action`), or in `cleaner.mode: shell` our
/// generated cleanup. A refused script keeps bash, with a warning.
pub fn hook_shell(
    requested: &str,
    image: &str,
    container: &str,
    config: &Config,
    action: &Action,
) -> (String, Option<String>) {
    let text = match action {
        // `shell` mode `eval`s the script with `$0` = `prestop-injector`; the program
        // runs `SHELL -c TEXT`, where `$0` is the shell's own path.
        Action::Custom(text) => Text::Script {
            text,
            zero_known: config.cleaner.mode == CleanerMode::Shell,
        },
        Action::Cleanup(_) => Text::Generated,
    };
    match gate(requested, image, config, text) {
        Gate::Keep => (requested.to_owned(), None),
        Gate::Switch => {
            let warning = warning(container, image, "has no bash; preStop hook runs /bin/sh");
            ("/bin/sh".to_owned(), Some(warning))
        }
        Gate::Refuse(what) => {
            let tail = format!("has no bash; preStop hook keeps bash: {what} may differ in sh");
            (requested.to_owned(), Some(warning(container, image, &tail)))
        }
    }
}

/// What to do with one argv.
#[derive(Debug, PartialEq, Eq)]
enum Fix {
    /// Replace the entry at this index (in `command` followed by `args`).
    Rewrite { at: usize, to: &'static str },
    /// Leave it: this construct (or invocation) is not proven to mean the same in `sh`.
    Refuse(String),
}

fn fix_container(container: &mut Map<String, Value>, config: &Config, warnings: &mut Vec<String>) {
    let Some(image) = container.get("image").and_then(Value::as_str) else {
        return;
    };
    if !image::lacks_bash(image, config) {
        return;
    }
    let image = image.to_owned();
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let report = |fix: Fix, place: &str, warnings: &mut Vec<String>| {
        let tail = match fix {
            Fix::Rewrite { to, .. } => format!("has no bash; {place} now runs {to}"),
            Fix::Refuse(what) => format!("has no bash; {place} unchanged: {what} may differ in sh"),
        };
        warnings.push(warning(&name, &image, &tail));
    };

    // The container's own argv is `command` followed by `args`; the `-c` script may be in
    // either. Without `command` argv[0] is the image's entrypoint, which we cannot see.
    let empty = Vec::new();
    let args = container
        .get("args")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    if let Some(command) = container.get("command").and_then(Value::as_array) {
        let argv: Vec<&Value> = command.iter().chain(args).collect();
        if let Some(fix) = plan(&argv, &image, config) {
            let in_command = command.len();
            if let Fix::Rewrite { at, to } = fix {
                let (key, index) = if at < in_command {
                    ("command", at)
                } else {
                    ("args", at - in_command)
                };
                set_entry(container.get_mut(key), index, to);
            }
            report(fix, "command", warnings);
        }
    }

    let places: [(&str, &[&str]); 5] = [
        ("postStart hook", &["lifecycle", "postStart"]),
        ("preStop hook", &["lifecycle", "preStop"]),
        ("livenessProbe", &["livenessProbe"]),
        ("readinessProbe", &["readinessProbe"]),
        ("startupProbe", &["startupProbe"]),
    ];
    for (place, path) in places {
        let Some(command) = exec_command(container, path) else {
            continue;
        };
        let argv: Vec<&Value> = command.iter().collect();
        let Some(fix) = plan(&argv, &image, config) else {
            continue;
        };
        if let Fix::Rewrite { at, to } = fix {
            set_entry(exec_command_mut(container, path), at, to);
        }
        report(fix, place, warnings);
    }
}

fn exec_command<'a>(container: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Vec<Value>> {
    let mut node = container.get(*path.first()?)?;
    for key in &path[1..] {
        node = node.get(key)?;
    }
    node.get("exec")?.get("command")?.as_array()
}

fn exec_command_mut<'a>(
    container: &'a mut Map<String, Value>,
    path: &[&str],
) -> Option<&'a mut Value> {
    let mut node = container.get_mut(*path.first()?)?;
    for key in &path[1..] {
        node = node.get_mut(key)?;
    }
    node.get_mut("exec")?.get_mut("command")
}

/// Replaces one element of an array in place (a targeted patch), nothing else.
fn set_entry(array: Option<&mut Value>, index: usize, to: &str) {
    if let Some(entry) = array
        .and_then(Value::as_array_mut)
        .and_then(|a| a.get_mut(index))
    {
        *entry = Value::String(to.to_owned());
    }
}

/// Decides for one argv through the [`gate`]; `None` when it does not start bash, is
/// not plain strings, or the image has bash.
fn plan(argv: &[&Value], image: &str, config: &Config) -> Option<Fix> {
    let first = argv.first()?.as_str()?;
    let (at, shell, rest) = if basename(first) == "env" {
        (1, argv.get(1)?.as_str()?, &argv[2..])
    } else {
        (0, first, &argv[1..])
    };
    // `env bash` finds bash on PATH: `env sh` keeps that; a path becomes `/bin/sh`.
    let to = if at == 1 && !shell.contains('/') {
        "sh"
    } else {
        "/bin/sh"
    };
    let args: Vec<Option<&str>> = rest.iter().map(|v| v.as_str()).collect();
    match gate(shell, image, config, Text::Argv(&args)) {
        Gate::Keep => None,
        Gate::Switch => Some(Fix::Rewrite { at, to }),
        Gate::Refuse(what) => Some(Fix::Refuse(what)),
    }
}

/// `container "NAME": IMAGE TAIL`, the image (then the name) shortened to fit.
fn warning(name: &str, image: &str, tail: &str) -> String {
    let name = shorten(name, 30);
    let fixed = "container \"\": ".len() + name.chars().count() + 1 + tail.chars().count();
    let image = shorten(image, MAX_WARNING.saturating_sub(fixed).max(10));
    // Odd input (a huge name from a malformed object) still must not exceed the limit.
    shorten(
        &format!("container \"{name}\": {image} {tail}"),
        MAX_WARNING,
    )
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fix(spec: Value) -> (Value, Vec<String>, Vec<String>) {
        let mut after = spec.clone();
        let warnings = fix_shells(&mut after, &Config::default());
        let paths = json_patch::diff(&spec, &after)
            .0
            .iter()
            .map(|op| match op {
                json_patch::PatchOperation::Replace(r) => r.path.to_string(),
                other => panic!("untargeted operation {other:?}"),
            })
            .collect();
        (after, warnings, paths)
    }

    fn one(image: &str, container: Value) -> Value {
        let mut container = container;
        container["name"] = json!("c");
        container["image"] = json!(image);
        json!({"containers": [container], "extra": {"kept": true}})
    }

    #[test]
    fn corrections() {
        let cases: Vec<(Value, &[&str], &str)> = vec![
            (
                one(
                    "busybox:stable",
                    json!({"command": ["bash", "-c", "echo hi"]}),
                ),
                &["/containers/0/command/0"],
                "container \"c\": busybox:stable has no bash; command now runs /bin/sh",
            ),
            (
                one(
                    "alpine",
                    json!({"command": ["/bin/bash"], "args": ["-ec", "test -f x"]}),
                ),
                &["/containers/0/command/0"],
                "command now runs /bin/sh",
            ),
            (
                one(
                    "alpine",
                    json!({"command": ["/usr/bin/env"], "args": ["bash", "-xc", "true"]}),
                ),
                &["/containers/0/args/0"],
                "command now runs sh",
            ),
            (
                one(
                    "python:3.12-alpine",
                    json!({"command": ["/usr/bin/env", "bash", "-c", "exec python3 -m app"]}),
                ),
                &["/containers/0/command/1"],
                "command now runs sh",
            ),
            (
                one(
                    "busybox",
                    json!({"lifecycle": {"preStop": {"exec": {"command": ["bash", "-c", "sleep 1"]}}}}),
                ),
                &["/containers/0/lifecycle/preStop/exec/command/0"],
                "preStop hook now runs /bin/sh",
            ),
            (
                one(
                    "busybox",
                    json!({"readinessProbe": {"exec": {"command": ["bash", "-o", "errexit", "-c", "x"]}}}),
                ),
                &["/containers/0/readinessProbe/exec/command/0"],
                "readinessProbe now runs",
            ),
            (
                json!({"initContainers": [{"name": "init", "image": "busybox", "command": ["bash", "-c", "true"]}]}),
                &["/initContainers/0/command/0"],
                "container \"init\"",
            ),
        ];
        for (spec, paths, warning) in cases {
            let (_, warnings, changed) = fix(spec.clone());
            assert_eq!(changed, paths, "{spec}");
            assert_eq!(warnings.len(), 1, "{spec}");
            assert!(warnings[0].contains(warning), "{warnings:?}");
        }
    }

    #[test]
    fn refusals_warn_and_change_nothing() {
        let pre_stop = |argv: Value| json!({"lifecycle": {"preStop": {"exec": {"command": argv}}}});
        for (spec, what) in [
            // The example: under busybox sh `declare` fails, W stays empty and the
            // rewrite would run `rm -rf /*`.
            (
                one(
                    "busybox",
                    pre_stop(json!([
                        "bash",
                        "-c",
                        "declare -r W=/scratch/work; rm -rf \"$W\"/*"
                    ])),
                ),
                "preStop hook unchanged: declare may differ in sh",
            ),
            (
                json!({"initContainers": [{"name": "init", "image": "alpine",
                    "command": ["bash", "-c", "typeset -r D=/data; rm -rf $D/*"]}]}),
                "container \"init\": alpine has no bash; command unchanged: typeset",
            ),
            (
                one(
                    "busybox",
                    json!({"command": ["bash", "-c", "a=(1 2); echo ${a[0]}"]}),
                ),
                "arrays",
            ),
            (
                one(
                    "busybox",
                    json!({"command": ["bash"], "args": ["-ec", "cat <<< x"]}),
                ),
                "<<<",
            ),
            (
                one(
                    "alpine",
                    json!({"startupProbe": {"exec": {"command": ["bash", "-c", "echo {1..3}"]}}}),
                ),
                "startupProbe unchanged: brace expansion {a..b}",
            ),
            (
                one(
                    "python:3.12-alpine",
                    json!({"command": ["/usr/bin/env", "bash", "run.sh"]}),
                ),
                "a script file (content unknown)",
            ),
            (
                one("busybox", json!({"command": ["bash"]})),
                "commands from stdin",
            ),
            (
                one(
                    "busybox",
                    json!({"readinessProbe": {"exec": {"command": ["bash", "-o", "pipefail", "-c", "x | y"]}}}),
                ),
                "readinessProbe unchanged: set -o pipefail",
            ),
            (
                one(
                    "busybox",
                    json!({"command": ["bash", "-O", "extglob", "-c", "rm !(keep)"]}),
                ),
                "bash -O",
            ),
            (
                one(
                    "busybox",
                    json!({"command": ["bash", "-c", "[[ -v X ]] || rm -rf /data/*"]}),
                ),
                "[[ ]]",
            ),
            (
                one(
                    "busybox",
                    json!({"command": ["bash", "-c", "rm -rf /tmp/$UID/*"]}),
                ),
                "$UID",
            ),
        ] {
            let (_, warnings, changed) = fix(spec.clone());
            assert!(changed.is_empty(), "{spec}");
            assert_eq!(warnings.len(), 1);
            assert!(
                warnings[0].contains(what) && warnings[0].ends_with("may differ in sh"),
                "{warnings:?}"
            );
        }
    }

    /// One script per construct class that changes meaning (or error behaviour) under
    /// busybox sh or dash. Today's `main` rewrote every one of them to `/bin/sh`.
    #[test]
    fn every_meaning_changing_class_keeps_bash() {
        let classes = [
            ("declare", "declare -r W=/scratch/work; rm -rf \"$W\"/*"),
            ("typeset", "typeset -r W=/scratch/work; rm -rf \"$W\"/*"),
            ("local", "f() { local -n r=$1; }; f x"),
            ("shopt", "shopt -s dotglob; rm -rf /data/*"),
            ("(( ))", "(( n = 1 )) && rm -rf /data/$n"),
            ("[[ ]]", "[[ -v DIR ]] || DIR=; rm -rf $DIR/*"),
            ("$UID", "rm -rf /tmp/$UID/*"),
            ("$EUID", "[ $EUID = 0 ] && rm -rf /data/*"),
            ("$BASH_VERSION", "[ -n \"$BASH_VERSION\" ] || exit"),
            ("$RANDOM", "sleep $RANDOM"),
            ("read -a", "read -a dirs < /list"),
            ("set -o pipefail", "set -o pipefail; a | b"),
            ("set -u", "set -u; rm -rf \"$D\"/*"),
            ("source", "source /env; rm -rf \"$D\"/*"),
            ("brace expansion {a,b}", "rm -rf /data/{a,b}"),
            ("$'...'", "rm -rf $'/data/a\\tb'"),
            ("${var:offset}", "rm -rf \"${D:0:5}\""),
            ("${var/pat/rep}", "rm -rf \"${D/x/}\""),
            ("&>", "rm -rf /data/* &> /dev/null"),
            ("trap on EXIT", "trap 'rm -rf /data/*' EXIT; sleep 60"),
            ("trap on ERR", "trap 'rm -rf /data/*' ERR"),
            ("echo options", "echo -e 'x\\ty' > /data/f"),
            ("echo with an expansion", "echo \"$MSG\" > /data/f"),
            ("globs on a leading .", "rm -rf /data/.*"),
            (
                "a redirection or assignment on :",
                ": > /data/log; rm -rf /tmp/x",
            ),
            (
                "set -e with several commands",
                "set -e; D=$(cd /x; pwd); rm -rf \"$D\"/*",
            ),
            (
                "a command name from an expansion",
                "$CMD -r W; rm -rf \"$W\"/*",
            ),
            ("let", "let n=1; rm -rf /data/$n"),
            ("mapfile", "mapfile -t ds < /l"),
            ("process substitution", "diff <(ls a) <(ls b)"),
            ("function keyword", "function f { rm -rf /data/*; }; f"),
        ];
        for (class, script) in classes {
            let spec = one(
                "busybox",
                json!({"lifecycle": {"preStop": {"exec": {"command": ["bash", "-c", script]}}}}),
            );
            let (_, warnings, changed) = fix(spec);
            assert!(changed.is_empty(), "{class}: {script:?} was rewritten");
            assert!(
                warnings.len() == 1 && warnings[0].contains(class),
                "{class}: {warnings:?}"
            );
        }
    }

    #[test]
    fn unchanged() {
        for spec in [
            one("ubuntu:24.04", json!({"command": ["bash", "-c", "true"]})),
            one("busybox", json!({"command": ["sh", "-c", "true"]})),
            one("busybox", json!({"command": ["/usr/bin/env", "python3"]})),
            one("busybox", json!({"args": ["bash", "-c", "true"]})),
            one("busybox", json!({"command": [1, "-c", "true"]})),
            one("busybox", json!({"command": ["bash", "-c", 7]})),
            one("busybox", json!({"command": "bash -c true"})),
            one(
                "busybox",
                json!({"lifecycle": {"preStop": {"exec": "bash"}}}),
            ),
            one(
                "busybox",
                json!({"livenessProbe": {"exec": {"command": []}}}),
            ),
            json!({"containers": [{"name": "c", "command": ["bash"]}]}),
            json!({"containers": [{"name": "c", "image": 5, "command": ["bash"]}]}),
            json!({"containers": ["busybox", null, 3]}),
            json!({"containers": {"name": "c"}}),
            json!(null),
            json!([]),
        ] {
            let (after, warnings, _) = fix(spec.clone());
            assert_eq!(after, spec);
            assert!(warnings.is_empty(), "{spec}: {warnings:?}");
        }
    }

    #[test]
    fn one_warning_per_correction_and_short() {
        let long = format!(
            "registry.example.com/{}/busybox@sha256:{}",
            "x".repeat(60),
            "f".repeat(64)
        );
        let mut spec = one(
            &long,
            json!({
                "command": ["bash", "-c", "true"],
                "lifecycle": {"postStart": {"exec": {"command": ["bash", "-c", "true"]}}},
                "livenessProbe": {"exec": {"command": ["bash", "-c", "a=(1)"]}},
            }),
        );
        spec["containers"][0]["name"] = json!("n".repeat(63));
        let (_, warnings, changed) = fix(spec);
        assert_eq!(changed.len(), 2);
        assert_eq!(warnings.len(), 3);
        for w in &warnings {
            assert!(
                w.chars().count() <= MAX_WARNING,
                "{} chars: {w}",
                w.chars().count()
            );
        }
    }

    #[test]
    fn hook_shell_table() {
        let config = Config::default();
        let generated = Action::Cleanup(vec![prestop_clean::argv::Target {
            path: "/data".to_owned(),
            host: Some("/scratch/data".to_owned()),
            whole_filesystem: false,
        }]);
        let portable = Action::Custom("rm -rf /data/*".to_owned());
        // README's example: under busybox sh `declare` fails, W stays empty: `rm -rf /*`.
        let bash_only = Action::Custom("declare -r W=/x; rm -rf \"$W\"/*".to_owned());
        let cases = [
            ("/bin/bash", "busybox:1.36", &generated, "/bin/sh", true),
            ("bash", "alpine:3.20", &portable, "/bin/sh", true),
            ("/bin/bash", "busybox", &bash_only, "/bin/bash", true),
            ("/bin/bash", "ubuntu", &bash_only, "/bin/bash", false),
            ("/bin/sh", "busybox", &bash_only, "/bin/sh", false),
            ("/bin/ash", "alpine", &generated, "/bin/ash", false),
        ];
        for (requested, image, action, want, warns) in cases {
            let (shell, warning) = hook_shell(requested, image, "app", &config, action);
            assert_eq!(shell, want, "{requested} {image} {action:?}");
            assert_eq!(warning.is_some(), warns, "{requested} {image}");
            if let Some(w) = warning {
                assert!(
                    w.starts_with("container \"app\": ") && w.len() <= MAX_WARNING,
                    "{w}"
                );
            }
        }
    }
}
