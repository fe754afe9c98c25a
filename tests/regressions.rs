//! One test per crash or broken invariant the fuzz targets found (docs/ROBUSTNESS.md).
//! Each names the fuzz artifact it came from; the inputs are real manifests under
//! `tests/fixtures/regressions/`, reduced by hand to what triggers the fault.

mod core_support;

use core_support::request;
use prestop_injector::admission::Operation;
use prestop_injector::config::Config;
use prestop_injector::mutation::{decide, Endpoint};
use serde_json::{json, Value};

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/regressions/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// pod_template crash-405f0867eefe07e1da1c5d4c426a1ff70c9ebcdd: in sidecar mode, an init
/// container of the user's that is named `prestop-cleanup` (our sidecar's name) was
/// overwritten key by key with our sidecar — image, command, mounts, securityContext —
/// although its command is not ours. The removal path already checks that the container
/// is ours (`hook::sidecar_targets`); the update path must too. Denying the name clash
/// with a message is as good as leaving the container alone; silently replacing it is not.
#[test]
fn user_init_container_named_like_our_sidecar_is_not_overwritten() {
    let object = fixture("job-init-container-named-prestop-cleanup.yaml");
    let user_init = object["spec"]["template"]["spec"]["initContainers"][0].clone();
    for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto] {
        let decision = decide(
            &request(Operation::Create, object.clone()),
            endpoint,
            &Config::default(),
        );
        if let Some(denial) = &decision.denial {
            assert!(
                denial.message.contains("prestop-cleanup"),
                "a denial names the clashing container: {}",
                denial.message
            );
            continue;
        }
        let mut patched = object.clone();
        if let Some(patch) = &decision.patch {
            json_patch::patch(&mut patched, patch).expect("the patch applies");
        }
        let init = patched["spec"]["template"]["spec"]["initContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            init.contains(&user_init),
            "the user's init container was rewritten on {endpoint:?}:\n{}",
            json!(decision.patch)
        );
    }
}
