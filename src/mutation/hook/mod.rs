//! The preStop exec command we generate, and recognising it again.
//!
//! Contract:
//! - A [`Hook`] (what runs before, what our part does) renders in one of two forms,
//!   chosen by `cleaner.mode` ([`Hook::to_argv`]):
//!   - `binary`: `[PROGRAM, "hook", (--sleep N)?, (--target P (--host H)?
//!     (--whole-filesystem)?)…, (--shell S --script T)?, (-- user…)?]`, the argv of the
//!     static cleaner program as [`prestop_clean::argv::HookArgs::render`] writes it. No
//!     shell unless a custom script needs one. Each target carries the identity the
//!     program checks at run time ([`crate::mutation::targets::identify`]).
//!   - `shell`: `[shell, "-c", SCRIPT, "prestop-injector", lead…, user…]` where `lead` are
//!     the cleanup targets' paths (or the custom script) and `user` is the user's own
//!     preStop argv, untouched. The script text comes from [`crate::mutation::hook::script`] and holds no
//!     path and no user text. It has no run-time identity check: a target's expected
//!     host path is not in its argv, and `sh` cannot check one.
//! - [`Hook::from_argv`] returns `Some` exactly for argv that `to_argv` renders, in either
//!   form (any shell path, so v1 shell hooks of earlier releases are recognised and
//!   rebuilt): it parses, rebuilds the hook and compares the re-rendered argv with the
//!   input. So `from_argv(&h.to_argv(m)) == Some(h)` (for the program form the shell of a
//!   cleanup hook is not part of the argv and reads back empty) and a user hook that only
//!   looks like ours is left alone.
//! - [`sidecar_argv`] / [`program_sidecar_argv`] / [`sidecar_targets`] do the same for
//!   the cleanup sidecar (SPEC §7).

pub(in crate::mutation) mod existing;
pub(in crate::mutation) mod ours;
pub mod script;

use crate::config::CleanerMode;
/// A cleanup target and the identity it must have on the node: the program's own type.
pub use prestop_clean::argv::Target;
use prestop_clean::argv::{HookArgs, Script, SidecarArgs};
use script::{ActionShape, BeforeShape, Shape, ARG0};

/// What runs before our action inside the one preStop handler: nothing, the user's own
/// exec preStop with its exact argv (the hook exits with its status), or a former
/// `preStop.sleep.seconds` action. The cleaner program's own type, so the two never drift.
pub use prestop_clean::argv::Before;

/// Where the delivery init container puts the program: an `emptyDir` mounted read-only
/// at this path in every target container. A leading dot keeps it out of the way of
/// image paths; [`crate::mutation::inject::delivery`] refuses containers that mount anything there.
pub const PROGRAM_DIR: &str = "/.prestop-injector";
/// The program inside a target container: `PROGRAM_DIR` / `prestop_clean::argv::PROGRAM_NAME`.
pub const PROGRAM: &str = "/.prestop-injector/prestop-clean";
/// The program inside `cleaner.image` (the Dockerfile installs it there); the installer
/// and the sidecar run it from the image itself.
pub const IMAGE_PROGRAM: &str = "/usr/local/bin/prestop-clean";

/// What our part of the hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete the contents of these absolute paths (passed as argv entries, never spliced),
    /// each checked at run time against its expected host path (program form only).
    Cleanup(Vec<Target>),
    /// The user's `prestop-injector.io/command` script.
    Custom(String),
}

/// One injected preStop handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The shell of the shell form, and of a custom script in the program form.
    pub shell: String,
    pub before: Before,
    pub action: Action,
}

impl Hook {
    /// The `exec.command` argv for this hook in the configured form.
    pub fn to_argv(&self, mode: CleanerMode) -> Vec<String> {
        match mode {
            CleanerMode::Binary => self.to_program_argv(),
            CleanerMode::Shell => self.to_shell_argv(),
        }
    }

