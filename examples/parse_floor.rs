//! What reading the seed review costs before the core does anything, for the instruction
//! budget of docs/BENCHMARKS.md ("The floor under the core"):
//! `skip` tokenizes the whole body with serde_json and builds nothing (`IgnoredAny`);
//! `value` builds it into a `serde_json::Value` and drops it.
//! `bench/core-instructions.sh parse_floor skip` (or `value`); `BENCH_BODY` names another
//! review file.
use serde::de::IgnoredAny;

fn main() {
    let path = std::env::var("BENCH_BODY").unwrap_or("examples/review-job-worker.json".into());
    let body = std::fs::read(path).unwrap();
    let mode = std::env::args().nth(1).unwrap_or_else(|| "skip".to_owned());
    let n: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let mut total = 0;
    for _ in 0..n {
        total += match mode.as_str() {
            "skip" => serde_json::from_slice::<IgnoredAny>(&body)
                .map(|_| 1)
                .unwrap(),
            "value" => serde_json::from_slice::<serde_json::Value>(&body)
                .map(|value| value.as_object().map_or(0, |o| o.len()))
                .unwrap(),
            other => panic!("mode {other:?}: skip or value"),
        };
    }
    println!("{total}");
}

#[global_allocator]
static GLOBAL: prestop_alloc::Allocator = prestop_alloc::Allocator;
