//! Runs the core on the seed review N times, for profilers:
//! `bench/core-instructions.sh` (callgrind at N = 100 and 600, the difference over 500).
//! `BENCH_BODY` names another review file, as for `bench/post.lua`.
fn main() {
    let path = std::env::var("BENCH_BODY").unwrap_or("examples/review-job-worker.json".into());
    let body = std::fs::read(path).unwrap();
    let config = prestop_injector::config::Config::load("examples/config.yaml".as_ref()).unwrap();
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut total = 0;
    for _ in 0..n {
        total += prestop_injector::admission::review(
            &body,
            prestop_injector::mutation::Endpoint::Mutate,
            &config,
        )
        .unwrap()
        .body
        .len();
    }
    println!("{total}");
}

#[global_allocator]
static GLOBAL: prestop_alloc::Allocator = prestop_alloc::Allocator;
