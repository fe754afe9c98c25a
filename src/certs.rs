//! Certificates for the webhook: a CA and a serving certificate signed by it.
//! Used by `serve --dev` (in memory) and by the `certs` command (written to files).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use std::net::IpAddr;

/// PEM texts of a CA and of a serving certificate it signed.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// The DNS names the API server may use to reach `service` in `namespace`.
pub fn service_dns_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Generates a fresh CA and a serving certificate for `dns_names` and `ips`, valid `days`.
pub fn generate(dns_names: &[String], ips: &[IpAddr], days: u32) -> anyhow::Result<Bundle> {
    let now = time::OffsetDateTime::now_utc();
    // Backdate a little so that a node with a slightly slow clock accepts the cert at once.
    let not_before = now - time::Duration::minutes(5);
    let not_after = now + time::Duration::days(i64::from(days.max(1)));

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = name("prestop-injector CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_cert = ca_params.self_signed(&ca_key)?;

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = name(
        dns_names
            .first()
            .map(String::as_str)
            .unwrap_or("prestop-injector"),
    );
    params.subject_alt_names = dns_names
        .iter()
        .map(|dns| Ok(SanType::DnsName(dns.clone().try_into()?)))
        .chain(ips.iter().map(|ip| Ok(SanType::IpAddress(*ip))))
        .collect::<Result<_, rcgen::Error>>()?;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params.signed_by(&key, &ca_cert, &ca_key)?;

    Ok(Bundle {
        ca_cert_pem: ca_cert.pem(),
        ca_key_pem: ca_key.serialize_pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_cover_every_form_the_api_server_uses() {
        assert_eq!(
            service_dns_names("hook", "ns"),
            [
                "hook",
                "hook.ns",
                "hook.ns.svc",
                "hook.ns.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn generates_pem_pairs() {
        let bundle = generate(
            &service_dns_names("hook", "ns"),
            &["127.0.0.1".parse().unwrap()],
            1,
        )
        .unwrap();
        assert!(bundle
            .ca_cert_pem
            .starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(bundle.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(bundle.key_pem.contains("PRIVATE KEY"));
        assert_ne!(bundle.ca_cert_pem, bundle.cert_pem);
    }
}
