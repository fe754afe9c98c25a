//! The command line of `prestop-clean`: the one contract between the webhook, which
//! renders it into pod specs, and the program, which parses it.
//!
//! ```text
//! prestop-clean hook [--deadline S] [--node-agent SOCKET] [--sleep N]
//!                    [--target PATH [--host HOSTPATH] [--whole-filesystem]]...
//!                    [--shell SHELL --script TEXT] [-- ARGV...]
//! prestop-clean sidecar [--deadline S] [--node-agent SOCKET]
//!                    [--target PATH [--host HOSTPATH] [--whole-filesystem]]...
//! prestop-clean install DIR
//! prestop-clean empty --uid U --gid G [--groups G1,G2,...] PATH
//! ```
//!
//! Each target carries the identity the webhook expects it to have on the node
//! (docs/DESIGN.md#identity-is-checked-on-the-node): `--host` is the host directory
//! (`hostPath.path` + `subPath` + the suffix below the mount; a `subPathExpr` kept verbatim
//! in Kubernetes' `$(VAR)` syntax, every other `$` written `$$`), and `--whole-filesystem` says the operator
//! allowed exactly that host path, so its mount may be the root of a whole filesystem.
//! A target without `--host` (a pod injected by an older release) still parses, but the
//! program refuses to clean it. `--node-agent SOCKET` names the unix socket of the node
//! agent, which tells whether the opened directory *is* the node's directory at `--host`
//! (docs/DESIGN.md); without it, or when the agent cannot be reached, the stricter rule
//! that needs no node's word applies.
//!
//! - `hook` (a preStop `exec`): first the user's own handler — `ARGV` exactly as given
//!   (fork/exec, no shell), or `--sleep N` seconds —, then the custom `--script` through
//!   `--shell SHELL -c TEXT`, then empties every `--target`.
//! - `sidecar`: idles until SIGTERM or SIGINT, then empties every `--target` and exits 0.
//! - `install`: copies the program itself to `DIR/prestop-clean` (the init container
//!   that delivers it into the pod's `emptyDir`; no `cp` or shell needed in the image).
//! - `empty` (run by the node reaper, as root): becomes uid `U`, gid `G` and exactly the
//!   supplementary groups listed (none without `--groups`), with no capability
//!   ([`crate::as_user`]), then empties `PATH` (a path on the node, in the reaper's
//!   mount namespace) and writes its report on stdout ([`crate::wire`]).
//!
//! `--deadline S` (docs/CLEANUP.md#the-deadline) is when the cleanup stops itself and
//! reports, `S` whole seconds after the hook program started (the user's handler runs
//! inside that time) or after the sidecar's signal: the webhook renders the kubelet's
//! kill minus a margin for the report. An argv without it (a pod injected by a release
//! before it) parses as `None`: no deadline, the cleanup runs until it ends or is killed.
//!
//! Every value is its own argv entry, so no path or user text is ever parsed by a shell.
//! [`render`](HookArgs::render) writes options in one canonical order and
//! [`HookArgs::parse`] accepts exactly that order, so `parse(render(x)) == x` and the
//! webhook recognises its own hook by re-rendering what it parsed.

use std::fmt;

/// The subcommand of a preStop hook.
pub const HOOK: &str = "hook";
/// The subcommand of the cleanup sidecar.
pub const SIDECAR: &str = "sidecar";
/// The sidecar's flag for a pod the kubelet can restart in place ([`SidecarArgs::restartable`]).
pub const RESTARTABLE: &str = "--restartable";
/// The subcommand of the init container that copies the program into the pod.
pub const INSTALL: &str = "install";
/// The subcommand the node reaper runs to empty a gone pod's directory as its user.
pub const EMPTY: &str = "empty";
/// The file name the program is installed under.
pub const PROGRAM_NAME: &str = "prestop-clean";

/// What runs before the custom script and the cleanup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    Nothing,
    /// `--sleep N`: a former `preStop.sleep` action.
    Sleep(u64),
    /// `-- ARGV…`: the user's own exec handler, exact argv; its exit status wins.
    Exec(Vec<String>),
}

/// A custom preStop script (`prestop-injector.io/command`), run as `SHELL -c TEXT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub shell: String,
    pub text: String,
}

/// One directory to empty, with the identity it must have on the node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The path inside the container (absolute, normalized).
    pub path: String,
    /// `--host`: the host directory the webhook expects the path to show, in `$(VAR)`
    /// syntax (see the module docs). `None` only in argv of older releases: refused.
    pub host: Option<String>,
    /// `--whole-filesystem`: the operator allowed exactly this host path, so the
    /// target's mount may be the root of a whole filesystem.
    pub whole_filesystem: bool,
}