    /// `[PROGRAM, "hook", …]`.
    pub fn to_program_argv(&self) -> Vec<String> {
        let (targets, script) = match &self.action {
            Action::Cleanup(targets) => (targets.clone(), None),
            Action::Custom(text) => (
                Vec::new(),
                Some(Script {
                    shell: self.shell.clone(),
                    text: text.clone(),
                }),
            ),
        };
        HookArgs {
            before: self.before.clone(),
            targets,
            script,
        }
        .render(PROGRAM)
    }

    /// `[shell, "-c", SCRIPT, "prestop-injector", …]`: the v1 shell hook.
    pub fn to_shell_argv(&self) -> Vec<String> {
        let paths: Vec<String>;
        let (action, lead): (ActionShape, &[String]) = match &self.action {
            Action::Cleanup(targets) => {
                paths = target_paths(targets);
                (ActionShape::Cleanup, &paths)
            }
            Action::Custom(text) => (ActionShape::Custom, std::slice::from_ref(text)),
        };
        let (before, user): (BeforeShape, &[String]) = match &self.before {
            Before::Nothing => (BeforeShape::Nothing, &[]),
            Before::Sleep(n) => (BeforeShape::Sleep(*n), &[]),
            Before::Exec(argv) => (BeforeShape::Exec, argv),
        };
        let shape = Shape {
            before,
            action,
            lead: lead.len(),
        };
        let mut argv = Vec::with_capacity(4 + lead.len() + user.len());
        argv.push(self.shell.clone());
        argv.push("-c".to_owned());
        argv.push(script::hook_script(shape));
        argv.push(ARG0.to_owned());
        argv.extend(lead.iter().cloned());
        argv.extend(user.iter().cloned());
        argv
    }

    /// Recognises an argv produced by [`Hook::to_argv`] in either form; `None` for
    /// anything else.
    pub fn from_argv(argv: &[String]) -> Option<Hook> {
        Hook::from_program_argv(argv).or_else(|| Hook::from_shell_argv(argv))
    }

    fn from_program_argv(argv: &[String]) -> Option<Hook> {
        let (program, args) = argv.split_first()?;
        if program != PROGRAM {
            return None;
        }
        let parsed = HookArgs::parse(args).ok()?;
        let (shell, action) = match (parsed.targets, parsed.script) {
            (targets, None) => (String::new(), Action::Cleanup(targets)),
            (targets, Some(Script { shell, text })) if targets.is_empty() => {
                (shell, Action::Custom(text))
            }
            // Targets and a script together: a shape we never render.
            _ => return None,
        };
        let hook = Hook {
            shell,
            before: parsed.before,
            action,
        };
        (hook.to_program_argv() == argv).then_some(hook)
    }

    fn from_shell_argv(argv: &[String]) -> Option<Hook> {
        let [shell, flag, text, arg0, args @ ..] = argv else {
            return None;
        };
        if flag != "-c" || arg0 != ARG0 {
            return None;
        }
        let shape = script::parse_header(text)?;
        if shape.lead > args.len() {
            return None;
        }
        let (lead, user) = args.split_at(shape.lead);
        let action = match shape.action {
            ActionShape::Cleanup => {
                Action::Cleanup(lead.iter().map(|p| Target::path_only(p.clone())).collect())
            }
            ActionShape::Custom => match lead {
                [text] => Action::Custom(text.clone()),
                _ => return None,
            },
        };
        let before = match shape.before {
            BeforeShape::Exec => Before::Exec(user.to_vec()),
            BeforeShape::Nothing if user.is_empty() => Before::Nothing,
            BeforeShape::Sleep(n) if user.is_empty() => Before::Sleep(n),
            _ => return None,
        };
        let hook = Hook {
            shell: shell.clone(),
            before,
            action,
        };
        // Only the exact text we render counts: an edited or look-alike script is the
        // user's, and wrapping it again is safer than silently replacing it.
        let rendered = hook.to_shell_argv();
        // A release before the exit-status fix rendered other text for the same shape.
        let legacy = script::legacy_hook_script(shape).is_some_and(|old| {
            *text == old && rendered[..2] == argv[..2] && rendered[3..] == argv[3..]
        });
        (rendered == argv || legacy).then_some(hook)
    }

