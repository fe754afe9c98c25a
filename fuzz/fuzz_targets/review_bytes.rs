//! Arbitrary bytes as an AdmissionReview body on all three endpoints: decoding never
//! panics, and whatever decodes satisfies every invariant of the core
//! (`prestop_fuzz::invariants`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use prestop_fuzz::invariants::{check_review, ENDPOINTS};
use prestop_injector::config::Config;

fuzz_target!(|body: &[u8]| {
    let config = Config::default();
    for endpoint in ENDPOINTS {
        check_review(body, endpoint, &config);
    }
});
