use super::*;
use crate::json::json;

fn fix(spec: Value) -> (Value, Vec<String>, Vec<String>) {
    let mut after = spec.clone();
    let warnings = fix_shells(&mut after, &Config::default());
    let paths = json_patch::diff(&spec.clone().into(), &after.clone().into())
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
fn one_warning_per_shell_switch_and_per_refusal_and_short() {
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
    // The two rewrites to /bin/sh are one fact about the image: one warning naming both
    // places; the probe's refusal is its own.
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.ends_with("has no bash; command and postStart hook now run /bin/sh")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("livenessProbe unchanged")),
        "{warnings:?}"
    );
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
        let (shell, warning) = hook_shell(
            requested,
            image,
            "app",
            &config,
            action,
            &Environment::default(),
        );
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

/// bash reads `SHELLOPTS` (`errexit` turns `set -e` on), `BASHOPTS`, `BASH_ENV`,
/// `POSIXLY_CORRECT` and exported `BASH_FUNC_*` from its environment; busybox `sh` and
/// dash do not. A container whose own `env` names one keeps bash in every position and
/// for the custom command; other variables, and images that have bash, change nothing.
#[test]
fn bash_only_environment_keeps_bash() {
    let script = json!({
        "command": ["bash", "-c", "{ cp -r /data/r /archive/; } > /archive/log; rm -rf /data/*"],
        "lifecycle": {"preStop": {"exec": {"command": ["bash", "-c", "rm -rf /data/*"]}}},
        "livenessProbe": {"exec": {"command": ["bash", "-c", "true"]}},
    });
    let entries = [
        json!({"name": "SHELLOPTS", "value": "errexit"}),
        json!({"name": "SHELLOPTS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}),
        json!({"name": "BASHOPTS", "value": "nullglob"}),
        json!({"name": "BASH_ENV", "value": "/etc/profile"}),
        json!({"name": "POSIXLY_CORRECT", "value": ""}),
        json!({"name": "BASH_FUNC_rm%%", "value": "() { :; }"}),
    ];
    for entry in entries {
        let name = entry["name"].as_str().unwrap_or_default().to_owned();
        let mut container = script.clone();
        container["env"] = json!([{"name": "A", "value": "1"}, entry]);
        let (after, warnings, paths) = fix(one("busybox:1.36", container.clone()));
        assert!(paths.is_empty(), "{name}: {paths:?}");
        assert_eq!(after["containers"][0]["command"][0], "bash");
        assert_eq!(warnings.len(), 3, "{name}: {warnings:?}");
        for warning in &warnings {
            assert!(
                warning.contains(&format!("unchanged: env {name} (read by bash only)")),
                "{warning}"
            );
        }
        let env = Environment::of(container.get("env"));
        let custom = Action::Custom("rm -rf /data/*".to_owned());
        let config = Config::default();
        let (shell, warning) = hook_shell("/bin/bash", "busybox", "app", &config, &custom, &env);
        assert_eq!(shell, "/bin/bash", "{name}");
        assert!(
            warning.is_some_and(|w| w.contains("keeps bash: env ")),
            "{name}"
        );
        // Our generated cleanup is written for sh, which ignores these variables.
        let generated = Action::Cleanup(Vec::new());
        let (shell, _) = hook_shell("/bin/bash", "busybox", "app", &config, &generated, &env);
        assert_eq!(shell, "/bin/sh", "{name}");
        // An image with bash: nothing to decide.
        let (_, warnings, paths) = fix(one("ubuntu:24.04", container));
        assert!(
            paths.is_empty() && warnings.is_empty(),
            "{name}: {warnings:?}"
        );
    }
    // Other variables (and a look-alike name) leave the fix alone.
    let mut container = json!({"command": ["bash", "-c", "true"]});
    container["env"] = json!([
        {"name": "SHELL", "value": "/bin/bash"},
        {"name": "MY_SHELLOPTS", "value": "errexit"},
        {"name": "BASH", "value": "x"},
    ]);
    let (_, warnings, paths) = fix(one("busybox:1.36", container));
    assert_eq!(paths, ["/containers/0/command/0"], "{warnings:?}");
}
