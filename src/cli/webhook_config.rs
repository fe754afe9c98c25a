use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct WebhookConfigArgs {}

pub fn run(args: WebhookConfigArgs) -> anyhow::Result<ExitCode> {
    let _ = args;
    anyhow::bail!("not implemented yet")
}
