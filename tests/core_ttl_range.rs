//! Issue 9, class 9 (ttl range): `ttl-after-finished` lands in the int32
//! `spec.ttlSecondsAfterFinished`, so a value beyond 2147483647 s is denied, not patched.

mod core_support;

use core_support::*;
use serde_json::json;

#[test]
fn class_9_ttl_after_finished_beyond_int32_is_denied_with_the_range() {
    for value in ["99999999999", "2147483648", "596524h"] {
        let outcome = mutate(scratch_job(
            json!({"prestop-injector.io/ttl-after-finished": value}),
        ));
        assert_eq!(outcome.decision.patch, None, "{value}");
        let denial = outcome.denial();
        for part in [
            "Job default/job-worker",
            "prestop-injector.io/ttl-after-finished",
            &format!("{value:?}"),
            "0 to 2147483647 seconds",
        ] {
            assert!(denial.contains(part), "{value}: {denial:?} lacks {part:?}");
        }
    }
}

#[test]
fn class_9_ttl_after_finished_at_the_int32_limit_is_patched() {
    let outcome = mutate(scratch_job(
        json!({"prestop-injector.io/ttl-after-finished": "2147483647"}),
    ));
    assert_eq!(outcome.decision.denial, None);
    assert_eq!(
        outcome.patched["spec"]["ttlSecondsAfterFinished"],
        2147483647
    );
}
