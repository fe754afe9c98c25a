//! Helpers shared by the deploy tests (`#[path = "support/deploy.rs"] mod common;`):
//! finding kubectl and kubernetes-validate, rendering the kustomize overlays.
//!
//! A missing tool skips the test with a note, or fails it when PRESTOP_REQUIRE_TOOLS=1
//! (CI sets it after running .ci/deploy-tools.sh).
#![allow(dead_code)]

use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The overlays a user applies with `kubectl apply -k`. cluster-wide-with-reaper is
/// cluster-wide plus deploy/components/reaper: every check of the webhook holds for it
/// too (tests/deploy_reaper.rs checks the reaper's own objects).
pub const OVERLAYS: [&str; 4] = [
    "cluster-wide",
    "namespace-opt-in",
    "cert-manager",
    "cluster-wide-with-reaper",
];

pub fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn deploy_dir() -> PathBuf {
    repo_root().join("deploy")
}

fn tools_required() -> bool {
    std::env::var("PRESTOP_REQUIRE_TOOLS").is_ok_and(|value| value == "1")
}

/// Skips (returns `None`) or, under PRESTOP_REQUIRE_TOOLS=1, fails.
fn missing(tool: &str, hint: &str) -> Option<PathBuf> {
    assert!(
        !tools_required(),
        "{tool} is required (PRESTOP_REQUIRE_TOOLS=1) but not found: {hint}"
    );
    // Written past libtest's capture so the note shows even when the test passes.
    let _ = writeln!(
        std::io::stderr(),
        "SKIP: {tool} not found ({hint}); set PRESTOP_REQUIRE_TOOLS=1 to fail instead"
    );
    None
}

fn runs(program: &Path, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|output| output.status.success())
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// A command-line tool found on PATH that answers `probe` (e.g. openssl `version`).
pub fn tool(name: &str, probe: &str, hint: &str) -> Option<PathBuf> {
    match on_path(name) {
        Some(tool) if runs(&tool, probe) => Some(tool),
        _ => missing(name, hint),
    }
}

/// kubectl with its built-in kustomize (v5, kubectl >= 1.27).
pub fn kubectl() -> Option<PathBuf> {
    match on_path("kubectl") {
        Some(kubectl) if runs(&kubectl, "version") || runs(&kubectl, "help") => Some(kubectl),
        _ => missing("kubectl", "install kubectl >= 1.27 and put it on PATH"),
    }
}

/// kubernetes-validate from PRESTOP_KUBERNETES_VALIDATE or PATH.
pub fn kubernetes_validate() -> Option<PathBuf> {
    let candidate = std::env::var_os("PRESTOP_KUBERNETES_VALIDATE")
        .map(PathBuf::from)
        .or_else(|| on_path("kubernetes-validate"));
    match candidate {
        Some(tool) if runs(&tool, "--version") => Some(tool),
        _ => missing(
            "kubernetes-validate",
            "run `bash .ci/deploy-tools.sh` and export PRESTOP_KUBERNETES_VALIDATE as it prints",
        ),
    }
}

/// Helm (v3 or v4) from PRESTOP_HELM or PATH.
pub fn helm() -> Option<PathBuf> {
    let candidate = std::env::var_os("PRESTOP_HELM")
        .map(PathBuf::from)
        .or_else(|| on_path("helm"));
    match candidate {
        Some(tool) if runs(&tool, "version") => Some(tool),
        _ => missing(
            "helm",
            "run `bash .ci/deploy-tools.sh` and export PRESTOP_HELM as it prints",
        ),
    }
}

/// `kubectl kustomize DIR`, parsed into one JSON value per object.
pub fn render_dir(kubectl: &Path, dir: &Path) -> Vec<Value> {
    let output = Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        output.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    parse_documents(&String::from_utf8_lossy(&output.stdout))
}

/// `to` relative to the directory `from` (kustomize refuses absolute paths to other
/// kustomizations); both absolute and free of `..`.
pub fn relative(from: &Path, to: &Path) -> PathBuf {
    use std::path::Component;
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path = PathBuf::new();
    for _ in common..from.len() {
        path.push("..");
    }
    for part in &to[common..] {
        path.push(part);
    }
    path
}

/// `kubectl kustomize` of a kustomization written into a temporary directory; `{deploy}`
/// in `text` is the relative path to deploy/. `Err` is kubectl's stderr when it fails.
pub fn try_render_kustomization(kubectl: &Path, text: &str) -> Result<Vec<Value>, String> {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = dir.path().canonicalize().unwrap();
    let deploy = relative(&root, &deploy_dir().canonicalize().unwrap());
    let text = text.replace("{deploy}", deploy.to_str().unwrap());
    std::fs::write(root.join("kustomization.yaml"), text).unwrap();
    let output = Command::new(kubectl)
        .arg("kustomize")
        .arg(&root)
        .output()
        .expect("run kubectl kustomize");
    if !output.status.success() {
        return Err(String::from_utf8_lossy(&output.stderr).into_owned());
    }
    Ok(parse_documents(&String::from_utf8_lossy(&output.stdout)))
}

