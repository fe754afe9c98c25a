//! The shell fix: `bash` in images that only have `sh` (docs/DESIGN.md#the-shell-fix).
//!
//! Decides, per container of an image without bash ([`image`]), which `bash` argv may run
//! under `/bin/sh`: only those [`portable`] proves mean the same. Hands on the corrected
//! argv and one warning per correction or refusal; `pod` runs it before the hooks.
//!
//! Contract:
//! - Looks at every init and app container whose image lacks bash ([`image::lacks_bash`]):
//!   its `command` (+ `args`), `lifecycle.postStart/preStop.exec.command` and
//!   `liveness/readiness/startupProbe.exec.command`.
//! - `argv[0]` `bash` (any path) becomes `/bin/sh`; `env bash` becomes `env sh`. Only that
//!   one array element is replaced, so the JSON diff stays one targeted `replace`.
//! - Only when the run is **proven portable** ([`portable`](crate::mutation::shell_fix::portable)):
//!   bash's own options are ones `sh` takes alike and the `-c` script parses into constructs and
//!   builtins that behave the same in busybox `ash`, `dash` and `bash`, on errors too. Everything
//!   else — a script file (`bash run.sh`: its content is unknown), commands from stdin (`bash`
//!   alone, `bash -s`), `-l`, `-O`, `-o pipefail`, long options, `declare`, `[[ ]]`,
//!   `$RANDOM`, … — keeps bash with a warning naming what blocked the rewrite: "bash: not
//!   found" is a clear failure, a script whose meaning changed is not
//!   (`declare -r W=/x; rm -rf "$W"/*` under busybox `sh` is `rm -rf /*`).
//! - A container whose own `env` names a variable only bash reads (`SHELLOPTS`, `BASHOPTS`,
//!   `BASH_ENV`, `POSIXLY_CORRECT`, `BASH_FUNC_*`) keeps bash ([`portable::Environment`]).
//! - One warning (≤ 120 chars, naming the container) per correction or refusal.
//! - Odd JSON (wrong types, missing fields, non-string argv entries) is left untouched.

pub mod image;
pub mod portable;

use crate::config::{CleanerMode, Config};
use crate::json::{Map, Value};
use crate::mutation::hook::Action;
use portable::gate::basename;
use portable::{gate, Environment, Gate, Text};

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
/// shell runs portable: the custom script (`action`) in the container's environment
/// `env`, or in `cleaner.mode: shell` our generated cleanup. A refused script keeps bash,
/// with a warning.
pub fn hook_shell(
    requested: &str,
    image: &str,
    container: &str,
    config: &Config,
    action: &Action,
    env: &Environment,
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
    match gate(requested, image, config, text, env) {
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
    let env = Environment::of(container.get("env"));
    let name = container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    // The places rewritten to one shell make one warning ("command and preStop hook now
    // run /bin/sh"): one fact about the image, said once (and one warning less to build
    // per review: the core's budget, issue 31). Each refusal is its own.
    let mut rewritten: Vec<(&str, &'static str)> = Vec::new();
    let mut report = |fix: Fix, place: &'static str, warnings: &mut Vec<String>| match fix {
        Fix::Rewrite { to, .. } => rewritten.push((place, to)),
        Fix::Refuse(what) => {
            let tail = format!("has no bash; {place} unchanged: {what} may differ in sh");
            warnings.push(warning(&name, &image, &tail));
        }
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
        if let Some(fix) = plan(&argv, &image, config, &env) {
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

    let places: [(&'static str, &[&str]); 5] = [
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
        let Some(fix) = plan(&argv, &image, config, &env) else {
            continue;
        };
        if let Fix::Rewrite { at, to } = fix {
            set_entry(exec_command_mut(container, path), at, to);
        }
        report(fix, place, warnings);
    }
    if let Some(&(_, to)) = rewritten.first() {
        let one_shell = rewritten.iter().all(|&(_, shell)| shell == to);
        if one_shell {
            let places: Vec<&str> = rewritten.iter().map(|&(place, _)| place).collect();
            let verb = if places.len() == 1 { "runs" } else { "run" };
            let tail = format!("has no bash; {} now {verb} {to}", listed(&places));
            warnings.push(warning(&name, &image, &tail));
        } else {
            for (place, to) in rewritten {
                warnings.push(warning(
                    &name,
                    &image,
                    &format!("has no bash; {place} now runs {to}"),
                ));
            }
        }
    }
}

/// `a`, `a and b`, `a, b and c`.
fn listed(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}

fn exec_command<'a>(container: &'a Map<String, Value>, path: &[&str]) -> Option<&'a Vec<Value>> {
    let mut node = container.get(path.first()?)?;
    for key in &path[1..] {
        node = node.get(key)?;
    }
    node.get("exec")?.get("command")?.as_array()
}

fn exec_command_mut<'a>(
    container: &'a mut Map<String, Value>,
    path: &[&str],
) -> Option<&'a mut Value> {
    let mut node = container.get_mut(path.first()?)?;
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
fn plan(argv: &[&Value], image: &str, config: &Config, env: &Environment) -> Option<Fix> {
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
    match gate(shell, image, config, Text::Argv(&args), env) {
        Gate::Keep => None,
        Gate::Switch => Some(Fix::Rewrite { at, to }),
        Gate::Refuse(what) => Some(Fix::Refuse(what)),
    }
}

/// `container "NAME": IMAGE TAIL`, the image (then the name) shortened to fit.
fn warning(name: &str, image: &str, tail: &str) -> String {
    // The usual case: short enough as it is (bytes bound characters), built once.
    if name.len() <= 30
        && "container \"\": ".len() + name.len() + image.len() + 1 + tail.len() <= MAX_WARNING
    {
        return format!("container \"{name}\": {image} {tail}");
    }
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
mod tests;
