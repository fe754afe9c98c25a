//! The real binary: `--dev` start-up, SIGTERM handling and start-up errors.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[path = "support/server.rs"]
mod support;

const BIN: &str = env!("CARGO_BIN_EXE_prestop-injector");

/// Kills the child if a test fails half-way, so no server outlives the test run.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads the JSON log until the "serving" line and returns (listen, probe).
fn bound_addresses(lines: &mpsc::Receiver<String>) -> (SocketAddr, SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(wait)
            .expect("server never logged its addresses");
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if entry["message"] == "serving admission reviews" {
            let addr = |key: &str| entry[key].as_str().unwrap().parse().unwrap();
            return (addr("listen"), addr("probe"));
        }
    }
}

fn lines_of(stream: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_flips_readiness_finishes_in_flight_requests_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    let child = Command::new(BIN)
        .args([
            "serve",
            "--dev",
            "--listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--log-format",
            "json",
            "--shutdown-delay",
            "1s",
            "--drain-timeout",
            "5s",
        ])
        .arg("--dev-ca-file")
        .arg(&ca_file)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Running(child);
    let stdout = lines_of(child.0.stdout.take().unwrap());
    let stderr = lines_of(child.0.stderr.take().unwrap());
    let (listen, probe) = bound_addresses(&stderr);

    // --dev told us where the CA is and how to call the server.
    let mut printed = String::new();
    while !printed.contains("curl --cacert") {
        let line = stdout
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("--dev printed no curl line: {printed}"));
        printed.push_str(&line);
        printed.push('\n');
    }
    assert!(printed.contains(ca_file.to_str().unwrap()), "{printed}");
    let ca = std::fs::read_to_string(&ca_file).unwrap();

    assert_eq!(support::get(probe, "/readyz").await.0, 200);

    // A request in flight: headers and half of the body sent.
    let body = support::review("in-flight");
    let (first, second) = body.split_at(body.len() / 2);
    let config = support::client_config(&[&ca], &[b"http/1.1"]);
    let mut tls = support::tls_connect(listen, config).await.unwrap();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        support::HOST,
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(first).await.unwrap();
    tls.flush().await.unwrap();

    // The shell's builtin `kill`: present wherever `sh` is, unlike /bin/kill (procps).
    let status = Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.0.id())])
        .status()
        .unwrap();
    assert!(status.success());
    let signalled = Instant::now();

    support::eventually(Duration::from_secs(5), "/readyz to say 503", || async {
        let (status, _) = support::get(probe, "/readyz").await;
        (status == 503).then_some(())
    })
    .await;

    // After the shutdown delay the listener closes...
    support::eventually(Duration::from_secs(10), "the listener to close", || async {
        tokio::net::TcpStream::connect(listen)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    assert!(signalled.elapsed() >= Duration::from_millis(900));

    // ...but the request in flight still completes.
    tls.write_all(second).await.unwrap();
    tls.flush().await.unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut response))
        .await
        .expect("in-flight request never answered");
    let response = String::from_utf8_lossy(&response);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""uid":"in-flight""#), "{response}");

    let deadline = Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.0.try_wait().unwrap() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exit.success(), "{exit:?}");
    // 1 s delay + drain (immediate here) + slack: well inside delay + drain timeout.
    assert!(signalled.elapsed() < Duration::from_secs(6));
}

#[test]
fn serve_without_certificates_explains_what_to_pass() {
    let stderr = serve_without_certificates(&[]);
    assert!(
        stderr.contains("--tls-cert") && stderr.contains("--dev"),
        "{stderr}"
    );
}