    /// Seconds of literal `sleep N` the hook will run: the `Sleep` action, sleeps in the
    /// user's argv and in a custom script.
    pub fn literal_sleep_seconds(&self) -> u64 {
        let before = match &self.before {
            Before::Nothing => 0,
            Before::Sleep(n) => *n,
            Before::Exec(argv) => script::literal_sleep_seconds(&argv.join(" ")),
        };
        let action = match &self.action {
            Action::Cleanup(_) => 0,
            Action::Custom(text) => script::literal_sleep_seconds(text),
        };
        before.saturating_add(action)
    }
}

/// The command of the shell sidecar: idles until SIGTERM, then cleans `targets` and exits 0.
pub fn sidecar_argv(shell: &str, targets: &[String]) -> Vec<String> {
    let mut argv = Vec::with_capacity(4 + targets.len());
    argv.push(shell.to_owned());
    argv.push("-c".to_owned());
    argv.push(script::sidecar_script(targets.len()));
    argv.push(ARG0.to_owned());
    argv.extend(targets.iter().cloned());
    argv
}

/// The container paths of `targets`: all the shell forms pass.
pub fn target_paths(targets: &[Target]) -> Vec<String> {
    targets.iter().map(|t| t.path.clone()).collect()
}

/// The command of the program sidecar: `[IMAGE_PROGRAM, "sidecar", --target P…]`.
pub fn program_sidecar_argv(targets: &[Target]) -> Vec<String> {
    SidecarArgs {
        targets: targets.to_vec(),
    }
    .render(IMAGE_PROGRAM)
}

/// The target paths of a command produced by [`sidecar_argv`] or
/// [`program_sidecar_argv`]; `None` for anything else.
pub fn sidecar_targets(argv: &[String]) -> Option<Vec<String>> {
    sidecar_identified_targets(argv).map(|targets| target_paths(&targets))
}

