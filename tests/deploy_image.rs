//! The release image's Dockerfile (issue 18): one runtime stage on an empty root, fed
//! either by the builder stage (`docker build .`) or by prebuilt static binaries (CI,
//! offline: scripts/build-image.sh, which also runs the webhook in the built image), with
//! the cleaner program where `cleaner.image` is expected to hold it and the numeric user
//! the Deployment runs as. The image itself is built and run by e2e/install.

#[path = "support/deploy.rs"]
mod common;

use prestop_injector::mutation::hook::IMAGE_PROGRAM;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("read Dockerfile");
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                if !current.trim().is_empty() {
                    out.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
                }
                current.clear();
            }
        }
    }
    out
}

/// The instructions of the last stage (the runtime image).
fn runtime_stage() -> Vec<String> {
    let all = instructions();
    let last = all
        .iter()
        .rposition(|i| i.starts_with("FROM "))
        .expect("a FROM");
    all[last..].to_vec()
}

#[test]
fn the_runtime_stage_is_an_empty_root_with_only_the_two_static_programs() {
    let stage = runtime_stage();
    assert_eq!(stage[0], "FROM scratch", "no base image: no libc, no shell");
    let copies: Vec<&String> = stage.iter().filter(|i| i.starts_with("COPY ")).collect();
    assert_eq!(
        copies,
        [
            "COPY --from=binaries /out/prestop-injector /usr/local/bin/prestop-injector",
            &format!("COPY --from=binaries /out/prestop-clean {IMAGE_PROGRAM}"),
        ],
        "exactly the webhook and the cleaner, the cleaner at IMAGE_PROGRAM"
    );
    assert!(
        !stage.iter().any(|i| i.starts_with("RUN ")),
        "no RUN in a root without a shell"
    );
    assert!(stage.contains(&r#"ENTRYPOINT ["/usr/local/bin/prestop-injector"]"#.to_string()));
}

#[test]
fn the_binaries_come_from_the_builder_or_prebuilt_files_chosen_by_one_argument() {
    let all = instructions();
    assert_eq!(
        all[0], "ARG BINARIES=build",
        "docker build . compiles by default"
    );
    let stage = |name: &str| {
        let start = all
            .iter()
            .position(|i| i.starts_with("FROM ") && i.ends_with(&format!(" AS {name}")))
            .unwrap_or_else(|| panic!("stage {name}"));
        let end = all[start + 1..]
            .iter()
            .position(|i| i.starts_with("FROM "))
            .map_or(all.len(), |n| start + 1 + n);
        all[start..end].to_vec()
    };
    // The builder runs the same recipe CI runs (static, checked).
    assert!(stage("build")
        .iter()
        .any(|i| i.starts_with("RUN ") && i.ends_with("bash scripts/build-binaries.sh /out")));
    assert_eq!(
        stage("prebuilt"),
        [
            "FROM scratch AS prebuilt",
            "COPY prestop-injector prestop-clean /out/"
        ]
    );
    assert_eq!(stage("binaries"), ["FROM ${BINARIES} AS binaries"]);
}

/// `runAsNonRoot` can only verify a numeric user without an /etc/passwd, and the
/// Deployment's uid/gid must be the image's (the Secret's files are readable by group).
#[test]
fn the_image_user_is_the_deployments_numeric_uid_and_gid() {
    let stage = runtime_stage();
    assert!(stage.contains(&"USER 65532:65532".to_string()), "{stage:?}");
    let text = std::fs::read_to_string(root().join("deploy/base/webhook/deployment.yaml")).unwrap();
    let deployment: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    let pod = &deployment["spec"]["template"]["spec"]["securityContext"];
    assert_eq!(pod["runAsUser"], 65532);
    assert_eq!(pod["runAsGroup"], 65532);
}

/// The runtime stage's `ENV NAME=value` settings.
fn image_env() -> Vec<(String, String)> {
    runtime_stage()
        .iter()
        .filter_map(|i| i.strip_prefix("ENV "))
        .map(|setting| {
            let (name, value) = setting.split_once('=').expect("ENV NAME=value");
            assert!(
                !value.contains(' '),
                "one NAME=value per ENV line: {setting}"
            );
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

/// Private (anonymous) memory of a process, from `/proc/PID/status`.
fn private_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("RssAnon:"))
        .and_then(|rest| rest.trim().trim_end_matches(" kB").trim().parse().ok())
        .expect("RssAnon in /proc/PID/status")
}

#[test]
fn the_server_runs_in_the_images_environment_with_little_private_memory() {
    // Without the image's ENV, mimalloc's eagerly committed first arena takes whole huge
    // pages on a machine with transparent huge pages `always`: 10 MiB at idle in this
    // debug build (9 MiB in release) against 2.6 MiB with it.
    let env = image_env();
    assert!(
        env.contains(&("MIMALLOC_ARENA_EAGER_COMMIT".into(), "0".into())),
        "{env:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--dev".to_owned(),
        format!("--config={}", root().join("examples/config.yaml").display()),
        format!("--dev-ca-file={}", dir.path().join("ca.pem").display()),
    ];
    let server = common::start_server_with_env(&args, &env);
    let kib = private_kib(server.pid());
    assert!(
        kib < 6 * 1024,
        "serve keeps {kib} KiB of private memory at idle in the image's environment"
    );
}
