//! Structure-aware inputs: a workload of any supported kind whose pod template is built
//! from `arbitrary` choices — containers, mounts, hostPath volumes, existing hooks, our
//! annotations with valid and malformed values — optionally on top of a real manifest from
//! the seed corpus. Strings mostly come from small tables of values the core treats
//! specially, and sometimes are free text, so the fuzzer reaches deep branches quickly.

use arbitrary::{Arbitrary, Result, Unstructured};
use prestop_injector::admission::Operation;
use prestop_injector::config::{Config, Mode};
use prestop_injector::mutation::Endpoint;
use serde_json::{json, Map, Value};

/// Real objects (from the committed seed reviews) whose pod templates serve as bases.
const BASES: &[&str] = &[
    include_str!("../corpus/review_bytes/seed-review-job-worker.json"),
    include_str!("../corpus/review_bytes/seed-cronjob-cleanup.json"),
    include_str!("../corpus/review_bytes/seed-pod-bare.json"),
    include_str!("../corpus/review_bytes/seed-job-unknown-fields.json"),
    include_str!("../corpus/review_bytes/seed-deployment-sleep70.json"),
    include_str!("../corpus/review_bytes/seed-job-unannotated-hostpath.json"),
];

const KINDS: &[(&str, &str, &str)] = &[
    ("batch", "Job", "/spec/template"),
    ("batch", "CronJob", "/spec/jobTemplate/spec/template"),
    ("", "Pod", ""),
    ("apps", "Deployment", "/spec/template"),
    ("apps", "StatefulSet", "/spec/template"),
    ("apps", "DaemonSet", "/spec/template"),
    ("apps", "ReplicaSet", "/spec/template"),
    ("", "ConfigMap", ""),
];

const NAMES: &[&str] = &["app", "c1", "c2", "prestop-cleanup", "", "a b", "sidecar"];
const IMAGES: &[&str] = &[
    "busybox:1.36",
    "alpine:3.20",
    "nginx:1.27",
    "python:3.12-alpine",
    "gcr.io/distroless/static-debian12",
    "scratch",
    "registry.local:5000/team/busybox@sha256:abc",
    "",
];
const MOUNT_PATHS: &[&str] = &[
    "/scratch",
    "/data",
    "data",
    "/data/.",
    "data/sub/",
    "/data/keep",
    "/models",
    "/data/sub",
    "/cache",
    "/",
    "/scratch/",
    "//data",
    "/data/../etc",
    "relative",
    "/work dir",
    "/-rf",
    "/a\nb",
];
const HOST_PATHS: &[&str] = &[
    "/mnt/a",
    "/mnt/a/b",
    "/mnt",
    "/data",
    "/data/keep",
    "/var/lib/etcd",
    "/tmp",
    "/etc",
    "/var/lib/x",
    "/",
    "/tmp/y",
    "/var/lib/kubelet/z",
    "/mnt/a/",
    "/lib64",
    "/var/log",
    "relative",
    "/home/u",
];
const SUB_PATHS: &[&str] = &["sub", "keep", "b/c/", "", "/abs", "x/../..", "./"];
const SUB_PATH_EXPRS: &[&str] = &["$(POD_NAME)", "$(EMPTY)", "pods/$(POD_NAME)", "$(UNSET)"];
const HOST_TYPES: &[&str] = &["", "Directory", "DirectoryOrCreate", "File", "Socket"];
const ARGV: &[&str] = &[
    "bash",
    "/bin/bash",
    "sh",
    "/usr/bin/env",
    "-c",
    "echo hi",
    "sleep 5",
    "a=(1 2)",
    "cat <<< x",
    "sleep 3; sleep 4",
    "rm -rf /data/*",
    "prestop-injector",
    "",
];
const KEYS: &[&str] = &[
    "prestop-injector.io/cleanup",
    "prestop-injector.io/command",
    "prestop-injector.io/containers",
    "prestop-injector.io/hook-seconds",
    "prestop-injector.io/shutdown-seconds",
    "prestop-injector.io/shell",
    "prestop-injector.io/fix-shell",
    "prestop-injector.io/mode",
    "prestop-injector.io/ttl-after-finished",
    "prestop-injector.io/inject",
    "prestop-injector.io/status",
    "prestop-injector.io/unknown",
    "example.com/other",
];
const VALUES: &[&str] = &[
    "auto",
    "off",
    "/scratch",
    "/data/x",
    "/cache",
    "/scratch,/data",
    "/",
    "relative",
    "/a/../b",
    "/data//x",
    "/data/",
    "exec",
    "sidecar",
    "5",
    "70s",
    "2m",
    "1m30s",
    "2h",
    "99999999999",
    "0",
    "-1",
    "x",
    "true",
    "false",
    "app",
    "c1,c2",
    "c9",
    "/bin/sh",
    "/bin/bash",
    "bash",
    "sleep 2; echo bye",
    "",
    "10m",
    "{\"version\":1,\"containers\":[\"app\"],\"grace\":40}",
];

