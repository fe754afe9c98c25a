//! `prestop-injector certs`: writes a CA and a serving certificate for the webhook's
//! Service, for installs without cert-manager.

use crate::certs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// Name of the webhook's Service.
    #[arg(long, default_value = "prestop-injector")]
    pub service: String,
    /// Namespace of the webhook's Service.
    #[arg(long, default_value = "prestop-system")]
    pub namespace: String,
    /// Directory for ca.crt, ca.key, tls.crt and tls.key (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Validity of both certificates, in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub days: u32,
    /// Replace existing key files (the old certificates stop being trusted).
    #[arg(long)]
    pub force: bool,
}

const FILES: [&str; 4] = ["ca.crt", "ca.key", "tls.crt", "tls.key"];

pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    if !args.force {
        let existing: Vec<&str> = FILES
            .into_iter()
            .filter(|file| args.out.join(file).exists())
            .collect();
        if !existing.is_empty() {
            anyhow::bail!(
                "{} already holds {}: keeping them (the cluster may trust this CA); pass --force to replace them",
                args.out.display(),
                existing.join(", ")
            );
        }
    }
    let dns_names = certs::service_dns_names(&args.service, &args.namespace);
    let bundle = certs::generate(&dns_names, &[], args.days)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", args.out.display()))?;
    write(&args.out.join("ca.crt"), &bundle.ca_cert_pem, 0o644)?;
    write(&args.out.join("ca.key"), &bundle.ca_key_pem, 0o600)?;
    write(&args.out.join("tls.crt"), &bundle.cert_pem, 0o644)?;
    write(&args.out.join("tls.key"), &bundle.key_pem, 0o600)?;
    eprintln!(
        "wrote ca.crt, ca.key, tls.crt, tls.key to {} for {} (valid {} days)",
        args.out.display(),
        dns_names.join(", "),
        args.days
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to `path` with `mode`, never leaving a key readable by others, even
/// briefly: the file is created with the mode rather than chmod-ed afterwards.
fn write(path: &Path, text: &str, mode: u32) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
        options.mode(mode);
        let mut file = options
            .open(path)
            .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
        // An existing file (--force) keeps its old mode: set it explicitly.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        file.write_all(text.as_bytes())?;
    }
    #[cfg(not(unix))]
    {
        let _ = mode;
        let mut file = options
            .open(path)
            .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
        file.write_all(text.as_bytes())?;
    }
    Ok(())
}