impl Target {
    /// A target without an expected identity: the shell forms of the hook and sidecar
    /// (which cannot check one), and argv of older releases.
    pub fn path_only(path: impl Into<String>) -> Target {
        Target {
            path: path.into(),
            host: None,
            whole_filesystem: false,
        }
    }

    /// A target with the host directory it must show.
    pub fn on_host(path: impl Into<String>, host: impl Into<String>) -> Target {
        Target {
            path: path.into(),
            host: Some(host.into()),
            whole_filesystem: false,
        }
    }
}

impl From<&str> for Target {
    fn from(path: &str) -> Target {
        Target::path_only(path)
    }
}

impl From<String> for Target {
    fn from(path: String) -> Target {
        Target::path_only(path)
    }
}

/// The arguments of `prestop-clean hook`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookArgs {
    /// `--deadline S`: seconds after the program's start at which the cleanup stops and
    /// reports; `None` in argv of older releases.
    pub deadline: Option<u64>,
    /// `--node-agent SOCKET`: the node agent's unix socket, as seen inside the container.
    pub node_agent: Option<String>,
    pub before: Before,
    pub targets: Vec<Target>,
    pub script: Option<Script>,
}

/// The arguments of `prestop-clean sidecar`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidecarArgs {
    /// `--deadline S`: seconds after SIGTERM at which the cleanup stops and reports.
    pub deadline: Option<u64>,
    /// `--node-agent SOCKET`: the node agent's unix socket, as seen inside the container.
    pub node_agent: Option<String>,
    /// `--restartable` (issue 31): the kubelet can restart the pod in place (its
    /// `restartPolicy` is not `Never`), so its SIGTERM may be a sandbox recreation's, not
    /// the pod's end: the targets are emptied only on the node agent's word that the pod
    /// is ending.
    pub restartable: bool,
    pub targets: Vec<Target>,
}

/// A command line that is not one [`HookArgs::render`] or [`SidecarArgs::render`] writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadArgs(pub String);

impl fmt::Display for BadArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArgs {}

fn bad(message: impl Into<String>) -> BadArgs {
    BadArgs(message.into())
}

impl HookArgs {
    /// The full argv, `program` first (the path of the program inside the container).
    pub fn render(&self, program: &str) -> Vec<String> {
        let mut argv = vec![program.to_owned(), HOOK.to_owned()];
        render_deadline(self.deadline, &mut argv);
        render_node_agent(self.node_agent.as_deref(), &mut argv);
        if let Before::Sleep(seconds) = &self.before {
            argv.push("--sleep".to_owned());
            argv.push(seconds.to_string());
        }
        render_targets(&self.targets, &mut argv);
        if let Some(script) = &self.script {
            argv.push("--shell".to_owned());
            argv.push(script.shell.clone());
            argv.push("--script".to_owned());
            argv.push(script.text.clone());
        }
        if let Before::Exec(user) = &self.before {
            argv.push("--".to_owned());
            argv.extend(user.iter().cloned());
        }
        argv
    }

    /// Parses the arguments after the program name; `args[0]` must be `hook`.
    pub fn parse(args: &[String]) -> Result<HookArgs, BadArgs> {
        let (first, mut rest) = args
            .split_first()
            .ok_or_else(|| bad("missing subcommand"))?;
        if first != HOOK {
            return Err(bad(format!("expected {HOOK:?}, got {first:?}")));
        }
        let (deadline, tail) = take_deadline(rest)?;
        rest = tail;
        let (node_agent, tail) = take_node_agent(rest);
        rest = tail;
        let mut before = Before::Nothing;
        if let [flag, seconds, tail @ ..] = rest {
            if flag == "--sleep" {
                before = Before::Sleep(parse_seconds("--sleep", seconds)?);
                rest = tail;
            }
        }
        let (targets, tail) = take_targets(rest);
        rest = tail;
        let mut script = None;
        if let [flag, shell, script_flag, text, tail @ ..] = rest {
            if flag == "--shell" && script_flag == "--script" {
                script = Some(Script {
                    shell: shell.clone(),
                    text: text.clone(),
                });
                rest = tail;
            }
        }
        match rest {
            [] => {}
            [separator, user @ ..] if separator == "--" => {
                if before != Before::Nothing {
                    return Err(bad("--sleep and a user command cannot both run"));
                }
                before = Before::Exec(user.to_vec());
            }
            [other, ..] => return Err(bad(format!("unexpected argument {other:?}"))),
        }
        Ok(HookArgs {
            deadline,
            node_agent,
            before,
            targets,
            script,
        })
    }
}

