//! docs/DESIGN.md#the-shell-fix, "one gate" (issue 17, class 1): every place of the patch that
//! writes a shell path went through the portability proof.
//!
//! The test does not know the writers: it mutates a corpus of busybox pods with
//! `bash` texts in every position (command, command + args, `env bash`, postStart,
//! preStop, the three probes, an init container, the custom command annotation under
//! both cleaner modes, the `cleaner.mode: shell` cleanup hook), scans **every operation**
//! of the patch for a string that names a shell (`sh`, `/bin/sh`, `…/ash`, `…/dash`),
//! finds the text that shell runs, and requires the proof to accept that text. A new
//! writer that skips the gate fails here whatever path it writes to.

mod core_support;

use core_support::mutate_with;
use prestop_injector::config::{CleanerMode, Config};
use prestop_injector::mutation::shell_fix::portable::{check, invocation, Invocation};
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};

/// bash-only texts: under busybox `sh` each one means something else (README's example
/// first: `declare` fails, W stays empty, `rm -rf /*`).
const NOT_PORTABLE: &[&str] = &[
    "declare -r W=/scratch/work; rm -rf \"$W\"/*",
    "typeset -r W=/scratch/work; rm -rf \"$W\"/*",
    "[[ -d /scratch ]] && rm -rf /scratch/*",
    "a=(/scratch); rm -rf \"${a[0]}\"/*",
    "shopt -s dotglob; rm -rf /scratch/*",
    "cd \"$DIR\"; rm -rf ./*",
    "[ \"$N\" -gt 0 ] && rm -rf /scratch/*",
    "D=\"${P%[^/]*}\"; rm -rf \"$D\"/*",
    "exit \"$CODE\"",
];

/// Their portable counterparts: every position must get `/bin/sh` for these.
const PORTABLE: &[&str] = &[
    "W=/scratch/work; rm -rf \"$W\"/*",
    "[ -d /scratch ] && rm -rf /scratch/*",
    "cd /scratch && rm -rf ./*",
    "rm -rf /scratch/*; exit 0",
];

#[derive(Debug, Clone, Copy)]
enum Place {
    Command,
    CommandAndArgs,
    EnvBash,
    PostStart,
    PreStop,
    Liveness,
    Readiness,
    Startup,
    Init,
    Custom(CleanerMode),
    /// `cleaner.mode: shell`, `shell: /bin/bash`, an explicit cleanup wrapping a bash preStop.
    ShellHook,
}

const PLACES: &[Place] = &[
    Place::Command,
    Place::CommandAndArgs,
    Place::EnvBash,
    Place::PostStart,
    Place::PreStop,
    Place::Liveness,
    Place::Readiness,
    Place::Startup,
    Place::Init,
    Place::Custom(CleanerMode::Binary),
    Place::Custom(CleanerMode::Shell),
    Place::ShellHook,
];

fn config(mode: CleanerMode) -> Config {
    let mut config = Config::default();
    config.cleaner.mode = mode;
    // Cleanup is injected only below an allowed prefix (issue 17, class 5).
    config.allowed_host_path_prefixes = vec!["/mnt/scratch".to_owned()];
    config
}

fn job(place: Place, text: &str) -> (Value, Config) {
    job_with(place, None, text)
}

