//! `prestop-injector webhook-config`: prints the MutatingWebhookConfiguration and the
//! ValidatingWebhookConfiguration with the caBundle filled in, for installs without
//! cert-manager (`kubectl apply -f -`).

use crate::kube_version::KubeVersion;
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
    /// Reach the webhook at this URL instead of the Service, e.g. a webhook outside the
    /// cluster: `https://HOST:PORT`; each webhook's path is appended. HOST must be a name
    /// in the serving certificate.
    #[arg(long, value_name = "https://HOST:PORT", value_parser = parse_url, conflicts_with = "service")]
    pub url: Option<String>,
    /// Kubernetes version of the cluster (e.g. 1.27): leaves out what it does not know
    /// (matchConditions need 1.28). Default: the newest.
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<KubeVersion>,
}

/// `https://HOST[:PORT]` with no path, query or fragment: the API server appends nothing
/// itself, and a webhook URL must use https.
fn parse_url(text: &str) -> Result<String, String> {
    let authority = text
        .strip_prefix("https://")
        .ok_or_else(|| format!("{text:?}: the webhook URL must start with https://"))?
        .trim_end_matches('/');
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) {
        return Err(format!(
            "{text:?}: give only https://HOST:PORT; the paths /mutate, /mutate/auto and /validate are appended"
        ));
    }
    Ok(format!("https://{authority}"))
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
    let endpoint = match &args.url {
        Some(url) => rules::Endpoint::Url(url),
        None => rules::Endpoint::Service {
            name: &args.service,
            namespace: &args.namespace,
        },
    };
    let mut documents =
        rules::configurations_for(args.mode, endpoint, &args.namespace, Some(&ca_bundle));
    if let Some(version) = args.kubernetes_version {
        rules::for_version(&mut documents, version);
        if !version.has(crate::kube_version::NAMESPACE_NAME_LABEL) {
            eprintln!(
                "prestop-injector: note: Kubernetes {version} does not label namespaces with \
                 kubernetes.io/metadata.name (1.21+), so the system namespaces are not kept out \
                 until you label them: kubectl label namespace kube-system \
                 kubernetes.io/metadata.name=kube-system (likewise kube-public, kube-node-lease, {})",
                args.namespace
            );
        }
    }
    let mut out = String::new();
    for document in documents {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&document)?);
    }
    Ok(out)
}
