//! Issue 17, class 12: the names docs/REAPER.md (the reaper's reference, moved out of the
//! README) documents are the names the code uses — read from that page itself, so neither
//! can change alone.

mod core_support;

use core_support::pod_facts;
use prestop_injector::config::Config;
use prestop_injector::reaper::metrics::REASONS;
use serde_json::json;

use std::collections::BTreeSet;

fn reaper_doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/REAPER.md")).unwrap()
}

/// The backticked words of `text` between `start` and the next `)`.
fn listed_after<'a>(text: &'a str, start: &str) -> BTreeSet<&'a str> {
    let at = text
        .find(start)
        .unwrap_or_else(|| panic!("docs/REAPER.md has no {start:?}"));
    let rest = &text[at + start.len()..];
    let list = &rest[..rest.find(')').unwrap()];
    list.split('`').skip(1).step_by(2).collect()
}

#[test]
fn documented_names_match_the_code() {
    let doc = reaper_doc();

    // The refusal reasons of the metric: the same closed set.
    let documented = listed_after(&doc, "`refusals_total{reason}` (");
    let code: BTreeSet<&str> = REASONS.into_iter().collect();
    assert_eq!(documented, code, "docs/REAPER.md's refusals_total reasons");

    // A corrupt state file is moved aside under the documented name.
    let end = doc
        .find(".corrupt.<time>`")
        .expect("docs/REAPER.md names the corrupt state file");
    let start = doc[..end].rfind('`').unwrap() + 1;
    let documented = &doc[start..end];
    assert_eq!(
        documented, "state.json",
        "docs/REAPER.md: {documented}.corrupt.<time>"
    );
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.json");
    std::fs::write(&state, b"{\"version\": 1, \"node\": \"node-a\", \"direc").unwrap();
    let loaded = prestop_injector::reaper::state::load(&state, "node-a");
    assert!(loaded.records.is_empty());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let stamp = names[0]
        .strip_prefix(&format!("{documented}.corrupt."))
        .unwrap_or_else(|| panic!("moved aside as {:?}", names[0]));
    assert!(
        !stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()),
        "{names:?}"
    );

    // A subPathExpr that cannot be known is `host_path_unknown`, as docs/REAPER.md says, also
    // when the webhook's rule is what refuses its open path (here: the same volume is
    // also mounted with a fixed subPath, which the unknown directory might hold).
    assert!(doc.contains("`host_path_unknown`"));
    let mut config = Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]\n").unwrap();
    config.seal = prestop_injector::seal_keys::SealKeys::parse(&"5e".repeat(32)).unwrap();
    let hook = json!([
        "/.prestop-injector/prestop-clean",
        "hook",
        "--target",
        "/scratch"
    ]);
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "job-a", "namespace": "batch", "uid": "uid-a",
                     "annotations": {"prestop-injector.io/status": "{\"version\":1,\"containers\":[\"app\"],\"grace\":40}"}},
        "spec": {"nodeName": "node-a",
                 "volumes": [{"name": "s", "hostPath": {"path": "/mnt/scratch/jobs"}}],
                 "containers": [{"name": "app", "image": "busybox",
                                 "envFrom": [{"configMapRef": {"name": "slots"}}],
                                 "volumeMounts": [
                                     {"name": "s", "mountPath": "/scratch", "subPathExpr": "slot-$(SLOT)"},
                                     {"name": "s", "mountPath": "/shared", "subPath": "shared"}],
                                 "lifecycle": {"preStop": {"exec": {"command": hook}}}}]}
    });
    // Sealed (docs/REAPER.md#the-seal), so that the reason is the directory's.
    let mut pod = pod;
    let sealed =
        prestop_injector::mutation::seal::seal(&config.seal, "batch", &pod["spec"].clone().into());
    pod["metadata"]["annotations"]["prestop-injector.io/seal"] = json!(sealed.unwrap());
    let facts = pod_facts(&pod, &config).unwrap();
    assert!(facts.cleanable.is_empty());
    let reasons: Vec<&str> = facts.refused.iter().map(|r| r.reason).collect();
    assert_eq!(reasons, ["host_path_unknown"], "{:?}", facts.refused);
}
