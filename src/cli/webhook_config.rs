//! `prestop-injector webhook-config`: prints the MutatingWebhookConfiguration and the
//! ValidatingWebhookConfiguration with the caBundle filled in, for installs without
//! cert-manager (`kubectl apply -f -`).

use base64::Engine as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[path = "webhook_rules.rs"]
pub mod rules;

pub use rules::Mode;

#[derive(Debug, clap::Args)]
pub struct WebhookConfigArgs {
    /// PEM file of the CA that signed the serving certificate (`ca.crt` from `certs`).
    #[arg(long, value_name = "FILE")]
    pub ca_file: PathBuf,
    /// Which objects reach the webhook.
    #[arg(long, value_enum, default_value = "cluster-wide")]
    pub mode: Mode,
    /// Name of the webhook's Service.
    #[arg(long, default_value = "prestop-injector")]
    pub service: String,
    /// Namespace of the webhook's Service (also excluded from the webhooks).
    #[arg(long, default_value = "prestop-system")]
    pub namespace: String,
}

pub fn run(args: WebhookConfigArgs) -> anyhow::Result<ExitCode> {
    let yaml = render(&args)?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The multi-document YAML that `run` prints.
pub fn render(args: &WebhookConfigArgs) -> anyhow::Result<String> {
    let pem = std::fs::read_to_string(&args.ca_file).map_err(|error| {
        anyhow::anyhow!(
            "cannot read the CA file {}: {error} (write one with `prestop-injector certs --out DIR`, then pass --ca-file DIR/ca.crt)",
            args.ca_file.display()
        )
    })?;
    if !pem.contains("-----BEGIN CERTIFICATE-----") {
        anyhow::bail!(
            "{} holds no PEM certificate: pass the CA certificate (ca.crt), not a key or the serving certificate's key",
            args.ca_file.display()
        );
    }
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
    let mut out = String::new();
    for document in
        rules::configurations(args.mode, &args.service, &args.namespace, Some(&ca_bundle))
    {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&document)?);
    }
    Ok(out)
}