/// `serve ARGS` on loopback with no certificate in its flags or environment: it must stop
/// right after its start-up lines; their stderr.
fn serve_without_certificates(args: &[&std::ffi::OsStr]) -> String {
    let output = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--probe-listen",
            "127.0.0.1:0",
        ])
        .args(args)
        .env_remove("PRESTOP_INJECTOR_DEV")
        .env_remove("PRESTOP_INJECTOR_TLS_CERT")
        .env_remove("PRESTOP_INJECTOR_TLS_KEY")
        .env_remove("PRESTOP_INJECTOR_SEAL_KEY_FILE")
        .output()
        .unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn flags_come_from_the_environment_too() {
    let output = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("PRESTOP_INJECTOR_MAX_CONNECTION_AGE", "soon")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a duration"), "{stderr}");
}

/// Issue 17 class 5: the start-up log says once whether anything may be deleted, and a
/// prefix that is `/` or protected stops the server with the key and the entry named.
#[test]
fn allow_list_first_is_said_at_start_up() {
    let serve = |config: &std::path::Path| {
        serve_without_certificates(&["--config".as_ref(), config.as_os_str()])
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "orphanDelete: warn\n").unwrap();
    let stderr = serve(&config);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("no allowedHostPathPrefixes configured"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    std::fs::write(&config, "allowedHostPathPrefixes: [/mnt/scratch]\n").unwrap();
    let stderr = serve(&config);
    assert!(
        stderr.contains("only at or below allowedHostPathPrefixes: /mnt/scratch"),
        "{stderr}"
    );
    for bad in ["/", "/var/lib"] {
        std::fs::write(&config, format!("allowedHostPathPrefixes: [{bad}]\n")).unwrap();
        let stderr = serve(&config);
        assert!(
            stderr.contains(&format!("allowedHostPathPrefixes entry {bad:?}")),
            "{stderr}"
        );
    }
}

/// Whether injected pods are sealed for the reaper is said once at start; a bad key file
/// stops the server with its line named, never its key.
#[test]
fn the_seal_key_is_said_at_start_up() {
    let stderr = serve_without_certificates(&[]);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("no --seal-key-file") && line.contains("WARN"))
        .collect();
    assert_eq!(said.len(), 1, "{stderr}");
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("seal.key");
    let key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    std::fs::write(&keys, format!("{key}\n{key}\n")).unwrap();
    let stderr = serve_without_certificates(&["--seal-key-file".as_ref(), keys.as_os_str()]);
    assert!(
        stderr.contains("sealing injected pods") && stderr.contains("keys=2"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("no --seal-key-file") && !stderr.contains(key),
        "{stderr}"
    );
    std::fs::write(&keys, "0011\n").unwrap();
    let stderr = serve_without_certificates(&["--seal-key-file".as_ref(), keys.as_os_str()]);
    assert!(stderr.contains("line 1 holds 2 bytes"), "{stderr}");
}

/// A newcomer's first minute (`serve --dev` from the README): no warning about a missing
/// kubeconfig, one short line saying which Kubernetes version is assumed.
#[test]
fn dev_mode_says_which_kubernetes_version_it_assumes_and_warns_of_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--dev", "--config", "examples/config.yaml"])
        .args(["--listen", "127.0.0.1:0", "--probe-listen", "127.0.0.1:0"])
        .args(["--log-format", "json"])
        .arg("--dev-ca-file")
        .arg(dir.path().join("ca.pem"))
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Running(child);
    let stderr = lines_of(child.0.stderr.take().unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let line = stderr
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no serving line: {seen:#?}"));
        let entry: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let done = entry["message"] == "serving admission reviews";
        seen.push(entry);
        if done {
            break;
        }
    }
    let warnings: Vec<_> = seen.iter().filter(|e| e["level"] != "INFO").collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let assumed: Vec<_> = seen
        .iter()
        .filter_map(|e| e["message"].as_str())
        .filter(|m| m.starts_with("--dev: assuming Kubernetes 1.20"))
        .collect();
    assert_eq!(assumed.len(), 1, "{seen:#?}");
    assert!(
        !assumed[0].contains('\n') && assumed[0].len() <= 100,
        "{}",
        assumed[0]
    );
}
