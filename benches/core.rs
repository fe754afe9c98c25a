//! `core/seed_job`: parse the seed Job's AdmissionReview, decide, build and serialize the
//! response — everything the server does per request except HTTP and TLS.
//!
//! Run: `cargo bench --bench core -- core/`

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use prestop_injector::admission;
use prestop_injector::config::Config;
use prestop_injector::mutation::Endpoint;

// The same allocator as the binary, so the figure is the one the server sees.
#[global_allocator]
static GLOBAL: prestop_alloc::Allocator = prestop_alloc::Allocator;

const SEED_REVIEW: &str = include_str!("../examples/review-job-worker.json");
/// The quick start's config: the seed Job's scratch prefix allowed, so it is cleaned.
const SEED_CONFIG: &str = include_str!("../examples/config.yaml");

fn seed_job(c: &mut Criterion) {
    let config = Config::from_yaml(SEED_CONFIG).expect("examples/config.yaml is valid");
    let body = SEED_REVIEW.as_bytes();
    let reviewed =
        admission::review(body, Endpoint::Mutate, &config).expect("the seed review is valid");
    assert!(
        reviewed.decision.patch.is_some(),
        "the seed Job must be patched"
    );
    c.bench_function("core/seed_job", |b| {
        b.iter(|| {
            admission::review(black_box(body), Endpoint::Mutate, &config).map(|r| r.body.len())
        })
    });
    let unchanged =
        String::from_utf8_lossy(body).replace("prestop-injector.io/cleanup", "example.com/cleanup");
    c.bench_function("core/out_of_scope_job", |b| {
        b.iter(|| {
            admission::review(black_box(unchanged.as_bytes()), Endpoint::Mutate, &config)
                .map(|r| r.body.len())
        })
    });
}

criterion_group!(benches, seed_job);
criterion_main!(benches);
