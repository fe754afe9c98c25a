//! The alerts (charts/prestop-injector/files/prometheus-rules.yaml): promtool checks them
//! and runs their unit tests (every tests/monitoring/*-test.yaml: alerts-test.yaml fires
//! and clears each alert, issue-39-test.yaml holds the scenarios that broke the first
//! rule file), each alert is tested both firing and silent, and each carries the annotations an on-call engineer needs,
//! its runbook_url pointing at a section of docs/RUNBOOKS.md that exists. Without
//! promtool the promtool tests skip, or fail under PRESTOP_REQUIRE_TOOLS=1.

#[path = "support/deploy.rs"]
mod common;
#[path = "support/promtool.rs"]
mod promtool;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

const RUNBOOKS: &str =
    "https://github.com/prestop-injector/prestop-injector/blob/main/docs/RUNBOOKS.md#";

/// What issues 33 and 39 ask to be alerted on, one alert (at least) each.
const REQUIRED: [&str; 14] = [
    "PrestopInjectorWebhookDown",
    "PrestopInjectorWebhookCallsFailing",
    "PrestopInjectorWebhookErrors",
    "PrestopInjectorDenyingMany",
    "PrestopInjectorLatencyNearTimeout",
    "PrestopInjectorCertificateExpiresSoon",
    "PrestopInjectorTLSReloadFailed",
    "PrestopInjectorSealMismatches",
    "PrestopInjectorReaperKeepingDirectories",
    "PrestopInjectorReaperPendingGrowing",
    "PrestopInjectorReaperWalksFailing",
    "PrestopInjectorCleanupsCutOff",
    "PrestopInjectorNodeAgentUnreachable",
    "PrestopInjectorNodeAgentRefusing",
];

fn rule_file() -> PathBuf {
    common::repo_root().join("charts/prestop-injector/files/prometheus-rules.yaml")
}

fn test_file() -> PathBuf {
    common::repo_root().join("tests/monitoring/alerts-test.yaml")
}