/// [`try_render_kustomization`] that must succeed.
pub fn render_kustomization(kubectl: &Path, text: &str) -> Vec<Value> {
    try_render_kustomization(kubectl, text)
        .unwrap_or_else(|stderr| panic!("kubectl kustomize of\n{text}\nfailed:\n{stderr}"))
}

/// Renders `deploy/overlays/NAME`.
pub fn render(kubectl: &Path, overlay: &str) -> Vec<Value> {
    render_dir(kubectl, &deploy_dir().join("overlays").join(overlay))
}

/// Every non-empty document of a multi-document YAML text.
pub fn parse_documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|document| {
            serde::Deserialize::deserialize(document).expect("every document is valid YAML")
        })
        .filter(|value: &Value| !value.is_null())
        .collect()
}

/// The object of `kind` named `name`; panics with what was there instead.
pub fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|object| object["kind"] == kind && object["metadata"]["name"] == name)
        .unwrap_or_else(|| {
            let present: Vec<String> = objects
                .iter()
                .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
                .collect();
            panic!("no {kind} {name} among {present:?}")
        })
}

/// The single webhook of the configuration of `kind`.
pub fn webhook<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let webhooks = find(objects, kind, "prestop-injector")["webhooks"]
        .as_array()
        .expect("webhooks is a list");
    assert_eq!(webhooks.len(), 1, "{kind} has exactly one webhook");
    &webhooks[0]
}

/// A running `prestop-injector serve`, killed when dropped, however the test ends.
pub struct Server {
    child: std::process::Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
    /// The HTTPS port.
    pub listen: u16,
    /// The plain-HTTP probe port (/healthz, /readyz, /metrics).
    pub probe: u16,
}

impl Server {
    /// The server's process id, to read its `/proc` entries.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// Status line of `GET path` over plain HTTP, or `None` while nothing answers.
fn http_status(port: u16, path: &str) -> Option<String> {
    http_get(port, path).and_then(|response| response.lines().next().map(str::to_owned))
}

/// The whole response (status line, headers, body) of `GET path` over plain HTTP.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::Read as _;
    use std::time::Duration;
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&address, Duration::from_secs(1)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// The `serve` arguments of a rendered Deployment's container, made runnable here: its
/// certificate, key and config flags pointed at `dir/tls.crt`, `dir/tls.key` and `config`,
/// its listen addresses dropped (`start_server` picks free ones).
/// A seal key file (docs/REAPER.md#the-seal) is written to `dir` for `--seal-key-file`.
pub fn local_serve_args(container: &Value, dir: &Path, config: &Path) -> Vec<String> {
    let local = |name: &str| dir.join(name).display().to_string();
    std::fs::write(dir.join("seal.key"), format!("{}\n", "5e".repeat(32))).unwrap();
    container["args"]
        .as_array()
        .expect("the container has args")
        .iter()
        .map(|arg| arg.as_str().expect("every arg is a string"))
        .skip(1) // "serve"
        .filter(|arg| !arg.starts_with("--listen=") && !arg.starts_with("--probe-listen="))
        .map(|arg| match arg.split_once('=') {
            Some(("--tls-cert", _)) => format!("--tls-cert={}", local("tls.crt")),
            Some(("--tls-key", _)) => format!("--tls-key={}", local("tls.key")),
            Some(("--config", _)) => format!("--config={}", config.display()),
            Some(("--seal-key-file", _)) => format!("--seal-key-file={}", local("seal.key")),
            _ => arg.to_owned(),
        })
        .collect()
}

/// Starts `prestop-injector serve ARGS` on free loopback ports (ARGS must not set
/// --listen or --probe-listen) and waits, with a deadline, until /readyz answers 200.
pub fn start_server(args: &[String]) -> Server {
    start_server_with_env(args, &[])
}

/// [`start_server`] with `env` added to the server's environment.
pub fn start_server_with_env(args: &[String], env: &[(String, String)]) -> Server {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let (listen, probe) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .arg("serve")
        .args(args)
        .arg(format!("--listen=127.0.0.1:{listen}"))
        .arg(format!("--probe-listen=127.0.0.1:{probe}"))
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdout(std::process::Stdio::null())
        // A file, not a pipe: a full pipe nobody reads would stall the server.
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start prestop-injector serve");
    let mut server = Server {
        child,
        log,
        _dir: dir,
        listen,
        probe,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(&server.log).unwrap_or_default();
            panic!("serve {args:?} exited with {status} before becoming ready:\n{log}");
        }
        if http_status(probe, "/readyz").is_some_and(|line| line.contains(" 200")) {
            return server;
        }
        assert!(Instant::now() < deadline, "/readyz not 200 within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kinds that kubernetes-validate has no schema for (CRDs); asserted on by hand.
pub const NOT_VALIDATED: [(&str, &str); 3] = [
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
];
/// Custom resources whose CRD is vendored in tests/fixtures/crds (apiVersion, kind, file):
/// kubernetes-validate has no CRD schemas, so tests/support/validate_crd.py checks them
/// with its validator and its ObjectMeta, as strictly.
pub const VENDORED_CRDS: [(&str, &str, &str); 1] = [(
    "monitoring.coreos.com/v1",
    "PrometheusRule",
    "monitoring.coreos.com_prometheusrules.yaml",
)];

fn vendored_crd(object: &Value) -> Option<&'static str> {
    VENDORED_CRDS
        .iter()
        .find(|(api, kind, _)| object["apiVersion"] == *api && object["kind"] == *kind)
        .map(|(_, _, file)| *file)
}

/// Validates the objects that have a vendored CRD against it, for each version.
fn validate_custom(tool: &Path, label: &str, objects: &[Value], versions: &[&str]) {
    // kubernetes-validate's own interpreter, which has its package and jsonschema.
    let script = std::fs::read_to_string(tool).unwrap_or_default();
    let python = script
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("#!"))
        .map(|interpreter| interpreter.trim().to_owned())
        .filter(|interpreter| !interpreter.contains(' '))
        .unwrap_or_else(|| "python3".to_owned());
    for (_, _, file) in VENDORED_CRDS {
        let of_crd: Vec<&Value> = objects
            .iter()
            .filter(|o| vendored_crd(o) == Some(file))
            .collect();
        if of_crd.is_empty() {
            continue;
        }
        let text: String = of_crd
            .iter()
            .map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap()))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let resources = dir.path().join(format!("{label}-custom.yaml"));
        std::fs::write(&resources, text).unwrap();
        for version in versions {
            let output = Command::new(&python)
                .arg(repo_root().join("tests/support/validate_crd.py"))
                .arg(version)
                .arg(repo_root().join("tests/fixtures/crds").join(file))
                .arg(&resources)
                .output()
                .expect("run tests/support/validate_crd.py");
            let report = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            assert!(
                output.status.success(),
                "{label} ({version}) against {file}:\n{report}"
            );
            assert_eq!(
                report.matches("passed for resource").count(),
                of_crd.len(),
                "{label} ({version}):\n{report}"
            );
        }
    }
}