/// [`job`] with bash's options before the text (`None`: `-c`, and `-ec` for
/// `CommandAndArgs`). The custom command and the shell hook take a text only.
fn job_with(place: Place, options: Option<&[&str]>, text: &str) -> (Value, Config) {
    let argv = |shell: &[&str], default: &[&str]| -> Value {
        let mut argv: Vec<&str> = shell.to_vec();
        argv.extend(options.unwrap_or(default));
        argv.push(text);
        json!(argv)
    };
    let bash_c = argv(&["bash"], &["-c"]);
    let exec = json!({"exec": {"command": bash_c}});
    let mut app = json!({"name": "app", "image": "busybox:1.36",
        "command": ["sh", "-c", "sleep 1"],
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]});
    let mut init = Vec::new();
    // Any annotation of ours brings the object in scope on `/mutate`.
    let mut annotations = json!({"prestop-injector.io/fix-shell": "true"});
    let mut mode = CleanerMode::Binary;
    match place {
        Place::Command => app["command"] = bash_c,
        Place::CommandAndArgs => {
            app["command"] = json!(["/bin/bash"]);
            app["args"] = argv(&[], &["-ec"]);
        }
        Place::EnvBash => app["command"] = argv(&["/usr/bin/env", "bash"], &["-c"]),
        Place::PostStart => app["lifecycle"] = json!({"postStart": exec}),
        Place::PreStop => app["lifecycle"] = json!({"preStop": exec}),
        Place::Liveness => app["livenessProbe"] = exec,
        Place::Readiness => app["readinessProbe"] = exec,
        Place::Startup => app["startupProbe"] = exec,
        Place::Init => {
            init.push(json!({"name": "init", "image": "alpine:3.20", "command": bash_c}))
        }
        Place::Custom(cleaner) => {
            mode = cleaner;
            annotations = json!({"prestop-injector.io/command": text,
                "prestop-injector.io/shell": "/bin/bash"});
        }
        Place::ShellHook => {
            mode = CleanerMode::Shell;
            app["lifecycle"] = json!({"preStop": exec});
            annotations = json!({"prestop-injector.io/cleanup": "/scratch",
                "prestop-injector.io/shell": "/bin/bash"});
        }
    }
    let object = json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "gate", "annotations": annotations},
        "spec": {"template": {"spec": {
            "initContainers": init,
            "containers": [app],
            "volumes": [{"name": "scratch", "hostPath": {"path": "/mnt/scratch/gate", "type": "DirectoryOrCreate"}}],
            "restartPolicy": "Never"
        }}}
    });
    (object, config(mode))
}

fn is_shell(text: &str) -> bool {
    let base = text.rsplit('/').next().unwrap_or(text);
    matches!(base, "sh" | "ash" | "dash")
}

/// The text a shell at `argv[at]` runs, proven or not: `Ok(text)` when the proof accepts
/// it (our generated hook counts as proven: `tests/shell_hooks.rs` runs it in all three
/// shells), `Err(why)` when it does not.
fn proven(argv: &[Value], at: usize) -> Result<String, String> {
    let strings: Vec<Option<&str>> = argv.iter().map(Value::as_str).collect();
    // The program's form: `--shell S --script TEXT`, run as `S -c TEXT` ($0 = S).
    if at > 0
        && strings[at - 1] == Some("--shell")
        && strings.get(at + 1) == Some(&Some("--script"))
    {
        let text = strings.get(at + 2).copied().flatten().ok_or("no script")?;
        return check(text, false, false).map(|()| text.to_owned());
    }
    let run = invocation(&strings[at + 1..]);
    match run {
        Invocation::Script { text, .. } if text.starts_with("# prestop-injector sidecar v1") => {
            Ok(text.to_owned())
        }
        Invocation::Script { text, .. } if text.starts_with("# prestop-injector hook v1") => {
            // The custom script travels as `$1` and is `eval`ed with `$0` = prestop-injector.
            if text.lines().next().unwrap_or("").contains("action=custom") {
                let custom = strings.get(at + 4).copied().flatten().ok_or("no custom")?;
                return check(custom, true, false).map(|()| custom.to_owned());
            }
            Ok(text.to_owned())
        }
        Invocation::Script { text, .. } => match run.blocker() {
            None => Ok(text.to_owned()),
            Some(why) => Err(why),
        },
        other => Err(format!("{other:?}")),
    }
}

