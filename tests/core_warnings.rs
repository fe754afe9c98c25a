//! Issue 31: warnings keep what matters. The API server truncates a warning only past 256
//! characters; 120 is kubectl's preference. Warnings of 120 to 256 characters were cut at
//! 120: a container name and a 15-character path lost their middles (`"featu…orker"`,
//! `/etc/k…rnetes`) and a reason lost its end (`…set securityContext.runAsUser and
//! runAsGroup; usin…`). Now nothing is cut while the whole sentence fits in 256.

mod core_support;

use core_support::*;
use prestop_injector::mutation::{Endpoint, MAX_WARNING_CHARS};
use serde_json::json;

#[test]
fn warnings_are_whole_while_they_fit_in_256() {
    assert_eq!(MAX_WARNING_CHARS, 256, "the API server's limit");
    let container = json!({
        "name": "feature-extractor-worker", "image": "busybox:1.36",
        "command": ["sh", "-c", "sleep 1"],
        "volumeMounts": [{"name": "package", "mountPath": "/test-package"},
                         {"name": "etc", "mountPath": "/host-etc"}]});
    let object = job(
        json!({"prestop-injector.io/cleanup": "auto", "prestop-injector.io/mode": "sidecar"}),
        container,
        json!([
            host_path_volume("package", "/test-package/nightly/package"),
            host_path_volume("etc", "/etc/kubernetes")
        ]),
    );
    let outcome = mutate_with(Endpoint::Mutate, &test_config(), object);
    let warnings = &outcome.decision.warnings;
    for whole in [
        "container \"feature-extractor-worker\": /host-etc not cleaned: it is host path \
         /etc/kubernetes, inside the protected host directory /etc",
        "container \"feature-extractor-worker\": no cleanup sidecar: it has no runAsUser; set \
         securityContext.runAsUser and runAsGroup; using an exec preStop",
    ] {
        assert!(
            whole.chars().count() > 120,
            "the case must be one that 120 cut"
        );
        assert!(
            warnings.iter().any(|w| w == whole),
            "no whole {whole:?} in {warnings:#?}"
        );
    }
    assert!(warnings.iter().all(|w| !w.contains('…')), "{warnings:#?}");
}