fn pick<'a>(u: &mut Unstructured, table: &[&'a str]) -> Result<&'a str> {
    u.choose(table).copied()
}

/// A string from `table` most of the time, free text sometimes.
fn text(u: &mut Unstructured, table: &[&str]) -> Result<Value> {
    Ok(match u.int_in_range(0..=9u8)? {
        0 => Value::String(String::arbitrary(u)?),
        1 => scalar(u)?,
        _ => Value::String(pick(u, table)?.to_owned()),
    })
}

/// A JSON scalar of any type: ill-typed fields must not panic the core.
fn scalar(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=4u8)? {
        0 => Value::Null,
        1 => Value::Bool(bool::arbitrary(u)?),
        2 => json!(i64::arbitrary(u)?),
        3 => json!(f64::arbitrary(u)?.clamp(-1e300, 1e300)),
        _ => json!(u64::arbitrary(u)?),
    })
}

fn list<T>(
    u: &mut Unstructured,
    max: usize,
    mut item: impl FnMut(&mut Unstructured) -> Result<T>,
) -> Result<Vec<T>> {
    let n = u.int_in_range(0..=max)?;
    (0..n).map(|_| item(u)).collect()
}

fn argv(u: &mut Unstructured) -> Result<Value> {
    Ok(Value::Array(list(u, 4, |u| text(u, ARGV))?))
}

fn lifecycle(u: &mut Unstructured) -> Result<Value> {
    Ok(match u.int_in_range(0..=8u8)? {
        0 => json!({"preStop": {"exec": {"command": argv(u)?}}}),
        1 => json!({"preStop": {"sleep": {"seconds": u.int_in_range(0..=4000i64)?}}}),
        2 => json!({"preStop": {"httpGet": {"path": "/stop", "port": 80}}}),
        3 => json!({"preStop": {"tcpSocket": {"port": 80}}}),
        4 => json!({"preStop": {}}),
        5 => json!({"postStart": {"exec": {"command": argv(u)?}}, "xFutureLifecycle": 1}),
        6 => json!({"preStop": {"futureHandler": {"x": 1}}}),
        7 => json!({"preStop": {"exec": {"command": argv(u)?}, "sleep": {"seconds": 3}}}),
        _ => scalar(u)?,
    })
}

fn container(u: &mut Unstructured, volumes: usize) -> Result<Value> {
    let mut c = Map::new();
    c.insert("name".into(), text(u, NAMES)?);
    c.insert("image".into(), text(u, IMAGES)?);
    if bool::arbitrary(u)? {
        c.insert("command".into(), argv(u)?);
    }
    if bool::arbitrary(u)? {
        c.insert("args".into(), argv(u)?);
    }
    if bool::arbitrary(u)? {
        c.insert("lifecycle".into(), lifecycle(u)?);
    }
    if u.ratio(1, 4)? {
        c.insert(
            "readinessProbe".into(),
            json!({"exec": {"command": argv(u)?}, "periodSeconds": 5}),
        );
    }
    let mounts = list(u, 4, |u| {
        let mut m = Map::new();
        let volume = u.int_in_range(0..=volumes)?;
        m.insert("name".into(), json!(format!("v{volume}")));
        m.insert("mountPath".into(), text(u, MOUNT_PATHS)?);
        match u.int_in_range(0..=4u8)? {
            0 => {}
            1 => {
                m.insert("readOnly".into(), json!(true));
            }
            2 => {
                m.insert("readOnly".into(), json!(false));
            }
            3 => {
                m.insert("subPath".into(), text(u, SUB_PATHS)?);
            }
            _ => {
                m.insert("subPathExpr".into(), text(u, SUB_PATH_EXPRS)?);
            }
        }
        if u.ratio(1, 3)? {
            m.insert("readOnly".into(), json!(true));
        }
        Ok(Value::Object(m))
    })?;
    c.insert("volumeMounts".into(), Value::Array(mounts));
    if u.ratio(1, 2)? {
        c.insert(
            "env".into(),
            json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                   {"name": "EMPTY", "value": ""}]),
        );
    }
    if u.ratio(1, 3)? {
        c.insert(
            "securityContext".into(),
            json!({"runAsUser": u.int_in_range(0..=70000i64)?, "runAsGroup": 1000}),
        );
    }
    c.insert("xFuture".into(), json!(u32::arbitrary(u)?));
    Ok(Value::Object(c))
}

