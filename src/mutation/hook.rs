//! The preStop exec command we generate, and recognising it again.
//!
//! Contract:
//! - [`Hook::to_argv`] renders `[shell, "-c", SCRIPT, "prestop-injector", lead…, user…]`
//!   where `lead` are the cleanup targets (or the custom script) and `user` is the user's
//!   own preStop argv, untouched. The script text comes from [`super::script`] and holds
//!   no path and no user text.
//! - [`Hook::from_argv`] returns `Some` exactly for argv that `to_argv` renders (any shell
//!   path): it reads the shape from the script header, rebuilds the hook and compares the
//!   re-rendered argv with the input. So `from_argv(&h.to_argv()) == Some(h)` and a user
//!   hook that only looks like ours is left alone.
//! - [`sidecar_argv`] / [`sidecar_targets`] do the same for the cleanup sidecar (SPEC §7).

use super::script::{self, ActionShape, BeforeShape, Shape, ARG0};

/// What runs before our action inside the one preStop handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing: a fresh hook.
    Nothing,
    /// The user's own exec preStop, with its exact argv; the hook exits with its status.
    Exec(Vec<String>),
    /// A former `preStop.sleep.seconds` action, now `sleep N` in the script.
    Sleep(u64),
}

/// What our part of the hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete the contents of these absolute paths (passed as argv entries, never spliced).
    Cleanup(Vec<String>),
    /// The user's `prestop-injector.io/command` script.
    Custom(String),
}

/// One injected preStop handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub shell: String,
    pub before: Before,
    pub action: Action,
}

impl Hook {
    /// The `exec.command` argv for this hook.
    pub fn to_argv(&self) -> Vec<String> {
        let (action, lead): (ActionShape, &[String]) = match &self.action {
            Action::Cleanup(targets) => (ActionShape::Cleanup, targets),
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

    /// Recognises an argv produced by [`Hook::to_argv`] (any shell); `None` for anything else.
    pub fn from_argv(argv: &[String]) -> Option<Hook> {
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
            ActionShape::Cleanup => Action::Cleanup(lead.to_vec()),
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
        let rendered = hook.to_argv();
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

/// The command of the cleanup sidecar: idles until SIGTERM, then cleans `targets` and exits 0.
pub fn sidecar_argv(shell: &str, targets: &[String]) -> Vec<String> {
    let mut argv = Vec::with_capacity(4 + targets.len());
    argv.push(shell.to_owned());
    argv.push("-c".to_owned());
    argv.push(script::sidecar_script(targets.len()));
    argv.push(ARG0.to_owned());
    argv.extend(targets.iter().cloned());
    argv
}

/// The targets of a command produced by [`sidecar_argv`]; `None` for anything else.
pub fn sidecar_targets(argv: &[String]) -> Option<Vec<String>> {
    let [shell, _, text, _, targets @ ..] = argv else {
        return None;
    };
    if script::parse_sidecar_header(text)? != targets.len() {
        return None;
    }
    (sidecar_argv(shell, targets) == argv).then(|| targets.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
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
            Action::Cleanup(strings(&["/data", "/cache"])),
        );
        let argv = h.to_argv();
        assert_eq!(argv[0], "/bin/sh");
        assert_eq!(argv[1], "-c");
        assert_eq!(argv[3], "prestop-injector");
        assert_eq!(argv[4..], strings(&["/data", "/cache", "/bin/echo", "bye"]));
        assert!(!argv[2].contains("/data") && !argv[2].contains("bye"));
    }

    #[test]
    fn foreign_argv_is_not_ours() {
        let ours = hook(Before::Nothing, Action::Cleanup(strings(&["/data"]))).to_argv();
        let mut edited = ours.clone();
        edited[2].push_str("echo extra\n");
        let mut extra_arg = ours.clone();
        extra_arg.push("/more".to_owned());
        let mut renamed = ours.clone();
        renamed[3] = "other".to_owned();
        let custom_two = {
            let mut argv = hook(Before::Nothing, Action::Custom("x".to_owned())).to_argv();
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
            Action::Cleanup(strings(&["/data"])),
        );
        let mut old = h.to_argv();
        old[2] = old[2].replace(
            "rc=$?\n[ \"$status\" -eq 0 ] || exit \"$status\"\nexit \"$rc\"\n",
            "exit \"$status\"\n",
        );
        assert_ne!(old, h.to_argv());
        assert_eq!(Hook::from_argv(&old), Some(h));
        let mut edited = old.clone();
        edited[2].push_str("echo extra\n");
        assert_eq!(Hook::from_argv(&edited), None);
    }

    #[test]
    fn sidecar_round_trip() {
        let targets = strings(&["/data", "/with space"]);
        let argv = sidecar_argv("/bin/sh", &targets);
        assert_eq!(sidecar_targets(&argv), Some(targets));
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

    fn any_hook() -> impl Strategy<Value = Hook> {
        let text = any::<String>();
        let list = prop::collection::vec(any::<String>(), 0..4);
        let before = prop_oneof![
            Just(Before::Nothing),
            any::<u64>().prop_map(Before::Sleep),
            list.clone().prop_map(Before::Exec),
        ];
        let action = prop_oneof![
            list.prop_map(Action::Cleanup),
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
            let argv = h.to_argv();
            prop_assert_eq!(Hook::from_argv(&argv), Some(h.clone()));
            // Rebuilding what we recognised is a fixed point (idempotent injection).
            prop_assert_eq!(Hook::from_argv(&argv).map(|h| h.to_argv()), Some(argv));
        }

        #[test]
        fn sidecar_round_trip_any(shell in any::<String>(), targets in prop::collection::vec(any::<String>(), 0..4)) {
            prop_assert_eq!(sidecar_targets(&sidecar_argv(&shell, &targets)), Some(targets));
        }
    }
}
