use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CertsArgs {}

pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    anyhow::bail!("not implemented yet")
}
