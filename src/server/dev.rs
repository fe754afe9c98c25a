//! `serve --dev`: a throwaway CA and serving certificate, generated in memory at start.

use super::serve::TlsSource;
use crate::certs;
use anyhow::Context as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// The Service the manifests install, so that a port-forward or an in-cluster test can
/// use the dev certificate too.
const SERVICE: &str = "prestop-injector";
const NAMESPACE: &str = "prestop-system";

/// Generates the pair, writes the CA to `ca_path`, and prints how to call the server.
pub fn tls(ca_path: &Path, listen: SocketAddr) -> anyhow::Result<TlsSource> {
    let mut names = vec!["localhost".to_owned()];
    names.extend(certs::service_dns_names(SERVICE, NAMESPACE));
    let ips = [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ];
    let bundle = certs::generate(&names, &ips, 30).context("cannot generate dev certificate")?;
    std::fs::write(ca_path, &bundle.ca_cert_pem)
        .with_context(|| format!("cannot write the dev CA to {}", ca_path.display()))?;
    let port = listen.port();
    println!(
        "prestop-injector --dev: self-signed CA written to {}",
        ca_path.display()
    );
    println!("try:");
    println!(
        "  curl --cacert {} -H 'Content-Type: application/json' --data @examples/review-job-worker.json https://localhost:{port}/mutate",
        ca_path.display()
    );
    Ok(TlsSource::Pem {
        cert: bundle.cert_pem,
        key: bundle.key_pem,
    })
}
