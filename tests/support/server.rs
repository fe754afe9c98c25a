//! Shared helpers for the server tests: certificates, an in-process server, and TLS
//! clients (HTTP/1.1 and HTTP/2) that verify the CA and the Service hostname while
//! connecting to 127.0.0.1.
#![allow(dead_code)]

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::{http1, http2};
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use prestop_injector::server::{Server, Settings, TlsSource};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// The name the API server uses; the tests resolve it to 127.0.0.1 themselves.
pub const HOST: &str = "prestop-injector.prestop-system.svc";

#[derive(Clone)]
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn new() -> Pki {
        let bundle = prestop_injector::certs::generate(
            &prestop_injector::certs::service_dns_names("prestop-injector", "prestop-system"),
            &["127.0.0.1".parse().unwrap()],
            1,
        )
        .unwrap();
        Pki {
            ca_pem: bundle.ca_cert_pem,
            cert_pem: bundle.cert_pem,
            key_pem: bundle.key_pem,
        }
    }

    pub fn source(&self) -> TlsSource {
        TlsSource::Pem {
            cert: self.cert_pem.clone(),
            key: self.key_pem.clone(),
        }
    }

    pub fn leaf_der(&self) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(self.cert_pem.as_bytes()).unwrap()
    }
}

pub async fn start(settings: Settings, pki: &Pki) -> Server {
    Server::bind(settings, pki.source()).await.unwrap()
}

/// A client configuration trusting every CA in `cas`, offering `alpn`.
pub fn client_config(cas: &[&str], alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        roots
            .add(CertificateDer::from_pem_slice(ca.as_bytes()).unwrap())
            .unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// TCP to `addr`, TLS verified against the CA(s) for the Service hostname.
pub async fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    TlsConnector::from(config)
        .connect(ServerName::try_from(HOST).unwrap(), tcp)
        .await
}

pub type H1 = http1::SendRequest<Full<Bytes>>;
pub type H2 = http2::SendRequest<Full<Bytes>>;

/// An HTTP/1.1 connection; the handle finishes when the server closes it.
pub async fn h1(addr: SocketAddr, ca: &str) -> (H1, JoinHandle<hyper::Result<()>>) {
    let tls = tls_connect(addr, client_config(&[ca], &[b"http/1.1"]))
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (sender, conn) = http1::handshake(TokioIo::new(tls)).await.unwrap();
    (sender, tokio::spawn(conn))
}

/// An HTTP/2 connection; the handle finishes when the server closes it (e.g. GOAWAY).
pub async fn h2(addr: SocketAddr, ca: &str) -> (H2, JoinHandle<hyper::Result<()>>) {
    let tls = tls_connect(addr, client_config(&[ca], &[b"h2"]))
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (sender, conn) = http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
        .await
        .unwrap();
    (sender, tokio::spawn(conn))
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub fn post_request(path: &str, body: impl Into<Bytes>) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("host", HOST)
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap()
}

pub async fn send_h1(sender: &mut H1, request: Request<Full<Bytes>>) -> hyper::Result<Answer> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    collect(response).await
}

pub async fn send_h2(sender: &mut H2, request: Request<Full<Bytes>>) -> hyper::Result<Answer> {
    sender.ready().await?;
    let response = sender.send_request(request).await?;
    collect(response).await
}

async fn collect(response: hyper::Response<hyper::body::Incoming>) -> hyper::Result<Answer> {
    let (parts, body) = response.into_parts();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await?.to_bytes(),
    })
}

/// A minimal `Pod` CREATE review: enough for the transport, independent of mutation rules.
pub fn review(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "p",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }
    }))
    .unwrap()
}

/// Plain-HTTP GET (the probe port): status and body.
pub async fn get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = http1::handshake::<_, Full<Bytes>>(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = Request::get(path)
        .header("host", "probe")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let answer = send_h1(&mut sender, request).await.unwrap();
    (answer.status, answer.text())
}

/// Polls `check` until it returns `Some`, failing the test after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Parses OpenMetrics/Prometheus text into (series, value) pairs, panicking on any line
/// that is neither a comment nor `name{labels} value`.
pub fn parse_metrics(text: &str) -> Vec<(String, f64)> {
    let mut samples = Vec::new();
    assert!(text.trim_end().ends_with("# EOF"), "missing # EOF");
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect(line);
        let name_end = series.find('{').unwrap_or(series.len());
        let name = &series[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        if name_end < series.len() {
            assert!(series.ends_with('}'), "bad labels in {line:?}");
        }
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        samples.push((series.to_owned(), value));
    }
    samples
}

/// The value of the sample whose series text is exactly `series`, 0 when absent.
pub fn sample(samples: &[(String, f64)], series: &str) -> f64 {
    samples
        .iter()
        .find(|(s, _)| s == series)
        .map_or(0.0, |(_, v)| *v)
}
