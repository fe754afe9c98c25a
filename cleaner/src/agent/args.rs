//! `prestop-clean node-agent --host-root DIR --socket PATH [--allow PREFIX]...
//! [--metrics-listen ADDR:PORT]`.

use crate::report::escape;

/// The arguments of `prestop-clean node-agent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentArgs {
    pub host_root: String,
    pub socket: String,
    /// Normalized ([`crate::host_path::normalize`], as the webhook reads its config).
    pub allow: Vec<String>,
    /// Plain HTTP for `/metrics`, `/healthz` and `/readyz`.
    pub metrics_listen: Option<String>,
}

impl AgentArgs {
    /// Parses the arguments after `node-agent`, options in any order, `--allow` repeated.
    pub fn parse(mut args: &[String]) -> Result<AgentArgs, String> {
        let (mut host_root, mut socket, mut allow, mut metrics_listen) =
            (None, None, Vec::new(), None);
        while let [flag, value, rest @ ..] = args {
            match flag.as_str() {
                "--host-root" if host_root.is_none() => host_root = Some(value.clone()),
                "--socket" if socket.is_none() => socket = Some(value.clone()),
                "--metrics-listen" if metrics_listen.is_none() => {
                    metrics_listen = Some(value.clone())
                }
                "--allow" => match crate::host_path::normalize(value) {
                    Some(prefix) => allow.push(prefix),
                    None => {
                        return Err(format!(
                            "--allow {} is not an absolute path without .. or control \
                             characters",
                            escape(value.as_bytes())
                        ))
                    }
                },
                _ => return Err(format!("unexpected argument {flag:?}")),
            }
            args = rest;
        }
        if let [extra, ..] = args {
            return Err(format!("unexpected argument {extra:?}"));
        }
        Ok(AgentArgs {
            host_root: host_root.ok_or("--host-root DIR is required")?,
            socket: socket.ok_or("--socket PATH is required")?,
            allow,
            metrics_listen,
        })
    }
}
