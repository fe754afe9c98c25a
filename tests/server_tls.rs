//! The server over real sockets: TLS with the Service hostname, HTTP/1.1 and HTTP/2,
//! time limits, idle connections, maximum connection age and the metrics port.

use prestop_injector::server::Settings;
use std::time::{Duration, Instant};
use support::{post_request, review, send_h1, send_h2, Pki};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[path = "support/server.rs"]
mod support;

const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_and_http2_answer_reviews_over_verified_tls() {
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;

    let (mut h1, _) = support::h1(server.addr(), &pki.ca_pem).await;
    for uid in ["a", "b"] {
        // Twice on one connection: keep-alive works.
        let answer = send_h1(&mut h1, post_request("/mutate?timeout=10s", review(uid)))
            .await
            .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.json()["response"]["uid"], uid);
        assert!(answer.headers.get("connection").is_none());
    }

    let (mut h2, _) = support::h2(server.addr(), &pki.ca_pem).await;
    let answer = send_h2(&mut h2, post_request("/validate", review("c")))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(answer.json()["response"]["uid"], "c");

    // A client that expects another name refuses the certificate.
    let tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let wrong = tokio_rustls::TlsConnector::from(support::client_config(&[&pki.ca_pem], &[]))
        .connect("other.example".try_into().unwrap(), tcp)
        .await;
    assert!(wrong.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_2_clients_are_served_too() {
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::pem::PemObject::from_pem_slice(pki.ca_pem.as_bytes()).unwrap();
    roots.add(ca).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tls = support::tls_connect(server.addr(), std::sync::Arc::new(config))
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_rows_over_a_real_socket() {
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;
    let (mut h1, _) = support::h1(server.addr(), &pki.ca_pem).await;
    let answer = send_h1(&mut h1, post_request("/mutate", "{oops"))
        .await
        .unwrap();
    assert_eq!(answer.status, 400);
    assert!(answer.text().contains("not a valid AdmissionReview"));

    let (mut h2, _) = support::h2(server.addr(), &pki.ca_pem).await;
    let mut request = post_request("/mutate", review("u"));
    request
        .headers_mut()
        .insert("content-type", "text/yaml".parse().unwrap());
    assert_eq!(send_h2(&mut h2, request).await.unwrap().status, 415);

    // 413 comes back on the headers alone: the 32 MiB body is never sent.
    let config = support::client_config(&[&pki.ca_pem], &[b"http/1.1"]);
    let mut tls = support::tls_connect(server.addr(), config).await.unwrap();
    tls.write_all(
        b"POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 33554432\r\n\r\n{",
    )
    .await
    .unwrap();
    let head = read_head(&mut tls).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
}

async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let read = tokio::time::timeout(LIMIT, stream.read(&mut byte))
            .await
            .expect("no response head in time")
            .unwrap();
        assert_eq!(read, 1, "closed before a response head: {head:?}");
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_stop_a_real_request() {
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;
    let config = support::client_config(&[&pki.ca_pem], &[b"http/1.1"]);
    let mut idle = Vec::new();
    for _ in 0..64 {
        idle.push(
            support::tls_connect(server.addr(), config.clone())
                .await
                .unwrap(),
        );
    }
    // And a few that never even start TLS.
    let mut silent = Vec::new();
    for _ in 0..8 {
        silent.push(tokio::net::TcpStream::connect(server.addr()).await.unwrap());
    }
    let (mut h1, _) = support::h1(server.addr(), &pki.ca_pem).await;
    let answer = tokio::time::timeout(
        LIMIT,
        send_h1(&mut h1, post_request("/mutate", review("x"))),
    )
    .await
    .expect("request starved by idle connections")
    .unwrap();
    assert_eq!(answer.status, 200);
    drop((idle, silent));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_wait_until_one_closes() {
    let pki = Pki::new();
    let settings = Settings {
        max_connections: 2,
        ..Settings::default()
    };
    let server = support::start(settings, &pki).await;
    let config = support::client_config(&[&pki.ca_pem], &[b"http/1.1"]);
    let first = support::tls_connect(server.addr(), config.clone())
        .await
        .unwrap();
    let _second = support::tls_connect(server.addr(), config.clone())
        .await
        .unwrap();
    let mut third = tokio::spawn(support::tls_connect(server.addr(), config));
    // Bounded wait for a non-event: the third handshake must not complete at the cap.
    assert!(tokio::time::timeout(Duration::from_millis(300), &mut third)
        .await
        .is_err());
    drop(first);
    let third = tokio::time::timeout(LIMIT, third)
        .await
        .expect("a freed slot was never reused")
        .unwrap();
    assert!(third.is_ok());
}

fn short_timeouts() -> Settings {
    Settings {
        header_timeout: Duration::from_millis(300),
        ..Settings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_half_a_header_is_cut_off() {
    let pki = Pki::new();
    let server = support::start(short_timeouts(), &pki).await;
    let config = support::client_config(&[&pki.ca_pem], &[b"http/1.1"]);
    let mut tls = support::tls_connect(server.addr(), config).await.unwrap();
    tls.write_all(b"POST /mutate HTTP/1.1\r\nhost: x\r\ncontent-ty")
        .await
        .unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(LIMIT, tls.read_to_end(&mut rest))
        .await
        .expect("half-sent request was never cut off");
    // Closed without an answer (EOF, or a reset that rustls reports as an error).
    assert!(read.is_err() || rest.is_empty(), "{rest:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));

    // A TCP client that never starts the TLS handshake is cut off as well.
    let mut tcp = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let mut buffer = [0u8; 16];
    let read = tokio::time::timeout(LIMIT, tcp.read(&mut buffer))
        .await
        .expect("silent TCP client was never cut off");
    assert!(matches!(read, Ok(0) | Err(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_outlives_the_header_timeout() {
    let pki = Pki::new();
    let server = support::start(short_timeouts(), &pki).await;
    let (mut h1, conn) = support::h1(server.addr(), &pki.ca_pem).await;
    let answer = send_h1(&mut h1, post_request("/mutate", review("1")))
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    // Three header timeouts of idleness must not close it (bounded wait for a non-event).
    let mut conn = conn;
    assert!(tokio::time::timeout(Duration::from_millis(900), &mut conn)
        .await
        .is_err());
    let answer = send_h1(&mut h1, post_request("/mutate", review("2")))
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout() {
    let pki = Pki::new();
    let settings = Settings {
        idle_timeout: Duration::from_millis(200),
        ..Settings::default()
    };
    let server = support::start(settings, &pki).await;
    let (mut h1, conn) = support::h1(server.addr(), &pki.ca_pem).await;
    assert_eq!(
        send_h1(&mut h1, post_request("/mutate", review("1")))
            .await
            .unwrap()
            .status,
        200
    );
    tokio::time::timeout(LIMIT, conn)
        .await
        .expect("idle connection never closed")
        .unwrap()
        .unwrap();
}

fn short_age() -> Settings {
    Settings {
        max_connection_age: Duration::from_millis(200),
        ..Settings::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_http1_connection_gets_connection_close() {
    let pki = Pki::new();
    let server = support::start(short_age(), &pki).await;
    let (mut h1, conn) = support::h1(server.addr(), &pki.ca_pem).await;
    let deadline = Instant::now() + LIMIT;
    loop {
        let answer = send_h1(&mut h1, post_request("/mutate", review("old")))
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
        if answer
            .headers
            .get("connection")
            .is_some_and(|v| v == "close")
        {
            break;
        }
        assert!(Instant::now() < deadline, "never got Connection: close");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // hyper closes the connection after writing that response.
    tokio::time::timeout(LIMIT, conn)
        .await
        .expect("old connection stayed open")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_http2_connection_gets_goaway() {
    let pki = Pki::new();
    let server = support::start(short_age(), &pki).await;
    let (mut h2, conn) = support::h2(server.addr(), &pki.ca_pem).await;
    let answer = send_h2(&mut h2, post_request("/mutate", review("h2")))
        .await
        .unwrap();
    assert_eq!(answer.status, 200);
    // GOAWAY, then the server closes: the client's connection task ends cleanly.
    tokio::time::timeout(LIMIT, conn)
        .await
        .expect("old HTTP/2 connection was never sent GOAWAY")
        .unwrap()
        .unwrap();
    assert!(send_h2(&mut h2, post_request("/mutate", review("late")))
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_port_counts_what_happened() {
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;
    let probe = server.probe_addr();
    assert_eq!(support::get(probe, "/healthz").await.0, 200);
    assert_eq!(support::get(probe, "/readyz").await.0, 200);

    let scrape = || async move {
        let (status, text) = support::get(probe, "/metrics").await;
        assert_eq!(status, 200);
        support::parse_metrics(&text)
    };
    let series = r#"prestop_injector_requests_total{endpoint="mutate_auto",kind="Pod",operation="CREATE",outcome="unchanged"}"#;
    let before = support::sample(&scrape().await, series);
    let (mut h1, _) = support::h1(server.addr(), &pki.ca_pem).await;
    for uid in ["1", "2", "3"] {
        let answer = send_h1(&mut h1, post_request("/mutate/auto", review(uid)))
            .await
            .unwrap();
        assert_eq!(answer.status, 200);
    }
    let after = scrape().await;
    assert_eq!(support::sample(&after, series) - before, 3.0);
    assert!(support::sample(&after, "prestop_injector_open_connections") >= 1.0);
    let expiry = support::sample(&after, "prestop_injector_tls_cert_expiry_timestamp_seconds");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(expiry > now && expiry < now + 2.0 * 86400.0, "{expiry}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_server_stops_accepting() {
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;
    let (addr, probe) = (server.addr(), server.probe_addr());
    drop(server);
    support::eventually(LIMIT, "both listeners to close", || async {
        let tls = tokio::net::TcpStream::connect(addr).await.is_err();
        let plain = tokio::net::TcpStream::connect(probe).await.is_err();
        (tls && plain).then_some(())
    })
    .await;
}
