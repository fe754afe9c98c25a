use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct MutateArgs {}

pub fn run(args: MutateArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    anyhow::bail!("not implemented yet")
}
