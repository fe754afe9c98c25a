//! The Grafana dashboard (charts/prestop-injector/files/grafana-dashboard.json), checked
//! without a Grafana: the fields Grafana needs to import it (uid, title, schemaVersion, a
//! Prometheus datasource variable that every panel and query uses, each panel's type,
//! title, gridPos and targets), panels that do not overlap, every metric the webhook and
//! the reaper export shown somewhere, and every query parsed by promtool (one recording
//! rule per expr in a generated rule file, Grafana's interval variables replaced).

#[path = "support/deploy.rs"]
mod common;
#[path = "support/promtool.rs"]
mod promtool;

use serde_json::Value;
use std::collections::BTreeSet;

/// Grafana's built-in interval variables, and what promtool reads in their place.
const GRAFANA_VARIABLES: [(&str, &str); 3] = [
    ("$__rate_interval", "5m"),
    ("$__interval", "1m"),
    ("$__range", "1h"),
];

fn dashboard() -> Value {
    let path = common::repo_root().join("charts/prestop-injector/files/grafana-dashboard.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn panels(dashboard: &Value) -> Vec<&Value> {
    dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .collect()
}

/// Every (panel title, expr) of the dashboard.
fn exprs(dashboard: &Value) -> Vec<(String, String)> {
    panels(dashboard)
        .iter()
        .flat_map(|panel| {
            let title = panel["title"].as_str().unwrap_or("").to_owned();
            panel["targets"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |target| {
                    (
                        title.clone(),
                        target["expr"].as_str().unwrap_or("").to_owned(),
                    )
                })
        })
        .collect()
}

#[test]
fn the_dashboard_has_what_grafana_needs_to_import_it() {
    let dashboard = dashboard();
    for key in ["uid", "title"] {
        assert!(
            dashboard[key].as_str().is_some_and(|v| !v.is_empty()),
            "no {key}"
        );
    }
    assert!(
        dashboard["uid"].as_str().unwrap().len() <= 40,
        "Grafana's uid limit"
    );
    let schema = dashboard["schemaVersion"]
        .as_u64()
        .expect("schemaVersion is a number");
    assert!(
        schema >= 36,
        "schemaVersion {schema}: datasource refs by uid need >= 36"
    );
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("templating.list");
    let datasource = variables
        .iter()
        .find(|v| v["type"] == "datasource" && v["query"] == "prometheus")
        .expect("a Prometheus datasource template variable");
    let reference = format!("${{{}}}", datasource["name"].as_str().unwrap());

    let mut ids = BTreeSet::new();
    for panel in panels(&dashboard) {
        let title = panel["title"].as_str().unwrap_or("");
        assert!(!title.is_empty(), "a panel without a title: {panel}");
        assert!(
            ids.insert(panel["id"].as_u64().expect("panel id")),
            "{title}: id reused"
        );
        let kind = panel["type"].as_str().unwrap_or("");
        assert!(
            ["row", "timeseries", "stat", "gauge", "table", "bargauge"].contains(&kind),
            "{title}: type {kind:?}"
        );
        let grid = &panel["gridPos"];
        for key in ["h", "w", "x", "y"] {
            assert!(grid[key].is_u64(), "{title}: gridPos.{key}");
        }
        assert!(
            grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24,
            "{title}: wider than the grid"
        );
        if kind == "row" {
            continue;
        }
        assert_eq!(
            panel["datasource"]["uid"],
            reference.as_str(),
            "{title}: datasource"
        );
        assert_eq!(
            panel["datasource"]["type"], "prometheus",
            "{title}: datasource type"
        );
        let targets = panel["targets"].as_array().filter(|t| !t.is_empty());
        let targets = targets.unwrap_or_else(|| panic!("{title}: no targets"));
        let mut refs = BTreeSet::new();
        for target in targets {
            assert!(
                target["expr"].as_str().is_some_and(|e| !e.is_empty()),
                "{title}: a target without expr"
            );
            assert_eq!(
                target["datasource"]["uid"],
                reference.as_str(),
                "{title}: target datasource"
            );
            assert!(
                refs.insert(target["refId"].as_str().expect("refId").to_owned()),
                "{title}: refId reused"
            );
        }
    }
}

/// Two panels on the same cells hide each other in Grafana.
#[test]
fn no_two_panels_overlap() {
    let dashboard = dashboard();
    let mut taken = BTreeSet::new();
    for panel in panels(&dashboard) {
        let grid = &panel["gridPos"];
        let [h, w, x, y] = ["h", "w", "x", "y"].map(|k| grid[k].as_u64().unwrap());
        for row in y..y + h {
            for column in x..x + w {
                assert!(
                    taken.insert((row, column)),
                    "{} overlaps another panel at {row},{column}",
                    panel["title"]
                );
            }
        }
    }
}

/// Every family on the webhook's and the reaper's /metrics is on the dashboard (a
/// histogram by its buckets), and so are the node agent's answers by verdict.
#[test]
fn every_exported_metric_has_a_panel() {
    let exprs: String = exprs(&dashboard())
        .into_iter()
        .map(|(_, e)| e + "\n")
        .collect();
    let pages = [
        prestop_injector::server::metrics::Metrics::new().encode(),
        prestop_injector::reaper::metrics::Metrics::new().encode(),
    ];
    let mut names = vec![
        "prestop_injector_node_agent_answers_total".to_owned(),
        "prestop_injector_node_agent_requests_in_flight".to_owned(),
        "prestop_injector_reaper_cut_off_cleanups_finished_total".to_owned(),
    ];
    for page in &pages {
        for line in page.lines() {
            let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|l| l.split_once(' '))
            else {
                continue;
            };
            names.push(match kind {
                "counter" => format!("{name}_total"),
                "histogram" => format!("{name}_bucket"),
                _ => name.to_owned(),
            });
        }
    }
    assert!(names.len() > 20, "{names:?}");
    for name in names {
        assert!(exprs.contains(&name), "no panel shows {name}");
    }
}

/// promtool cannot parse a bare expression, but it checks a rule file: one recording
/// rule per query. A query that does not parse fails here, naming its panel.
#[test]
fn every_query_parses() {
    let Some(promtool) = promtool::promtool() else {
        return;
    };
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (title, expr)) in exprs(&dashboard()).into_iter().enumerate() {
        let mut expr = expr;
        for (variable, value) in GRAFANA_VARIABLES {
            expr = expr.replace(variable, value);
        }
        assert!(
            !expr.contains('$'),
            "{title}: a variable promtool cannot read: {expr}"
        );
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard-rules.yaml");
    std::fs::write(&file, &rules).unwrap();
    let report = promtool::run(&promtool, &["check", "rules", file.to_str().unwrap()]);
    assert!(report.contains("SUCCESS"), "{report}\n{rules}");

    // And the check fails on a query that does not parse.
    std::fs::write(
        &file,
        rules.replace("sum by (endpoint, outcome)", "sum by (endpoint, outcome"),
    )
    .unwrap();
    let output = std::process::Command::new(&promtool)
        .args(["check", "rules", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success(), "promtool accepted a broken query");
}