fn volume(u: &mut Unstructured, index: usize) -> Result<Value> {
    let name = json!(format!("v{index}"));
    Ok(match u.int_in_range(0..=4u8)? {
        0 | 1 => {
            json!({"name": name, "hostPath": {"path": text(u, HOST_PATHS)?, "type": text(u, HOST_TYPES)?}})
        }
        2 => json!({"name": name, "hostPath": {"path": text(u, HOST_PATHS)?}}),
        3 => json!({"name": name, "emptyDir": {}}),
        _ => json!({"name": name, "configMap": {"name": "cm"}}),
    })
}

fn annotations(u: &mut Unstructured) -> Result<Value> {
    let mut map = Map::new();
    for _ in 0..u.int_in_range(0..=4u8)? {
        let key = pick(u, KEYS)?.to_owned();
        map.insert(key, text(u, VALUES)?);
    }
    Ok(Value::Object(map))
}

/// One generated case: the request, the endpoint it came to and the configuration.
#[derive(Debug)]
pub struct Case {
    pub group: &'static str,
    pub kind: &'static str,
    pub operation: Operation,
    pub sub_resource: Option<&'static str>,
    pub endpoint: Endpoint,
    pub config: Config,
    pub object: Value,
}

impl Case {
    /// The AdmissionReview the API server would send for this case.
    pub fn review(&self) -> Vec<u8> {
        let mut request = json!({
            "uid": "fuzz-0000",
            "kind": {"group": self.group, "version": "v1", "kind": self.kind},
            "namespace": "default",
            "operation": self.operation.as_str(),
            "object": self.object,
            "dryRun": false,
        });
        if let Some(sub) = self.sub_resource {
            request["subResource"] = json!(sub);
        }
        if self.operation == Operation::Delete {
            request["oldObject"] = request["object"].take();
            request["options"] = json!({"propagationPolicy": "Orphan"});
        }
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
            .unwrap_or_default()
    }
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Case> {
        let (group, kind, template_at) = *u.choose(KINDS)?;
        let operation = match u.int_in_range(0..=9u8)? {
            0 => Operation::Update,
            1 => Operation::Delete,
            2 => Operation::Connect,
            _ => Operation::Create,
        };
        let sub_resource = u.ratio(1, 20)?.then_some("status");
        let endpoint = match u.int_in_range(0..=6u8)? {
            0 => Endpoint::Validate,
            1..=3 => Endpoint::Mutate,
            _ => Endpoint::MutateAuto,
        };
        let mut config = Config::default();
        config.sidecar.allowed = bool::arbitrary(u)?;
        if u.ratio(1, 4)? {
            config.default_mode = Mode::Sidecar;
        }
        if u.ratio(1, 4)? {
            config.max_grace_seconds = u.int_in_range(0..=600)?;
        }
        // None (the shipped default: nothing may be cleaned), the generator's scratch
        // directories, or prefixes wider than the config file accepts ("/", "/mnt"): then
        // the protected list alone must hold.
        config.allowed_host_path_prefixes = match u.int_in_range(0..=4u8)? {
            0 => vec![],
            1 => vec!["/mnt".to_owned()],
            2 => vec!["/mnt/a".to_owned(), "/data/".to_owned()],
            3 => vec!["/".to_owned()],
            _ => vec![
                "/tmp/y".to_owned(),
                "/data".to_owned(),
                "/var/lib/x".to_owned(),
            ],
        };
        if u.ratio(1, 3)? {
            config.protected_host_paths =
                vec![pick(u, &["/data/keep", "/mnt/a/b/", "/tmp/y"])?.to_owned()];
        }

        // The pod template: a real one, or an empty skeleton, plus generated parts.
        let mut template = match u.int_in_range(0..=BASES.len() * 2)? {
            i if i < BASES.len() => base_template(BASES[i]),
            _ => json!({"metadata": {}, "spec": {"restartPolicy": "Never"}}),
        };
        if !template.is_object() {
            template = json!({});
        }
        let volumes = u.int_in_range(0..=4usize)?;
        if let Some(t) = template.as_object_mut() {
            t.entry("spec").or_insert(json!({}));
        }
        let extra_containers = list(u, 3, |u| container(u, volumes))?;
        // A user's init container may take our sidecar's name: it must be left alone
        // (tests/regressions.rs `user_init_container_named_like_our_sidecar_is_not_overwritten`).
        let extra_init = list(u, 1, |u| container(u, volumes))?;
        let extra_volumes: Vec<Value> =
            (0..volumes).map(|i| volume(u, i)).collect::<Result<_>>()?;
        if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
            append(spec, "containers", extra_containers);
            append(spec, "initContainers", extra_init);
            append(spec, "volumes", extra_volumes);
            if u.ratio(1, 3)? {
                spec.insert(
                    "terminationGracePeriodSeconds".into(),
                    match u.int_in_range(0..=3u8)? {
                        0 => scalar(u)?,
                        _ => json!(u.int_in_range(0..=5000u64)?),
                    },
                );
            }
            spec.insert("xFutureSpec".into(), json!({"a": [1]}));
        }
        let template_annotations = annotations(u)?;
        merge_annotations(&mut template, template_annotations);

