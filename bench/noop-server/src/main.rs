//! A TLS server that does nothing: it reads each POST's body and answers a fixed 200 JSON.
//! `bench/side-by-side.sh` runs it beside `prestop-injector serve` as the ceiling of the
//! transport (TCP, rustls, hyper HTTP/1.1 keep-alive, tokio) on one core.
//!
//! Usage: noop-server LISTEN_ADDR CERT_PEM KEY_PEM [ANSWER_FILE]
//!
//! With ANSWER_FILE it answers those bytes instead (say, prestop-injector's own patched
//! answer to the seed review): the transport's ceiling for an answer of that size, with
//! no work behind it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

// As in prestop-injector: the allocator is part of what a request costs.
#[global_allocator]
static GLOBAL: prestop_alloc::Allocator = prestop_alloc::Allocator;

/// An allowed AdmissionReview without a patch: small and valid, so a client that checks
/// the answer sees a well-formed one.
const ANSWER: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}"#;

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, cert, key, answer) = match args.as_slice() {
        [listen, cert, key] => (listen, cert, key, Bytes::from_static(ANSWER)),
        [listen, cert, key, file] => (listen, cert, key, Bytes::from(std::fs::read(file)?)),
        _ => return Err("usage: noop-server LISTEN_ADDR CERT_PEM KEY_PEM [ANSWER_FILE]".into()),
    };
    let addr: SocketAddr = listen.parse()?;
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));

    // The runtime prestop-injector picks: current-thread on one CPU (as under `taskset -c 0`),
    // otherwise one worker per CPU.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runtime = if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    runtime.block_on(serve(addr, acceptor, answer))
}

async fn serve(addr: SocketAddr, acceptor: TlsAcceptor, answer: Bytes) -> Result<(), Error> {
    let listener = TcpListener::bind(addr).await?;
    loop {
        let (stream, _) = listener.accept().await?;
        stream.set_nodelay(true)?;
        let acceptor = acceptor.clone();
        let answer = answer.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .keep_alive(true)
                // As prestop-injector: one TLS record per response, not head and body apart.
                .writev(false)
                .serve_connection(
                    TokioIo::new(tls),
                    hyper::service::service_fn(|request| respond(request, answer.clone())),
                )
                .await;
        });
    }
}

/// Reads the whole body (every real webhook must) and answers the fixed bytes.
async fn respond(
    request: Request<Incoming>,
    answer: Bytes,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let _ = request.into_body().collect().await;
    let mut response = Response::new(Full::new(answer));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}
