//! The preStop exec command we generate, and recognising it again.
//!
//! Below the stages that build and check: `targets`, `inject`, `shell_fix` and `grace` read
//! it, and it reads none of them. It decides the argv of a [`Hook`] (and of the sidecar);
//! [`existing`] says what a container's preStop holds, [`ours`] which containers are ours.
//!
//! Contract:
//! - A [`Hook`] (what runs before, what our part does) renders in one of two forms,
//!   chosen by `cleaner.mode` ([`Hook::to_argv`]):
//!   - `binary`: `[PROGRAM, "hook", (--deadline S)?, (--node-agent SOCKET)?, (--sleep N)?, (--target P
//!     (--host H)? (--whole-filesystem)?)…, (--shell S --script T)?, (-- user…)?]`, the
//!     argv of the static cleaner program as [`prestop_clean::argv::HookArgs::render`]
//!     writes it. No shell unless a custom script needs one. Each target carries the
//!     identity the program checks at run time ([`crate::mutation::targets::identify`]);
//!     `--node-agent` is where the node agent's socket is mounted in that container
//!     (`nodeAgent` in the config, [`crate::mutation::inject::node_agent`]). It is how
//!     the hook is delivered, not what it does: [`Hook`] does not hold it, and
//!     [`Hook::from_argv`] reads a hook with or without it. `--deadline` likewise: it
//!     follows from the pod's grace period ([`deadline_seconds`]), which is known only
//!     after the hooks are in place, so the pod stage inserts it last; hooks of older
//!     releases, without it, are still recognised.
//!   - `shell`: `[shell, "-c", SCRIPT, "prestop-injector", lead…, user…]` where `lead` are
//!     the cleanup targets' paths (or the custom script) and `user` is the user's own
//!     preStop argv, untouched. The script text comes from [`crate::mutation::hook::script`] and
//!     holds no path and no user text. It has no run-time identity check: a target's expected
//!     host path is not in its argv, and `sh` cannot check one.
//! - [`Hook::from_argv`] returns `Some` exactly for argv that `to_argv` renders, in either
//!   form (any shell path, so v1 shell hooks of earlier releases are recognised and
//!   rebuilt): it parses, rebuilds the hook and compares the re-rendered argv (with the
//!   socket it read) with the input. So `from_argv(&h.to_argv(m, socket)) == Some(h)` (for
//!   the program form the shell of a cleanup hook is not part of the argv and reads back
//!   empty) and a user hook that only looks like ours is left alone.
//! - [`sidecar_argv`] / [`program_sidecar_argv`] / [`sidecar_targets`] do the same for
//!   the cleanup sidecar (docs/DESIGN.md#the-sidecar).

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
    /// The `exec.command` argv for this hook in the configured form. `node_agent` is the
    /// node agent's socket inside the container, for the program form only: `sh` cannot
    /// ask the agent, so the shell form has none.
    pub fn to_argv(&self, mode: CleanerMode, node_agent: Option<&str>) -> Vec<String> {
        match mode {
            CleanerMode::Binary => self.to_program_argv_asking(node_agent),
            CleanerMode::Shell => self.to_shell_argv(),
        }
    }

    /// `[PROGRAM, "hook", …]`, without a node agent.
    pub fn to_program_argv(&self) -> Vec<String> {
        self.to_program_argv_asking(None)
    }

    /// `[PROGRAM, "hook", (--node-agent SOCKET)?, …]`.
    pub fn to_program_argv_asking(&self, node_agent: Option<&str>) -> Vec<String> {
        self.to_program_argv_until(None, node_agent)
    }

    /// `[PROGRAM, "hook", (--deadline S)?, (--node-agent SOCKET)?, …]`: `deadline` from
    /// [`deadline_seconds`], set once the grace period is known.
    pub fn to_program_argv_until(
        &self,
        deadline: Option<u64>,
        node_agent: Option<&str>,
    ) -> Vec<String> {
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
            deadline,
            node_agent: node_agent.map(str::to_owned),
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
        let (deadline, node_agent) = (parsed.deadline, parsed.node_agent);
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
        (hook.to_program_argv_until(deadline, node_agent.as_deref()) == argv).then_some(hook)
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

/// The command of the program sidecar: `[IMAGE_PROGRAM, "sidecar", (--node-agent
/// SOCKET)?, (--restartable)?, --target P…]`, `node_agent` being the agent's socket inside
/// the sidecar, `restartable` whether the kubelet can restart the pod in place (issue 31).
pub fn program_sidecar_argv(
    targets: &[Target],
    node_agent: Option<&str>,
    restartable: bool,
) -> Vec<String> {
    program_sidecar_argv_until(targets, None, node_agent, restartable)
}

/// [`program_sidecar_argv`] with `--deadline S` first.
pub fn program_sidecar_argv_until(
    targets: &[Target],
    deadline: Option<u64>,
    node_agent: Option<&str>,
    restartable: bool,
) -> Vec<String> {
    SidecarArgs {
        deadline,
        node_agent: node_agent.map(str::to_owned),
        restartable,
        targets: targets.to_vec(),
    }
    .render(IMAGE_PROGRAM)
}

/// Seconds between the deadline the program stops at and the kubelet's kill: for the
/// program to stop its workers and print its line, and for the kubelet to read it
/// (docs/CLEANUP.md#the-deadline).
pub const DEADLINE_MARGIN_SECONDS: u64 = 2;

/// docs/CLEANUP.md#the-deadline: the `--deadline` of a hook, counted from its start, or of
/// the sidecar, counted from its SIGTERM. `grace` is the pod's grace period: the kubelet
/// kills a preStop hook that still runs `grace` seconds after the deletion, which is
/// when the hook started (the user's own handler runs inside it). The sidecar is signalled
/// only after the app containers stopped, and the grace period holds `sidecar_budget`
/// (`cleanupBudgetSeconds`) for it. `None` when the margin leaves no second.
pub fn deadline_seconds(grace: u64, sidecar_budget: Option<u64>) -> Option<u64> {
    let until_kill = sidecar_budget.map_or(grace, |budget| budget.min(grace));
    until_kill
        .checked_sub(DEADLINE_MARGIN_SECONDS)
        .filter(|seconds| *seconds > 0)
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
            let parsed = SidecarArgs::parse(args).ok()?;
            let rendered = program_sidecar_argv_until(
                &parsed.targets,
                parsed.deadline,
                parsed.node_agent.as_deref(),
                parsed.restartable,
            );
            return (rendered == argv).then_some(parsed.targets);
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
mod tests;
