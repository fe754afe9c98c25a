//! The HTTPS admission server: a thin adapter over [`crate::admission::review`].
//!
//! OWNER: server helper.

use std::process::ExitCode;

/// Flags of `prestop-injector serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    anyhow::bail!("serve is not implemented yet")
}
