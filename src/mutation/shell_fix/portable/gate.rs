//! docs/DESIGN.md#the-shell-fix, "one gate": the only function that may decide to run a text under
//! `sh` instead of the `bash` it asked for.
//!
//! Every writer of a shell path goes through [`gate`]: the container's `command`/`args`,
//! lifecycle and probe `exec` (`shell_fix::fix_shells`), the shell of our own preStop
//! hook, which runs the custom `prestop-injector.io/command` script or, with
//! `cleaner.mode: shell`, our generated cleanup (`shell_fix::hook_shell`), and anything
//! added later. A writer that does not ask the gate has no way to get a "switch".
//! Each passes the container's [`Environment`]: bash reads some variables at startup that
//! `sh` ignores, and a user's text run with them keeps bash.

use super::{check, invocation, Blocker, Invocation};
use crate::config::Config;
use crate::json::Value;
use crate::mutation::shell_fix::image;

/// Variables bash reads from its environment at startup and `sh` ignores: `SHELLOPTS`
/// (`errexit` there turns `set -e` on in bash only), `BASHOPTS` (shopt), `BASH_ENV` (a
/// file bash sources first), `POSIXLY_CORRECT` (bash's POSIX mode) and, by prefix,
/// `BASH_FUNC_` (exported functions, which may shadow any command).
const BASH_ONLY_ENV: &[&str] = &["SHELLOPTS", "BASHOPTS", "BASH_ENV", "POSIXLY_CORRECT"];
const BASH_ONLY_ENV_PREFIX: &str = "BASH_FUNC_";

/// What the shell inherits that the proof must know: the container's own `env` list.
/// Values from `envFrom` and the image's `ENV` are not seen (docs/SHELL-FIX.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// The first `env` name that only bash reads.
    bash_only: Option<String>,
}

impl Environment {
    /// From a container's `env` field (`None`: no list). Entries count by name, whatever
    /// their value or `valueFrom`: an empty `SHELLOPTS` is still read by bash.
    pub fn of(env: Option<&Value>) -> Environment {
        let bash_only = env
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|entry| entry.get("name").and_then(Value::as_str))
            .find(|name| BASH_ONLY_ENV.contains(name) || name.starts_with(BASH_ONLY_ENV_PREFIX))
            .map(|name| name.chars().take(30).collect());
        Environment { bash_only }
    }
}

/// What the shell would run.
#[derive(Debug, Clone, Copy)]
pub enum Text<'a> {
    /// bash's arguments after `argv[0]` (`None` for a non-string JSON entry): options and
    /// a `-c` script, as in a container's `command` + `args` or an `exec` handler.
    Argv(&'a [Option<&'a str>]),
    /// A script run as `SHELL -c TEXT` (or `eval`ed by our hook): the custom command.
    /// `zero_known`: `$0` is the same under every shell.
    Script { text: &'a str, zero_known: bool },
    /// Only text this program writes (`script.rs`): POSIX `sh` by construction, with every
    /// path and user argument in positional parameters, and run under busybox `sh`,
    /// `dash` and `bash` by `tests/shell_hooks.rs`. Never for text a user wrote.
    Generated,
}

/// The gate's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Nothing to change: the shell is not bash, the image has bash, or the input is odd
    /// JSON we do not decide on.
    Keep,
    /// The text is proven to mean the same under `sh`: the caller may write `sh`.
    Switch,
    /// bash stays (the caller warns): this is what may differ in `sh`.
    Refuse(Blocker),
}

/// Whether `shell` (a path or a bare name) may be replaced by `sh` to run `text` in `image`,
/// in a container whose environment is `env`.
pub fn gate(shell: &str, image: &str, config: &Config, text: Text, env: &Environment) -> Gate {
    if basename(shell) != "bash" || !image::lacks_bash(image, config) {
        return Gate::Keep;
    }
    // The user's text asked for bash with what bash reads from the environment; ours is
    // written for `sh`, which ignores those variables.
    let environment = || match &env.bash_only {
        Some(name) => Err(format!("env {name} (read by bash only)")),
        None => Ok(()),
    };
    let proof = match text {
        Text::Argv(args) => match invocation(args) {
            Invocation::Unknown => return Gate::Keep,
            run => environment().and_then(|()| run.blocker().map_or(Ok(()), Err)),
        },
        Text::Script { text, zero_known } => {
            environment().and_then(|()| check(text, zero_known, false))
        }
        Text::Generated => Ok(()),
    };
    match proof {
        Ok(()) => Gate::Switch,
        Err(what) => Gate::Refuse(what),
    }
}

pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
