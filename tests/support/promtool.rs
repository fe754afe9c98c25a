//! promtool (Debian's `prometheus` package) for the monitoring tests
//! (`#[path = "support/promtool.rs"] mod promtool;`, beside support/deploy.rs as `common`).
#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub fn promtool() -> Option<PathBuf> {
    super::common::tool(
        "promtool",
        "--version",
        "apt-get install prometheus (Debian's package ships promtool)",
    )
}

/// What `promtool check metrics` reports on `page` (empty: nothing), failing the test if
/// promtool could not read it at all.
pub fn metrics_findings(promtool: &Path, page: &str) -> String {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool check metrics");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success() || !report.trim().is_empty(),
        "promtool check metrics failed without a finding: {}",
        output.status
    );
    report.trim().to_owned()
}

/// An OpenMetrics page (what our servers send, and what Prometheus negotiates) in the
/// 0.0.4 text format, the only one `promtool check metrics` reads: there a counter family
/// is named with its `_total`, as Prometheus' OpenMetrics parser names the samples it
/// stores. Only counters' `# HELP`/`# TYPE` names change; the `# EOF` marker goes.
pub fn openmetrics_to_text(page: &str) -> String {
    let counters: Vec<&str> = page
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.strip_suffix(" counter"))
        .collect();
    let mut text = String::with_capacity(page.len() + 16 * counters.len());
    for line in page.lines().filter(|line| *line != "# EOF") {
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        text.push_str(renamed.as_deref().unwrap_or(line));
        text.push('\n');
    }
    text
}

/// Fails with promtool's findings, and the page, unless there are none.
pub fn check_metrics(promtool: &Path, what: &str, openmetrics: &str) {
    assert!(
        openmetrics.ends_with("# EOF\n"),
        "{what} is not an OpenMetrics page:\n{openmetrics}"
    );
    let page = openmetrics_to_text(openmetrics);
    let findings = metrics_findings(promtool, &page);
    assert!(
        findings.is_empty(),
        "promtool check metrics on {what}:\n{findings}\n--- the page:\n{page}"
    );
}

/// `promtool SUBCOMMAND ARGS`, asserting success and returning its report.
pub fn run(promtool: &Path, args: &[&str]) -> String {
    let output = Command::new(promtool)
        .args(args)
        .output()
        .expect("run promtool");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{report}");
    report
}
