//! Arbitrary bytes as an AdmissionReview body on all three endpoints: decoding never
//! panics, and whatever decodes satisfies every invariant of the core
//! (`prestop_fuzz::invariants`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use prestop_fuzz::invariants::{check_review, ENDPOINTS};
use prestop_injector::config::Config;

fuzz_target!(|body: &[u8]| {
    // The shipped config (no allowed prefixes: nothing may be cleaned), and one that
    // allows everywhere, so the protected list alone is exercised too.
    let shipped = Config::default();
    let everywhere = Config {
        allowed_host_path_prefixes: vec!["/".to_owned()],
        ..Config::default()
    };
    for config in [&shipped, &everywhere] {
        for endpoint in ENDPOINTS {
            check_review(body, endpoint, config);
        }
    }
});
