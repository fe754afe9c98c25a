//! The `pod_template` invariants without libFuzzer: pseudo-random byte strings through
//! the same structure-aware generator and `check_review`. For machines without
//! cargo-fuzz (no coverage guidance, so it complements the fuzzer, never replaces it):
//!
//!   cd fuzz && cargo run --release --example smoke -- CASES [SEED]
//!
//! A failing case prints its AdmissionReview and exits 1.

use arbitrary::{Arbitrary, Unstructured};
use prestop_fuzz::invariants::check_review;
use prestop_fuzz::template::Case;

fn main() {
    let mut args = std::env::args().skip(1);
    let cases: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    // xorshift64*: any fixed sequence will do, it only has to be reproducible.
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next_byte = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 24) as u8
    };
    let mut generated = 0u64;
    for index in 0..cases {
        let length = 64 + (index % 900) as usize;
        let bytes: Vec<u8> = (0..length).map(|_| next_byte()).collect();
        let Ok(case) = Case::arbitrary(&mut Unstructured::new(&bytes)) else {
            continue;
        };
        generated += 1;
        let body = case.review();
        let checked = std::panic::catch_unwind(|| check_review(&body, case.endpoint, &case.config));
        if checked.is_err() {
            eprintln!(
                "case {index} (seed {seed}) failed: {}",
                String::from_utf8_lossy(&body)
            );
            std::process::exit(1);
        }
    }
    eprintln!("smoke: {generated} of {cases} cases generated and checked (seed {seed})");
}