        let mut object = if template_at.is_empty() {
            let mut pod = template;
            pod["apiVersion"] = json!("v1");
            pod["kind"] = json!(kind);
            pod
        } else {
            let mut object = json!({"apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": "fuzz"}});
            let mut spec = json!({"template": template, "selector": {"matchLabels": {"a": "b"}}});
            if kind == "CronJob" {
                spec = json!({"schedule": "* * * * *", "jobTemplate": {"spec": {"template": spec["template"].take()}}});
            }
            object["spec"] = spec;
            object
        };
        let object_annotations = annotations(u)?;
        merge_annotations(&mut object, object_annotations);
        if u.ratio(1, 4)? {
            let at = if kind == "CronJob" {
                "/spec/jobTemplate/spec"
            } else {
                "/spec"
            };
            if let Some(spec) = object.pointer_mut(at).and_then(Value::as_object_mut) {
                spec.insert(
                    "ttlSecondsAfterFinished".into(),
                    json!(u.int_in_range(0..=100u64)?),
                );
            }
        }
        object["xFutureTop"] = json!(true);
        Ok(Case {
            group,
            kind,
            operation,
            sub_resource,
            endpoint,
            config,
            object,
        })
    }
}

fn base_template(review: &str) -> Value {
    let review: Value = serde_json::from_str(review).unwrap_or_default();
    let object = &review["request"]["object"];
    for at in ["/spec/template", "/spec/jobTemplate/spec/template"] {
        if let Some(template) = object.pointer(at) {
            return template.clone();
        }
    }
    json!({"metadata": object.get("metadata").cloned().unwrap_or(json!({})), "spec": object.get("spec").cloned().unwrap_or(json!({}))})
}

fn append(spec: &mut Map<String, Value>, field: &str, extra: Vec<Value>) {
    if extra.is_empty() {
        return;
    }
    match spec.entry(field).or_insert(json!([])) {
        Value::Array(list) => list.extend(extra),
        other => *other = Value::Array(extra),
    }
}

fn merge_annotations(object: &mut Value, extra: Value) {
    let Value::Object(extra) = extra else { return };
    if extra.is_empty() {
        return;
    }
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object.entry("metadata").or_insert(json!({}));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    match metadata.entry("annotations").or_insert(json!({})) {
        Value::Object(map) => map.extend(extra),
        other => *other = Value::Object(extra),
    }
}