/// Oldest supported (matchConditions and the preStop sleep action are GA in 1.30); the
/// newest comes from the validator's own default.
pub const OLDEST_KUBERNETES: &str = "1.30.0";

pub fn validate(tool: &Path, label: &str, objects: &[Value]) {
    let mut text = String::new();
    for object in objects {
        let key = (
            object["apiVersion"].as_str().unwrap_or(""),
            object["kind"].as_str().unwrap_or(""),
        );
        if NOT_VALIDATED.contains(&key) || vendored_crd(object).is_some() {
            continue;
        }
        // JSON, which YAML 1.1 reads unchanged: serde_yaml leaves strings such as "off"
        // unquoted, and the validator's YAML 1.1 would read them as booleans.
        text.push_str("---\n");
        text.push_str(&serde_json::to_string(object).unwrap());
        text.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{label}.yaml"));
    std::fs::write(&file, text).unwrap();
    validate_custom(tool, label, objects, &[OLDEST_KUBERNETES, "1.37.0"]);
    for version in [Some(OLDEST_KUBERNETES), None] {
        let mut command = Command::new(tool);
        command.arg("--strict");
        if let Some(version) = version {
            command.args(["-k", version]);
        }
        let output = command
            .arg(&file)
            .output()
            .expect("run kubernetes-validate");
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let version = version.unwrap_or("newest");
        assert!(
            output.status.success(),
            "{label} fails strict validation for {version}:\n{report}"
        );
        // A kind without a schema is only a warning: make sure nothing went unchecked.
        assert!(
            !report.contains("Couldn't find schema"),
            "{label} ({version}): {report}"
        );
        let passed = report.matches("passed for resource").count();
        assert_eq!(
            passed,
            objects.len() - skipped(objects),
            "{label} ({version}):\n{report}"
        );
    }
}

pub fn skipped(objects: &[Value]) -> usize {
    objects
        .iter()
        .filter(|o| {
            NOT_VALIDATED.contains(&(
                o["apiVersion"].as_str().unwrap(),
                o["kind"].as_str().unwrap(),
            )) || vendored_crd(o).is_some()
        })
        .count()
}

/// Runs the `prestop-injector` binary built for these tests.
pub fn prestop_injector(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .args(args)
        .output()
        .expect("run prestop-injector")
}
