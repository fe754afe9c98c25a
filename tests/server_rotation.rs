//! Certificate rotation the way Kubernetes updates a Secret volume: a new timestamped
//! directory and an atomic rename of the `..data` symlink, while a client keeps posting.

use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use prestop_injector::server::tls::CertFiles;
use prestop_injector::server::{Server, Settings, TlsSource};
use rustls::pki_types::CertificateDer;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{post_request, review, send_h1, Pki};

#[path = "support/server.rs"]
mod support;

const POLL: Duration = Duration::from_secs(2);

/// Writes `..<version>/tls.{crt,key}` and points `..data` at it atomically.
fn publish(dir: &Path, version: &str, cert_pem: &str, key_pem: &str) {
    let target = dir.join(format!("..{version}"));
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("tls.crt"), cert_pem).unwrap();
    std::fs::write(target.join("tls.key"), key_pem).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

fn secret_volume(dir: &Path, pki: &Pki) -> CertFiles {
    publish(dir, "v1", &pki.cert_pem, &pki.key_pem);
    for file in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).unwrap();
    }
    CertFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    }
}

/// The leaf certificate a full handshake gets (a fresh client config, so no session
/// resumption hands back the certificate of an earlier session).
async fn served(server: &Server, cas: &[&str]) -> CertificateDer<'static> {
    let config = support::client_config(cas, &[b"http/1.1"]);
    let tls = support::tls_connect(server.addr(), config).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].clone()
}

fn reloads(server: &Server, result: &str) -> f64 {
    let samples = support::parse_metrics(&server.state().metrics.encode());
    support::sample(
        &samples,
        &format!(r#"prestop_injector_tls_reloads_total{{result="{result}"}}"#),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_style_rotation_fails_no_request_and_ignores_a_mismatched_pair() {
    let (old, new, stranger) = (Pki::new(), Pki::new(), Pki::new());
    let dir = tempfile::tempdir().unwrap();
    let files = secret_volume(dir.path(), &old);
    let settings = Settings {
        cert_poll_interval: POLL,
        ..Settings::default()
    };
    let server = Arc::new(
        Server::bind(settings, TlsSource::Files(files))
            .await
            .unwrap(),
    );
    // Clients trust both CAs, as the caBundle does during a real rotation.
    let trust_both = support::client_config(&[&old.ca_pem, &new.ca_pem], &[b"http/1.1"]);
    assert_eq!(
        served(&server, &[&old.ca_pem, &new.ca_pem]).await,
        old.leaf_der()
    );

    // Load: new connections (each one a handshake with the current certificate) plus
    // one long-lived keep-alive connection.
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let load = {
        let (server, config) = (server.clone(), trust_both.clone());
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        let keep_alive_ca = old.ca_pem.clone();
        tokio::spawn(async move {
            let (mut kept, _) = support::h1(server.addr(), &keep_alive_ca).await;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let fresh = async {
                    let tls = support::tls_connect(server.addr(), config.clone())
                        .await
                        .ok()?;
                    let (mut sender, conn) = http1::handshake(TokioIo::new(tls)).await.ok()?;
                    tokio::spawn(conn);
                    send_h1(
                        &mut sender,
                        post_request("/mutate", review(&format!("n{i}"))),
                    )
                    .await
                    .ok()
                };
                let kept_answer =
                    send_h1(&mut kept, post_request("/mutate", review(&format!("k{i}")))).await;
                for answer in [fresh.await, kept_answer.ok()] {
                    match answer {
                        Some(answer) if answer.status == 200 => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }
        })
    };
    support::eventually(Duration::from_secs(10), "load to start", || async {
        (ok.load(Ordering::Relaxed) >= 10).then_some(())
    })
    .await;

    publish(dir.path(), "v2", &new.cert_pem, &new.key_pem);
    let swapped = Instant::now();
    support::eventually(POLL * 3, "the new certificate", || async {
        (served(&server, &[&old.ca_pem, &new.ca_pem]).await == new.leaf_der()).then_some(())
    })
    .await;
    assert!(
        swapped.elapsed() <= POLL,
        "new certificate served after {:?}, poll interval {POLL:?}",
        swapped.elapsed()
    );
    assert_eq!(reloads(&server, "success"), 1.0);

    // A certificate with someone else's key: rejected, counted, the current one kept.
    publish(dir.path(), "v3", &stranger.cert_pem, &new.key_pem);
    support::eventually(POLL * 3, "the bad pair to be rejected", || async {
        (reloads(&server, "error") >= 1.0).then_some(())
    })
    .await;
    assert_eq!(
        served(&server, &[&old.ca_pem, &new.ca_pem]).await,
        new.leaf_der()
    );
    assert_eq!(reloads(&server, "success"), 1.0);

    let before_stop = ok.load(Ordering::Relaxed);
    support::eventually(
        Duration::from_secs(10),
        "more load after the swaps",
        || async { (ok.load(Ordering::Relaxed) >= before_stop + 10).then_some(()) },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "requests failed during rotation"
    );
    assert!(ok.load(Ordering::Relaxed) >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_pair_at_start_is_a_clear_error() {
    let (one, two) = (Pki::new(), Pki::new());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &one.cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &two.key_pem).unwrap();
    let files = CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let error = Server::bind(Settings::default(), TlsSource::Files(files.clone()))
        .await
        .err()
        .expect("mismatched pair accepted");
    let message = format!("{error:#}");
    assert!(message.contains("does not match"), "{message}");

    std::fs::remove_file(&files.key).unwrap();
    let error = Server::bind(Settings::default(), TlsSource::Files(files))
        .await
        .err()
        .expect("missing key accepted");
    assert!(format!("{error:#}").contains("--tls-key"), "{error:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_alone_picks_up_a_rotation() {
    let (old, new) = (Pki::new(), Pki::new());
    let dir = tempfile::tempdir().unwrap();
    let files = secret_volume(dir.path(), &old);
    let poll = Duration::from_millis(200);
    let settings = Settings {
        cert_poll_interval: poll,
        watch_cert_files: false,
        ..Settings::default()
    };
    let server = Server::bind(settings, TlsSource::Files(files))
        .await
        .unwrap();
    let cas = [old.ca_pem.as_str(), new.ca_pem.as_str()];
    assert_eq!(served(&server, &cas).await, old.leaf_der());
    publish(dir.path(), "v2", &new.cert_pem, &new.key_pem);
    let swapped = Instant::now();
    support::eventually(
        Duration::from_secs(10),
        "the polled certificate",
        || async { (served(&server, &cas).await == new.leaf_der()).then_some(()) },
    )
    .await;
    // One poll interval plus generous slack for a busy CI machine; still far below the
    // 10 s default, so it is the configured interval at work.
    assert!(swapped.elapsed() < poll * 10, "{:?}", swapped.elapsed());
    assert_eq!(reloads(&server, "success"), 1.0);
}
