//! Structure-aware: workloads of every kind with generated pod templates (containers,
//! mounts, hostPath volumes, existing hooks, our annotations valid and malformed), sent
//! as an AdmissionReview through the server path and the core, with every invariant of
//! `prestop_fuzz::invariants` checked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prestop_fuzz::invariants::check_review;
use prestop_fuzz::template::Case;

fuzz_target!(|case: Case| {
    check_review(&case.review(), case.endpoint, &case.config);
});