/// Every shell path a patch operation writes, with the text it runs (or why that text is
/// not proven). Walks the whole value of every `add`/`replace`/`copy`/`move`.
fn written_shells(original: &Value, patched: &Value) -> Vec<(String, Result<String, String>)> {
    let patch = json_patch::diff(original, patched);
    let mut found = Vec::new();
    for op in &patch.0 {
        let path = op.path().to_string();
        let value = match op {
            json_patch::PatchOperation::Add(add) => add.value.clone(),
            json_patch::PatchOperation::Replace(replace) => replace.value.clone(),
            json_patch::PatchOperation::Remove(_) | json_patch::PatchOperation::Test(_) => continue,
            _ => patched.pointer(&path).cloned().unwrap_or(Value::Null),
        };
        // A shell string as the whole value: its array is in the patched object.
        if value.as_str().is_some_and(is_shell) {
            let (parent, index) = path.rsplit_once('/').unwrap_or(("", ""));
            let verdict = match (patched.pointer(parent), index.parse::<usize>()) {
                (Some(Value::Array(argv)), Ok(at)) => proven(&with_args(patched, parent, argv), at),
                _ => Err(format!("a shell path outside an argv at {path}")),
            };
            found.push((path, verdict));
            continue;
        }
        walk(&value, &path, &mut found);
    }
    found
}

/// A container's argv is `command` followed by `args`.
fn with_args(patched: &Value, parent: &str, argv: &[Value]) -> Vec<Value> {
    let mut argv = argv.to_vec();
    if let Some(container) = parent.strip_suffix("/command") {
        if let Some(Value::Array(args)) = patched.pointer(&format!("{container}/args")) {
            argv.extend(args.iter().cloned());
        }
    }
    argv
}

