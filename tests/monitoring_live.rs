//! The alerts and the dashboard against a real Prometheus (Debian's `prometheus`, as CI
//! installs it): it scrapes a real webhook server (in process, its TLS and probe ports
//! on loopback) after reviews that patch, deny and are refused, loads the shipped rule
//! file, and through its HTTP API every dashboard query and every alert expression
//! evaluates without error, every webhook panel has series, and every rule is healthy.
//! The reaper's and the node agent's panels need their programs in a cluster: e2e/install
//! is where they get data. Without prometheus the test skips, or fails under
//! PRESTOP_REQUIRE_TOOLS=1.

#[path = "support/deploy.rs"]
mod common;
#[path = "support/server.rs"]
mod support;

use prestop_injector::server::Settings;
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};
use support::{post_request, send_h1, Pki};

/// A Prometheus process, killed when dropped.
struct Prometheus {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .unwrap()
        .port()
}

/// Debian's prometheus scraping `target` every second as the job the alerts expect,
/// evaluating the shipped rules every second.
fn start_prometheus(binary: &std::path::Path, target: std::net::SocketAddr) -> Prometheus {
    let dir = tempfile::tempdir().unwrap();
    let rules = common::repo_root().join("charts/prestop-injector/files/prometheus-rules.yaml");
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         rule_files: [{rules:?}]\n\
         scrape_configs:\n\
         - job_name: prestop-injector-metrics\n  static_configs: [{{targets: ['{target}']}}]\n"
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let child = std::process::Command::new(binary)
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .expect("start prometheus");
    Prometheus {
        child,
        port,
        _dir: dir,
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET path` of Prometheus' API (HTTP/1.0: a whole body, no chunks), parsed; `None`
/// while it does not answer.
fn api(port: u16, path: &str) -> Option<Value> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (_, body) = response.split_once("\r\n\r\n")?;
    serde_json::from_str(body).ok()
}

fn query(port: u16, expr: &str) -> Value {
    let answer = api(
        port,
        &format!("/api/v1/query?query={}", percent_encode(expr)),
    )
    .unwrap_or_else(|| panic!("no answer from Prometheus to {expr}"));
    assert_eq!(answer["status"], "success", "{expr}: {answer}");
    assert!(answer.get("warnings").is_none(), "{expr}: {answer}");
    answer["data"]["result"].clone()
}

fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "not within 60 s: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn review(uid: &str, annotations: Value) -> Vec<u8> {
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
            "object": {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "p", "annotations": annotations},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        }
    }))
    .unwrap()
}

fn dashboard_panels() -> Vec<(String, Vec<String>)> {
    let path = common::repo_root().join("charts/prestop-injector/files/grafana-dashboard.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|panel| panel["type"] != "row")
        .map(|panel| {
            let exprs = panel["targets"]
                .as_array()
                .unwrap()
                .iter()
                // Grafana's $__rate_interval is at least four scrape intervals.
                .map(|t| {
                    t["expr"]
                        .as_str()
                        .unwrap()
                        .replace("$__rate_interval", "10s")
                })
                .collect();
            (panel["title"].as_str().unwrap().to_owned(), exprs)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_evaluates_every_query_and_alert() {
    let Some(binary) = common::tool("prometheus", "--version", "apt-get install prometheus") else {
        return;
    };
    let pki = Pki::new();
    let server = support::start(Settings::default(), &pki).await;
    let probe = server.probe_addr();
    let prometheus = start_prometheus(&binary, probe);
    let port = prometheus.port;

    // Traffic: unchanged, patched, denied, and a refused (415) request.
    let (mut h1, _) = support::h1(server.addr(), &pki.ca_pem).await;
    for i in 0..20 {
        let annotations = match i % 4 {
            0 => serde_json::json!({"prestop-injector.io/command": "sleep 1"}),
            1 => serde_json::json!({"prestop-injector.io/cleanup": "scratch"}),
            _ => serde_json::json!({}),
        };
        let answer = send_h1(
            &mut h1,
            post_request("/mutate", review(&format!("u{i}"), annotations)),
        )
        .await
        .unwrap();
        assert_eq!(answer.status, 200);
    }
    let mut refused = post_request("/mutate", "x");
    refused
        .headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    assert_eq!(send_h1(&mut h1, refused).await.unwrap().status, 415);

    let checks = tokio::task::spawn_blocking(move || {
        eventually("Prometheus scrapes the webhook", || {
            let targets = api(port, "/api/v1/targets")?;
            (targets["data"]["activeTargets"][0]["health"] == "up").then_some(())
        });
        // Panels whose series only a reaper or a node agent exports.
        let elsewhere = |exprs: &[String]| {
            exprs.iter().all(|e| {
                e.contains("_reaper_") || e.contains("node_agent") || e.contains("node-agent")
            })
        };
        for (title, exprs) in dashboard_panels() {
            // Several scrapes: rates need two samples in their window.
            let has_data = || {
                exprs
                    .iter()
                    .any(|e| query(port, e).as_array().is_some_and(|r| !r.is_empty()))
            };
            if elsewhere(&exprs) {
                for expr in &exprs {
                    query(port, expr);
                }
            } else {
                eventually(&format!("panel {title:?} has series"), || {
                    has_data().then_some(())
                });
            }
        }
        // Every alert expression evaluates (a healthy webhook: none fires but the absent()
        // ones, which see no reaper or agent), and the rule manager finds every rule healthy.
        let text = std::fs::read_to_string(
            common::repo_root().join("charts/prestop-injector/files/prometheus-rules.yaml"),
        )
        .unwrap();
        let rules: Value = serde_yaml::from_str(&text).unwrap();
        let mut names = Vec::new();
        for group in rules["groups"].as_array().unwrap() {
            for rule in group["rules"].as_array().unwrap() {
                query(port, rule["expr"].as_str().unwrap());
                names.push(rule["alert"].as_str().unwrap().to_owned());
            }
        }
        let firing = query(port, "ALERTS");
        assert!(
            firing
                .as_array()
                .unwrap()
                .iter()
                .all(|a| a["metric"]["alertname"] != "PrestopInjectorWebhookDown"),
            "the webhook is up: {firing}"
        );
        eventually("every rule evaluated and healthy", || {
            let groups = api(port, "/api/v1/rules")?;
            let rules: Vec<Value> = groups["data"]["groups"]
                .as_array()?
                .iter()
                .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                .collect();
            assert_eq!(rules.len(), names.len(), "{groups}");
            for rule in &rules {
                assert_ne!(rule["health"], "err", "{rule}");
            }
            rules.iter().all(|r| r["health"] == "ok").then_some(())
        });
    });
    checks.await.unwrap();
    drop(prometheus);
}
