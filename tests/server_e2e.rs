//! End to end over real TLS: the seed Job review (a Job annotated
//! `prestop-injector.io/cleanup: auto` with a hostPath volume mount) comes back as an
//! allowed review with a base64 JSONPatch that applies and adds the preStop hook, with
//! the README's config (examples/config.yaml: the seed Job's scratch prefix allowed).

use base64::Engine as _;
use prestop_injector::config::Config;
use prestop_injector::server::Settings;
use support::{post_request, send_h1, send_h2, Pki};

#[path = "support/server.rs"]
mod support;

const SEED: &[u8] = include_bytes!("../examples/review-job-worker.json");

fn assert_patched(review: &serde_json::Value) {
    let seed: serde_json::Value = serde_json::from_slice(SEED).unwrap();
    let response = &review["response"];
    assert_eq!(response["uid"], seed["request"]["uid"]);
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(
            response["patch"]
                .as_str()
                .expect("patch is a base64 string"),
        )
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    assert!(!patch.0.is_empty());
    let mut object = seed["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).expect("patch applies to the object");
    let containers = &object["spec"]["template"]["spec"]["containers"];
    let hook = &containers[0]["lifecycle"]["preStop"]["exec"]["command"];
    assert_eq!(hook[0], "/.prestop-injector/prestop-clean", "{containers}");
    let argv: Vec<&str> = hook
        .as_array()
        .expect("argv")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        argv.windows(2).any(|w| w == ["--target", "/test-package"]),
        "{containers}"
    );
    assert!(
        argv.windows(2).any(|w| w == ["--deadline", "38"]),
        "the 40 s grace less 2 s: {containers}"
    );
}

fn readme_config() -> Config {
    Config::load(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/config.yaml").as_ref())
        .expect("examples/config.yaml")
}

/// Issue 17 class 5: with no allowedHostPathPrefixes nothing that deletes is injected, and
/// the server says so once, in a gauge an alert can watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_list_first_the_prefix_count_is_a_metric() {
    let pki = Pki::new();
    for (config, count) in [(Config::default(), 0.0), (readme_config(), 1.0)] {
        let server = support::start(
            Settings {
                config,
                ..Settings::default()
            },
            &pki,
        )
        .await;
        let samples = support::parse_metrics(&server.state().metrics.encode());
        let gauge = "prestop_injector_allowed_host_path_prefixes";
        // Present at 0 too: absent would read as 0 and hide a missing metric.
        assert!(samples.iter().any(|(s, _)| s == gauge), "{samples:?}");
        assert_eq!(support::sample(&samples, gauge), count);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_job_is_patched_over_http1_and_http2() {
    let pki = Pki::new();
    let settings = Settings {
        config: readme_config(),
        ..Settings::default()
    };
    let server = support::start(settings, &pki).await;

    let (mut h1, _) = support::h1(server.addr(), &pki.ca_pem).await;
    let answer = send_h1(&mut h1, post_request("/mutate?timeout=10s", SEED))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_patched(&answer.json());

    let (mut h2, _) = support::h2(server.addr(), &pki.ca_pem).await;
    let answer = send_h2(&mut h2, post_request("/mutate", SEED))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_patched(&answer.json());

    let samples = support::parse_metrics(&server.state().metrics.encode());
    let patched = r#"prestop_injector_requests_total{endpoint="mutate",kind="Job",operation="CREATE",outcome="patched"}"#;
    assert_eq!(support::sample(&samples, patched), 2.0);
    assert_eq!(
        support::sample(&samples, "prestop_injector_patches_total"),
        2.0
    );
}
