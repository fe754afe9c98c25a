//! `prestop-injector certs`: a CA and a serving certificate that openssl verifies, that
//! carry the Service's DNS names, whose keys only the owner reads, and that the server
//! serves to a client verifying `prestop-injector.prestop-system.svc`.

#[path = "support/deploy.rs"]
mod common;

use common::prestop_injector;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

fn certs(out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["certs", "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    prestop_injector(&args)
}

fn openssl() -> Option<PathBuf> {
    common::tool(
        "openssl",
        "version",
        "install the openssl command-line tool",
    )
}

fn run_openssl(openssl: &Path, args: &[&str], dir: &Path) -> Output {
    Command::new(openssl)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl")
}

#[test]
fn writes_a_verifiable_chain_with_the_service_names_and_private_keys() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = certs(&out, &[]);
    assert!(output.status.success(), "{output:?}");
    for (file, mode) in [
        ("ca.crt", 0o644),
        ("ca.key", 0o600),
        ("tls.crt", 0o644),
        ("tls.key", 0o600),
    ] {
        use std::os::unix::fs::PermissionsExt as _;
        let actual = std::fs::metadata(out.join(file))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(actual, mode, "{file} mode {actual:o}");
    }
    let Some(openssl) = openssl() else { return };
    let verify = run_openssl(&openssl, &["verify", "-CAfile", "ca.crt", "tls.crt"], &out);
    assert!(verify.status.success(), "openssl verify: {verify:?}");
    assert_eq!(
        String::from_utf8_lossy(&verify.stdout).trim(),
        "tls.crt: OK"
    );
    let san = run_openssl(
        &openssl,
        &["x509", "-noout", "-ext", "subjectAltName", "-in", "tls.crt"],
        &out,
    );
    let san = String::from_utf8_lossy(&san.stdout);
    let listed: Vec<&str> = san
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .collect();
    assert_eq!(
        listed,
        [
            "DNS:prestop-injector",
            "DNS:prestop-injector.prestop-system",
            "DNS:prestop-injector.prestop-system.svc",
            "DNS:prestop-injector.prestop-system.svc.cluster.local"
        ],
        "{san}"
    );
    // The CA is a CA, the serving certificate is for TLS servers.
    let text = run_openssl(
        &openssl,
        &["x509", "-noout", "-text", "-in", "tls.crt"],
        &out,
    );
    assert!(String::from_utf8_lossy(&text.stdout).contains("TLS Web Server Authentication"));
}

#[test]
fn service_namespace_and_days_are_honoured() {
    let Some(openssl) = openssl() else { return };
    let dir = tempfile::tempdir().unwrap();
    let args = ["--service", "hook", "--namespace", "infra", "--days", "10"];
    assert!(certs(dir.path(), &args).status.success());
    let san = run_openssl(
        &openssl,
        &["x509", "-noout", "-ext", "subjectAltName", "-in", "tls.crt"],
        dir.path(),
    );
    assert!(String::from_utf8_lossy(&san.stdout).contains("DNS:hook.infra.svc.cluster.local"));
    let valid_for = |days: u64| {
        let seconds = (days * 86_400).to_string();
        let args = ["x509", "-noout", "-checkend", &seconds, "-in", "tls.crt"];
        run_openssl(&openssl, &args, dir.path()).status.success()
    };
    assert!(valid_for(9), "valid for the 10 days asked");
    assert!(!valid_for(11), "not valid much longer than asked");
}

#[test]
fn refuses_to_overwrite_keys_unless_forced() {
    let dir = tempfile::tempdir().unwrap();
    assert!(certs(dir.path(), &[]).status.success());
    let key = std::fs::read(dir.path().join("tls.key")).unwrap();
    let again = certs(dir.path(), &[]);
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("--force") && stderr.contains("tls.key"),
        "{stderr}"
    );
    assert_eq!(std::fs::read(dir.path().join("tls.key")).unwrap(), key);

    assert!(certs(dir.path(), &["--force"]).status.success());
    assert_ne!(std::fs::read(dir.path().join("tls.key")).unwrap(), key);
}

#[test]
fn the_server_serves_the_certificate_to_a_verifying_client() {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, ServerName};

    let dir = tempfile::tempdir().unwrap();
    assert!(certs(dir.path(), &[]).status.success());
    let server = common::start_server(&[
        format!("--tls-cert={}", dir.path().join("tls.crt").display()),
        format!("--tls-key={}", dir.path().join("tls.key").display()),
    ]);

    let mut roots = rustls::RootCertStore::empty();
    let ca = CertificateDer::from_pem_file(dir.path().join("ca.crt")).unwrap();
    roots.add(ca).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("prestop-injector.prestop-system.svc").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let socket = TcpStream::connect(("127.0.0.1", server.listen)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut tls = rustls::StreamOwned::new(connection, socket);
    // An empty review: the handshake (verified against our CA and name) must succeed,
    // and the server must answer in HTTP (docs/DESIGN.md#server: a malformed body is a 400).
    tls.write_all(
        b"POST /mutate HTTP/1.1\r\nHost: prestop-injector.prestop-system.svc\r\n\
          Content-Type: application/json\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .expect("TLS handshake with a client that verifies the service name");
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 400"), "{response}");
}
