//! `scale/*`: time per review as one object grows (issue #6, docs/ROBUSTNESS.md).
//!
//! A Job with 1, 10 or 100 containers (each mounting its own hostPath scratch volume,
//! `cleanup: auto`), padded with 1 KiB … 1 MiB of either
//! - `annotations`: entries on the Job's own metadata (parsed, never copied or diffed), or
//! - `env`: variables spread over the containers (inside the pod template, so copied,
//!   mutated and diffed),
//!
//! through `admission::review` on `/mutate`: parse, decide, diff, serialize — everything
//! the server does per request except HTTP and TLS. Time must grow linearly with size.
//!
//! Run: `cargo bench --bench scale` (about 3 minutes), or one curve:
//! `cargo bench --bench scale -- scale/env/c10`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use prestop_injector::admission;
use prestop_injector::config::Config;
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Value};
use std::time::Duration;

// The same allocator as the binary, so the figures are the ones the server sees.
#[global_allocator]
static GLOBAL: prestop_alloc::Allocator = prestop_alloc::Allocator;

const CONTAINERS: [usize; 3] = [1, 10, 100];
const KIB: [usize; 6] = [1, 4, 16, 64, 256, 1024];
/// Each padding entry carries this many bytes of value.
const ENTRY: usize = 100;

#[derive(Clone, Copy)]
enum Padding {
    Annotations,
    Env,
}

impl Padding {
    fn name(self) -> &'static str {
        match self {
            Padding::Annotations => "annotations",
            Padding::Env => "env",
        }
    }
}

/// The AdmissionReview of a Job with `containers` containers and about `bytes` of padding.
fn review(containers: usize, bytes: usize, padding: Padding) -> Vec<u8> {
    let entries = bytes.div_ceil(ENTRY + 24).max(1);
    let value = |i: usize| format!("{i:08}{}", "x".repeat(ENTRY - 8));
    let mut annotations = serde_json::Map::new();
    annotations.insert("prestop-injector.io/cleanup".into(), json!("auto"));
    let mut env: Vec<Vec<Value>> = vec![Vec::new(); containers];
    for i in 0..entries {
        match padding {
            Padding::Annotations => {
                annotations.insert(format!("example.com/k{i:06}"), json!(value(i)));
            }
            Padding::Env => {
                env[i % containers].push(json!({"name": format!("VAR_{i:06}"), "value": value(i)}))
            }
        }
    }
    let containers: Vec<Value> = env
        .into_iter()
        .enumerate()
        .map(|(i, env)| {
            json!({"name": format!("c{i}"), "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1"],
                   "env": env, "volumeMounts": [{"name": format!("v{i}"), "mountPath": format!("/scratch/{i}")}]})
        })
        .collect();
    let volumes: Vec<Value> = (0..containers.len())
        .map(|i| json!({"name": format!("v{i}"), "hostPath": {"path": format!("/mnt/scratch/{i}"), "type": "DirectoryOrCreate"}}))
        .collect();
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "scale", "namespace": "default", "annotations": annotations},
        "spec": {"backoffLimit": 1, "template": {"spec": {"containers": containers, "volumes": volumes, "restartPolicy": "Never"}}}});
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "00000000-0000-0000-0000-0000000000aa", "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "name": "scale", "namespace": "default", "operation": "CREATE", "object": job, "dryRun": false}}))
    .expect("serializable")
}

fn scale(c: &mut Criterion) {
    // Every container's volume is below the allowed prefix: each one is cleaned.
    let config = Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]").expect("config");
    for padding in [Padding::Annotations, Padding::Env] {
        for containers in CONTAINERS {
            let mut group = c.benchmark_group(format!("scale/{}/c{containers}", padding.name()));
            group
                .sample_size(20)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));
            for kib in KIB {
                let body = review(containers, kib * 1024, padding);
                let reviewed = admission::review(&body, Endpoint::Mutate, &config)
                    .expect("the scale review is valid");
                assert!(
                    reviewed.decision.patch.is_some(),
                    "every container gets a hook"
                );
                group.throughput(Throughput::Bytes(body.len() as u64));
                group.bench_with_input(
                    BenchmarkId::from_parameter(format!("{kib}KiB")),
                    &body,
                    |b, body| {
                        b.iter(|| {
                            admission::review(black_box(body), Endpoint::Mutate, &config)
                                .map(|r| r.body.len())
                        })
                    },
                );
            }
            group.finish();
        }
    }
}

criterion_group!(benches, scale);
criterion_main!(benches);