/// [`sidecar_targets`] with each target's expected identity (paths only for the shell
/// sidecar, which cannot check one).
pub fn sidecar_identified_targets(argv: &[String]) -> Option<Vec<Target>> {
    if let [program, args @ ..] = argv {
        if program == IMAGE_PROGRAM {
            let targets = SidecarArgs::parse(args).ok()?.targets;
            return (program_sidecar_argv(&targets) == argv).then_some(targets);
        }
    }
    let [shell, _, text, _, targets @ ..] = argv else {
        return None;
    };
    if script::parse_sidecar_header(text)? != targets.len() {
        return None;
    }
    (sidecar_argv(shell, targets) == argv).then(|| {
        targets
            .iter()
            .map(|t| Target::path_only(t.clone()))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn targets(items: &[&str]) -> Vec<Target> {
        items.iter().map(|s| Target::path_only(*s)).collect()
    }

    fn hook(before: Before, action: Action) -> Hook {
        Hook {
            shell: "/bin/sh".to_owned(),
            before,
            action,
        }
    }

    #[test]
    fn argv_shape() {
        let h = hook(
            Before::Exec(strings(&["/bin/echo", "bye"])),
            Action::Cleanup(targets(&["/data", "/cache"])),
        );
        let argv = h.to_shell_argv();
        assert_eq!(argv[0], "/bin/sh");
        assert_eq!(argv[1], "-c");
        assert_eq!(argv[3], "prestop-injector");
        assert_eq!(argv[4..], strings(&["/data", "/cache", "/bin/echo", "bye"]));
        assert!(!argv[2].contains("/data") && !argv[2].contains("bye"));
    }

    #[test]
    fn foreign_argv_is_not_ours() {
        let ours = hook(Before::Nothing, Action::Cleanup(targets(&["/data"]))).to_shell_argv();
        let mut edited = ours.clone();
        edited[2].push_str("echo extra\n");
        let mut extra_arg = ours.clone();
        extra_arg.push("/more".to_owned());
        let mut renamed = ours.clone();
        renamed[3] = "other".to_owned();
        let custom_two = {
            let mut argv = hook(Before::Nothing, Action::Custom("x".to_owned())).to_shell_argv();
            argv.push("y".to_owned());
            argv
        };
        for argv in [
            vec![],
            strings(&["/bin/sh", "-c", "sleep 5"]),
            strings(&[
                "/bin/sh",
                "-c",
                "# prestop-injector hook v1",
                "prestop-injector",
            ]),
            edited,
            extra_arg,
            renamed,
            custom_two,
            ours[..3].to_vec(),
        ] {
            assert_eq!(Hook::from_argv(&argv), None, "{argv:?}");
            assert_eq!(sidecar_targets(&argv), None, "{argv:?}");
        }
        assert_eq!(
            Hook::from_argv(&sidecar_argv("/bin/sh", &strings(&["/a"]))),
            None
        );
    }

    #[test]
    fn hooks_of_earlier_releases_are_ours() {
        let h = hook(
            Before::Exec(strings(&["/bin/echo", "bye"])),
            Action::Cleanup(targets(&["/data"])),
        );
        let mut old = h.to_shell_argv();
        old[2] = old[2].replace(
            "rc=$?\n[ \"$status\" -eq 0 ] || exit \"$status\"\nexit \"$rc\"\n",
            "exit \"$status\"\n",
        );
        assert_ne!(old, h.to_shell_argv());
        assert_eq!(Hook::from_argv(&old), Some(h));
        let mut edited = old.clone();
        edited[2].push_str("echo extra\n");
        assert_eq!(Hook::from_argv(&edited), None);
    }

    #[test]
    fn sidecar_round_trip() {
        let paths = strings(&["/data", "/with space"]);
        let argv = sidecar_argv("/bin/sh", &paths);
        assert_eq!(
            sidecar_identified_targets(&argv),
            Some(targets(&["/data", "/with space"]))
        );
        assert_eq!(sidecar_targets(&argv), Some(paths));
        let mut changed = argv.clone();
        changed[1] = "-ec".to_owned();
        assert_eq!(sidecar_targets(&changed), None);
    }

    #[test]
    fn sleep_estimate() {
        let cases = [
            (hook(Before::Nothing, Action::Cleanup(vec![])), 0),
            (hook(Before::Sleep(20), Action::Cleanup(vec![])), 20),
            (
                hook(
                    Before::Exec(strings(&["sh", "-c", "sleep 5; sleep 1m"])),
                    Action::Cleanup(vec![]),
                ),
                65,
            ),
            (
                hook(
                    Before::Exec(strings(&["sleep", "10"])),
                    Action::Custom("sleep 2".to_owned()),
                ),
                12,
            ),
            (
                hook(
                    Before::Exec(strings(&["/bin/sleep", "60"])),
                    Action::Cleanup(vec![]),
                ),
                60,
            ),
            (
                hook(
                    Before::Sleep(3),
                    Action::Custom("mysleep 9; sleep $X".to_owned()),
                ),
                3,
            ),
        ];
        for (h, want) in cases {
            assert_eq!(h.literal_sleep_seconds(), want, "{h:?}");
        }
    }

    #[test]
    fn program_argv_shape() {
        assert_eq!(
            PROGRAM,
            format!("{PROGRAM_DIR}/{}", prestop_clean::argv::PROGRAM_NAME)
        );
        let h = hook(
            Before::Exec(strings(&["/usr/sbin/nginx", "-s", "quit"])),
            Action::Cleanup(vec![
                Target::on_host("/data", "/mnt/data"),
                Target {
                    whole_filesystem: true,
                    ..Target::on_host("/cache", "/mnt/disk/$(POD_NAME)")
                },
            ]),
        );
        assert_eq!(
            h.to_program_argv(),
            strings(&[
                PROGRAM,
                "hook",
                "--target",
                "/data",
                "--host",
                "/mnt/data",
                "--target",
                "/cache",
                "--host",
                "/mnt/disk/$(POD_NAME)",
                "--whole-filesystem",
                "--",
                "/usr/sbin/nginx",
                "-s",
                "quit"
            ])
        );
        let custom = hook(Before::Sleep(5), Action::Custom("echo bye".into()));
        assert_eq!(
            custom.to_argv(CleanerMode::Binary),
            strings(&[
                PROGRAM, "hook", "--sleep", "5", "--shell", "/bin/sh", "--script", "echo bye"
            ])
        );
        assert_eq!(Hook::from_argv(&custom.to_program_argv()), Some(custom));
        // The shell of a cleanup hook is not in the program's argv.
        let read_back = Hook::from_argv(&h.to_program_argv()).unwrap();
        assert_eq!(read_back.shell, "");
        assert_eq!((read_back.before, read_back.action), (h.before, h.action));
    }

    #[test]
    fn foreign_program_argv_is_not_ours() {
        for argv in [
            strings(&[PROGRAM]),
            strings(&[PROGRAM, "sidecar", "--target", "/a"]),
            strings(&["/bin/prestop-clean", "hook", "--target", "/a"]),
            strings(&[PROGRAM, "hook", "/a"]),
            strings(&[
                PROGRAM, "hook", "--target", "/a", "--shell", "/bin/sh", "--script", "x",
            ]),
            strings(&[IMAGE_PROGRAM, "sidecar", "--target", "/a", "x"]),
        ] {
            assert_eq!(Hook::from_argv(&argv), None, "{argv:?}");
            assert_eq!(sidecar_targets(&argv), None, "{argv:?}");
        }
        let targets = vec![
            Target::on_host("/a", "/mnt/a"),
            Target::path_only("/--target"),
        ];
        assert_eq!(
            sidecar_identified_targets(&program_sidecar_argv(&targets)),
            Some(targets)
        );
        assert_eq!(program_sidecar_argv(&[])[..2], [IMAGE_PROGRAM, "sidecar"]);
    }

    fn any_hook() -> impl Strategy<Value = Hook> {
        let text = any::<String>();
        let list = prop::collection::vec(any::<String>(), 0..4);
        let before = prop_oneof![
            Just(Before::Nothing),
            any::<u64>().prop_map(Before::Sleep),
            list.clone().prop_map(Before::Exec),
        ];
        let target = (any::<String>(), any::<Option<String>>(), any::<bool>()).prop_map(
            |(path, host, whole_filesystem)| Target {
                path,
                host,
                whole_filesystem,
            },
        );
        let action = prop_oneof![
            prop::collection::vec(target, 0..4).prop_map(Action::Cleanup),
            any::<String>().prop_map(Action::Custom),
        ];
        (text, before, action).prop_map(|(shell, before, action)| Hook {
            shell,
            before,
            action,
        })
    }

    proptest! {
        #[test]
        fn round_trip(h in any_hook()) {
            let argv = h.to_shell_argv();
            // The shell form carries paths only: what it cannot check, it does not keep.
            let paths_only = match &h.action {
                Action::Cleanup(targets) => Hook {
                    action: Action::Cleanup(
                        targets.iter().map(|t| Target::path_only(t.path.clone())).collect(),
                    ),
                    ..h.clone()
                },
                Action::Custom(_) => h.clone(),
            };
            prop_assert_eq!(Hook::from_argv(&argv), Some(paths_only));
            // Rebuilding what we recognised is a fixed point (idempotent injection).
            prop_assert_eq!(Hook::from_argv(&argv).map(|h| h.to_shell_argv()), Some(argv));
        }

        #[test]
        fn program_round_trip(h in any_hook()) {
            let argv = h.to_program_argv();
            let read_back = Hook::from_argv(&argv).expect("ours");
            prop_assert_eq!(&read_back.before, &h.before);
            prop_assert_eq!(&read_back.action, &h.action);
            prop_assert_eq!(read_back.to_program_argv(), argv);
        }

        #[test]
        fn sidecar_round_trip_any(shell in any::<String>(), targets in prop::collection::vec(any::<String>(), 0..4)) {
            prop_assert_eq!(sidecar_targets(&sidecar_argv(&shell, &targets)), Some(targets));
        }
    }
}