/// Every promtool test file of tests/monitoring.
fn test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(common::repo_root().join("tests/monitoring"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with("-test.yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 2, "{files:?}");
    files
}

fn yaml(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn alerts() -> Vec<Value> {
    yaml(&rule_file())["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules").clone())
        .filter(|rule| rule.get("alert").is_some())
        .collect()
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let Some(promtool) = promtool::promtool() else {
        return;
    };
    let rules = rule_file().display().to_string();
    let report = promtool::run(&promtool, &["check", "rules", &rules]);
    assert!(report.contains("SUCCESS"), "{report}");
    for file in test_files() {
        let tests = file.display().to_string();
        let report = promtool::run(&promtool, &["test", "rules", &tests]);
        assert!(report.contains("SUCCESS"), "{report}");
    }
}

/// The unit tests prove something only if an alert can fail them: an alert whose
/// threshold is changed makes `promtool test rules` fail.
#[test]
fn a_changed_threshold_fails_the_unit_tests() {
    let Some(promtool) = promtool::promtool() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read_to_string(rule_file()).unwrap();
    let loosened = original.replace("< 14 * 86400", "< 7 * 86400");
    assert_ne!(
        loosened, original,
        "the expiry threshold is where this test expects"
    );
    std::fs::write(dir.path().join("rules.yaml"), loosened).unwrap();
    let tests = std::fs::read_to_string(test_file()).unwrap().replace(
        "../../charts/prestop-injector/files/prometheus-rules.yaml",
        "rules.yaml",
    );
    std::fs::write(dir.path().join("test.yaml"), tests).unwrap();
    let output = std::process::Command::new(&promtool)
        .args(["test", "rules", "test.yaml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{report}");
    assert!(
        report.contains("PrestopInjectorCertificateExpiresSoon"),
        "{report}"
    );
}

#[test]
fn the_alerts_cover_what_issue_33_asks_for() {
    let names: BTreeSet<String> = alerts()
        .iter()
        .map(|alert| alert["alert"].as_str().unwrap().to_owned())
        .collect();
    for required in REQUIRED {
        assert!(names.contains(required), "no alert {required} in {names:?}");
    }
    // The cut-off cleanups alert reads the reaper's counter by its agreed name.
    let cut_off = alerts()
        .into_iter()
        .find(|a| a["alert"] == "PrestopInjectorCleanupsCutOff")
        .unwrap();
    assert!(cut_off["expr"]
        .as_str()
        .unwrap()
        .contains("prestop_injector_reaper_cut_off_cleanups_finished_total"));
}

/// Each alert appears in the unit tests at least once firing and once silent.
#[test]
fn every_alert_is_tested_firing_and_silent() {
    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    let cases: Vec<Value> = test_files()
        .iter()
        .flat_map(|file| yaml(file)["tests"].as_array().unwrap().clone())
        .collect();
    for case in &cases {
        for check in case["alert_rule_test"].as_array().unwrap() {
            let name = check["alertname"].as_str().unwrap().to_owned();
            match check["exp_alerts"].as_array().map(Vec::len) {
                Some(0) | None => silent.insert(name),
                Some(_) => firing.insert(name),
            };
        }
    }
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        assert!(firing.contains(name), "{name} is never tested firing");
        assert!(silent.contains(name), "{name} is never tested silent");
    }
}

/// summary, description, severity, and a runbook_url whose anchor is a heading of
/// docs/RUNBOOKS.md (GitHub's anchor: the heading lower-cased).
#[test]
fn every_alert_has_annotations_and_a_runbook_section() {
    let runbooks = std::fs::read_to_string(common::repo_root().join("docs/RUNBOOKS.md")).unwrap();
    let anchors: BTreeSet<String> = runbooks
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(|heading| heading.trim().to_lowercase())
        .collect();
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        for key in ["summary", "description", "runbook_url"] {
            assert!(
                alert["annotations"][key]
                    .as_str()
                    .is_some_and(|v| !v.is_empty()),
                "{name} has no {key}"
            );
        }
        assert!(
            ["critical", "warning", "info"]
                .contains(&alert["labels"]["severity"].as_str().unwrap_or("")),
            "{name}: severity {}",
            alert["labels"]["severity"]
        );
        let url = alert["annotations"]["runbook_url"].as_str().unwrap();
        let anchor = url
            .strip_prefix(RUNBOOKS)
            .unwrap_or_else(|| panic!("{name}: runbook_url {url} is not under {RUNBOOKS}"));
        assert_eq!(anchor, name.to_lowercase(), "{name}: its own section");
        assert!(
            anchors.contains(anchor),
            "docs/RUNBOOKS.md has no section ## {name}"
        );
    }
}

/// "Near the timeout" is half of the webhook's timeoutSeconds, as the chart and deploy/
/// set it: a change to either must move the alert too.
#[test]
fn the_latency_alert_is_half_the_webhook_timeout() {
    let alert = alerts()
        .into_iter()
        .find(|a| a["alert"] == "PrestopInjectorLatencyNearTimeout")
        .unwrap();
    let expr = alert["expr"].as_str().unwrap();
    let threshold: f64 = expr
        .split(">= ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no `>= N` in {expr}"));
    let values = yaml(&common::repo_root().join("charts/prestop-injector/values.yaml"));
    let chart = values["webhook"]["timeoutSeconds"].as_f64().unwrap();
    assert_eq!(
        threshold,
        chart / 2.0,
        "chart's webhook.timeoutSeconds {chart}"
    );
    let webhooks =
        std::fs::read_to_string(common::deploy_dir().join("base/webhook/webhooks.yaml")).unwrap();
    let timeouts: Vec<f64> = common::parse_documents(&webhooks)
        .iter()
        .flat_map(|config| config["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|webhook| webhook["timeoutSeconds"].as_f64().unwrap())
        .collect();
    assert!(!timeouts.is_empty());
    for timeout in timeouts {
        assert_eq!(
            threshold,
            timeout / 2.0,
            "deploy/base timeoutSeconds {timeout}"
        );
    }
}

/// README's table of alerts lists every alert of the rule file, linked to its runbook.
#[test]
fn the_readme_lists_every_alert() {
    let readme = std::fs::read_to_string(common::repo_root().join("README.md")).unwrap();
    for alert in alerts() {
        let name = alert["alert"].as_str().unwrap();
        let row = format!("| [`{name}`](docs/RUNBOOKS.md#{})", name.to_lowercase());
        assert!(readme.contains(&row), "README.md has no row {row}");
    }
}

/// The counters the alerts read are on the pages at 0 before their first event, as
/// Prometheus recommends: a counter born at 1 shows no increase() (issue 39: the first
/// failed reload of a pod's life never fired PrestopInjectorTLSReloadFailed), and a
/// missing family empties a sum (PrestopInjectorWebhookErrors).
#[test]
fn the_alerted_counters_start_at_zero() {
    let webhook = prestop_injector::server::metrics::Metrics::new();
    let page = webhook.encode();
    let mut wanted = vec![
        r#"prestop_injector_tls_reloads_total{result="error"} 0"#.to_owned(),
        r#"prestop_injector_tls_reloads_total{result="success"} 0"#.to_owned(),
    ];
    for code in [400, 413, 415, 500, 504] {
        wanted.push(format!(
            r#"prestop_injector_rejected_requests_total{{code="{code}"}} 0"#
        ));
    }
    for line in &wanted {
        assert!(page.lines().any(|l| l == line), "no `{line}` in:\n{page}");
    }
    webhook.tls_reload(false);
    assert!(webhook
        .encode()
        .lines()
        .any(|l| l == r#"prestop_injector_tls_reloads_total{result="error"} 1"#));
    // The reaper's refusals by reason (ReaperKeepingDirectories, SealMismatches,
    // ReaperWalksFailing) and its kept directories (in_use_unknown).
    let reaper = prestop_injector::reaper::metrics::Metrics::new().encode();
    for reason in prestop_injector::reaper::metrics::REASONS {
        let line = format!(r#"prestop_injector_reaper_refusals_total{{reason="{reason}"}} 0"#);
        assert!(
            reaper.lines().any(|l| l == line),
            "no `{line}` in:\n{reaper}"
        );
    }
    let line = r#"prestop_injector_reaper_kept_directories{reason="in_use_unknown"} 0"#;
    assert!(
        reaper.lines().any(|l| l == line),
        "no `{line}` in:\n{reaper}"
    );
}