fn walk(value: &Value, path: &str, found: &mut Vec<(String, Result<String, String>)>) {
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let here = format!("{path}/{i}");
                if item.as_str().is_some_and(is_shell) {
                    found.push((here, proven(items, i)));
                } else {
                    walk(item, &here, found);
                }
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let here = format!("{path}/{key}");
                if item.as_str().is_some_and(is_shell) {
                    found.push((here, Err("a shell path outside an argv".to_owned())));
                } else {
                    walk(item, &here, found);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn every_shell_change_goes_through_the_proof() {
    let mut unproven = Vec::new();
    let mut not_fixed = Vec::new();
    let mut rejected = 0;
    for &place in PLACES {
        for (text, portable) in NOT_PORTABLE
            .iter()
            .map(|t| (t, false))
            .chain(PORTABLE.iter().map(|t| (t, true)))
        {
            assert_eq!(
                check(text, false, false).is_ok(),
                portable,
                "corpus: {text:?} is filed wrong"
            );
            rejected += usize::from(!portable);
            let (object, config) = job(place, text);
            let outcome = mutate_with(Endpoint::Mutate, &config, object.clone());
            assert!(
                outcome.decision.denial.is_none(),
                "{place:?} {text:?}: {:?}",
                outcome.decision.denial
            );
            let written = written_shells(&object, &outcome.patched);
            for (path, verdict) in &written {
                if let Err(why) = verdict {
                    unproven.push(format!("{place:?} {text:?}: {path}: {why}"));
                }
            }
            // Our own hook's shell may switch for its generated text; the user's text must.
            let fixed = written
                .iter()
                .any(|(_, verdict)| verdict.as_deref() == Ok(text));
            if portable && !fixed {
                not_fixed.push(format!(
                    "{place:?} {text:?}: {}",
                    outcome.decision.warnings.join(" | ")
                ));
            }
            if !portable {
                assert!(
                    outcome
                        .decision
                        .warnings
                        .iter()
                        .any(|w| w.contains("unchanged:") || w.contains("keeps bash:")),
                    "{place:?} {text:?}: no warning: {:?}",
                    outcome.decision.warnings
                );
            }
        }
    }
    assert!(rejected > 0);
    assert!(
        unproven.is_empty(),
        "shell paths written for texts the proof rejects:\n{}",
        unproven.join("\n")
    );
    assert!(
        not_fixed.is_empty(),
        "portable texts not switched to sh:\n{}",
        not_fixed.join("\n")
    );
}

/// README's own example, read from README.md verbatim, as a custom command with
/// `shell: /bin/bash` in a busybox image: the hook keeps bash under both cleaner modes.
#[test]
fn every_shell_change_goes_through_the_proof_readme_example_stays_bash() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let example = readme
        .split('`')
        .find(|span| span.starts_with("declare -r W="))
        .expect("README shows the `declare -r W=…` example");
    assert!(check(example, false, false).is_err());
    for mode in [CleanerMode::Binary, CleanerMode::Shell] {
        let (object, config) = job(Place::Custom(mode), example);
        let outcome = mutate_with(Endpoint::Mutate, &config, object.clone());
        let argv = outcome
            .patched
            .pointer("/spec/template/spec/containers/0/lifecycle/preStop/exec/command")
            .and_then(Value::as_array)
            .unwrap_or_else(|| panic!("{mode:?}: no hook: {:?}", outcome.decision));
        let strings: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
        assert!(
            strings.contains(&"/bin/bash") && !strings.iter().any(|s| is_shell(s)),
            "{mode:?}: {strings:?}"
        );
        assert!(strings.contains(&example), "{mode:?}: {strings:?}");
        assert!(
            outcome
                .decision
                .warnings
                .iter()
                .any(|w| w.contains("keeps bash: declare may differ in sh")),
            "{mode:?}: {:?}",
            outcome.decision.warnings
        );
        assert!(written_shells(&object, &outcome.patched).is_empty());
    }
}

/// Issue 27: busybox `sh` goes on under `set -e` when the redirection of `{ }`, `if`,
/// `for`, `while`, `until` or `case` fails, where bash stops before the `rm -rf`. Each
/// compound kind × each way errexit is on (bash's flags, `set -e`, `set -o errexit`,
/// later in the script, from a function) × every writer of the gate: bash stays, and the
/// warning says why.
#[test]
fn compound_redirection_under_errexit_blocks_the_switch() {
    const COMPOUNDS: &[(&str, &str)] = &[
        (
            "{ cp -r /scratch/results /archive/ && sync; } > /archive/copy.log",
            "{ } >file",
        ),
        (
            "while read -r k; do touch \"/scratch/$k\"; done < /config/keep-list",
            "while…done <file",
        ),
        (
            "until true; do :; done 2> /archive/err.log",
            "until…done 2>file",
        ),
        (
            "if [ -d /scratch ]; then cp -r /scratch /archive; fi >> /archive/log",
            "if…fi >>file",
        ),
        (
            "for f in /scratch/*; do cp \"$f\" /archive/; done > /archive/log",
            "for…done >file",
        ),
        ("case a in a) sync ;; esac >&5", "case…esac >&5"),
    ];
    // bash's options (`None`: a plain `-c`) and a prefix of the script.
    const ERREXIT: &[(Option<&[&str]>, &str)] = &[
        (Some(&["-ec"]), ""),
        (Some(&["-e", "-c"]), ""),
        (Some(&["-xec"]), ""),
        (Some(&["-o", "errexit", "-c"]), ""),
        (None, "set -e; "),
        (None, "set -o errexit; "),
        (None, "set -eC\n"),
        (None, "echo start; set -e; "),
        (None, "on() { set -e; }; on; "),
    ];
    let mut failures = Vec::new();
    let mut checked = 0;
    for &place in PLACES {
        for (compound, shown) in COMPOUNDS {
            for (options, prefix) in ERREXIT {
                // The custom command is a text: only `set` turns errexit on there.
                if options.is_some() && matches!(place, Place::Custom(_) | Place::ShellHook) {
                    continue;
                }
                let text = format!("{prefix}{compound}; rm -rf /scratch/*");
                let (object, config) = job_with(place, *options, &text);
                let outcome = mutate_with(Endpoint::Mutate, &config, object.clone());
                checked += 1;
                let switched = written_shells(&object, &outcome.patched)
                    .iter()
                    .any(|(_, verdict)| verdict.as_deref() == Ok(text.as_str()));
                let why = format!("busybox ignores set -e if {shown} fails");
                let warned = outcome.decision.warnings.iter().any(|w| {
                    w.contains(&why)
                        && (w.contains("unchanged:") || w.contains("keeps bash:"))
                        && w.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS
                });
                if switched || !warned {
                    failures.push(format!(
                        "{place:?} {options:?} {text:?}: switched={switched} {:?}",
                        outcome.decision.warnings
                    ));
                }
            }
        }
    }
    assert!(checked > 400, "{checked}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same compounds without errexit, and under errexit the redirections busybox does
/// check (a subshell's, a function body's, a simple command's, `/dev/null`, `2>&1`):
/// every writer still gets `/bin/sh`.
#[test]
fn compound_redirection_without_errexit_is_still_fixed() {
    const TEXTS: &[&str] = &[
        "{ cp -r /scratch/results /archive/ && sync; } > /archive/copy.log; rm -rf /scratch/*",
        "while read -r k; do touch \"/scratch/$k\"; done < /config/keep-list; rm -rf /scratch/*",
        "if true; then sync; fi >> /a; for i in 1; do :; done 2> /a; until true; do :; done >&5",
        "case a in a) sync ;; esac > /archive/log; rm -rf /scratch/*",
        "set -e; ( cp -r /scratch/results /archive/ ) > /archive/copy.log; rm -rf /scratch/*",
        "set -e; f() { sync; } > /archive/log; f; rm -rf /scratch/*",
        "set -e; cp -r /scratch/results /archive/ > /archive/copy.log; rm -rf /scratch/*",
        "set -e; { sync; } > /dev/null 2>&1; rm -rf /scratch/*",
    ];
    let mut failures = Vec::new();
    for &place in PLACES {
        for text in TEXTS {
            assert_eq!(check(text, false, false), Ok(()), "{text:?}");
            let (object, config) = job_with(place, Some(&["-c"]), text);
            let outcome = mutate_with(Endpoint::Mutate, &config, object.clone());
            let written = written_shells(&object, &outcome.patched);
            let unproven: Vec<_> = written.iter().filter(|(_, v)| v.is_err()).collect();
            let switched = written
                .iter()
                .any(|(_, verdict)| verdict.as_deref() == Ok(*text));
            if !switched || !unproven.is_empty() {
                failures.push(format!(
                    "{place:?} {text:?}: {unproven:?} {:?}",
                    outcome.decision.warnings
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// bash reads `SHELLOPTS=errexit` from its environment (busybox `sh` and dash do not):
/// with it in the container's `env`, a portable text would run without `set -e` under
/// `sh`. Every writer keeps bash, and says which variable.
#[test]
fn bash_only_environment_blocks_the_switch() {
    let mut failures = Vec::new();
    for &place in PLACES {
        for text in PORTABLE {
            let (mut object, config) = job(place, text);
            let spec = &mut object["spec"]["template"]["spec"];
            for list in ["initContainers", "containers"] {
                for container in spec[list].as_array_mut().into_iter().flatten() {
                    container["env"] = json!([{"name": "SHELLOPTS", "value": "errexit"}]);
                }
            }
            let outcome = mutate_with(Endpoint::Mutate, &config, object.clone());
            let switched = written_shells(&object, &outcome.patched)
                .iter()
                .any(|(_, verdict)| verdict.as_deref() == Ok(*text));
            let warned = outcome
                .decision
                .warnings
                .iter()
                .any(|w| w.contains("env SHELLOPTS (read by bash only)"));
            if switched || !warned {
                failures.push(format!(
                    "{place:?} {text:?}: switched={switched} {:?}",
                    outcome.decision.warnings
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