impl SidecarArgs {
    /// The full argv, `program` first.
    pub fn render(&self, program: &str) -> Vec<String> {
        let mut argv = vec![program.to_owned(), SIDECAR.to_owned()];
        render_deadline(self.deadline, &mut argv);
        render_node_agent(self.node_agent.as_deref(), &mut argv);
        if self.restartable {
            argv.push(RESTARTABLE.to_owned());
        }
        render_targets(&self.targets, &mut argv);
        argv
    }

    /// Parses the arguments after the program name; `args[0]` must be `sidecar`.
    pub fn parse(args: &[String]) -> Result<SidecarArgs, BadArgs> {
        let (first, rest) = args
            .split_first()
            .ok_or_else(|| bad("missing subcommand"))?;
        if first != SIDECAR {
            return Err(bad(format!("expected {SIDECAR:?}, got {first:?}")));
        }
        let (deadline, rest) = take_deadline(rest)?;
        let (node_agent, rest) = take_node_agent(rest);
        let (restartable, rest) = match rest {
            [flag, tail @ ..] if flag == RESTARTABLE => (true, tail),
            _ => (false, rest),
        };
        match take_targets(rest) {
            (targets, []) => Ok(SidecarArgs {
                deadline,
                node_agent,
                restartable,
                targets,
            }),
            (_, [other, ..]) => Err(bad(format!("unexpected argument {other:?}"))),
        }
    }
}

fn render_deadline(deadline: Option<u64>, argv: &mut Vec<String>) {
    if let Some(seconds) = deadline {
        argv.push("--deadline".to_owned());
        argv.push(seconds.to_string());
    }
}

/// A leading `--deadline S`, the first option [`render_deadline`] writes. Zero is
/// refused: the webhook leaves the option out when the grace period has no room for it.
fn take_deadline(rest: &[String]) -> Result<(Option<u64>, &[String]), BadArgs> {
    match rest {
        [flag, seconds, tail @ ..] if flag == "--deadline" => {
            match parse_seconds("--deadline", seconds)? {
                0 => Err(bad("--deadline must be at least 1 second")),
                seconds => Ok((Some(seconds), tail)),
            }
        }
        _ => Ok((None, rest)),
    }
}

fn render_node_agent(node_agent: Option<&str>, argv: &mut Vec<String>) {
    if let Some(socket) = node_agent {
        argv.push("--node-agent".to_owned());
        argv.push(socket.to_owned());
    }
}

/// A leading `--node-agent SOCKET`, the first option [`render_node_agent`] writes.
fn take_node_agent(rest: &[String]) -> (Option<String>, &[String]) {
    match rest {
        [flag, socket, tail @ ..] if flag == "--node-agent" => (Some(socket.clone()), tail),
        _ => (None, rest),
    }
}

fn render_targets(targets: &[Target], argv: &mut Vec<String>) {
    for target in targets {
        argv.push("--target".to_owned());
        argv.push(target.path.clone());
        if let Some(host) = &target.host {
            argv.push("--host".to_owned());
            argv.push(host.clone());
        }
        if target.whole_filesystem {
            argv.push("--whole-filesystem".to_owned());
        }
    }
}

/// Leading targets: `--target PATH`, each followed by its own optional `--host HOSTPATH`
/// and `--whole-filesystem`, in that order (the order [`render_targets`] writes).
fn take_targets(mut rest: &[String]) -> (Vec<Target>, &[String]) {
    let mut targets = Vec::new();
    while let [flag, path, tail @ ..] = rest {
        if flag != "--target" {
            break;
        }
        let mut target = Target::path_only(path.clone());
        rest = tail;
        if let [flag, host, tail @ ..] = rest {
            if flag == "--host" {
                target.host = Some(host.clone());
                rest = tail;
            }
        }
        if let [flag, tail @ ..] = rest {
            if flag == "--whole-filesystem" {
                target.whole_filesystem = true;
                rest = tail;
            }
        }
        targets.push(target);
    }
    (targets, rest)
}

/// Plain ASCII digits, as [`HookArgs::render`] writes them (no sign, no spaces).
fn parse_seconds(flag: &str, text: &str) -> Result<u64, BadArgs> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!("{flag} takes whole seconds, got {text:?}")));
    }
    text.parse()
        .map_err(|_| bad(format!("{flag} {text:?} is out of range")))
}

mod empty;
pub use empty::EmptyArgs;

#[cfg(test)]
mod tests;
