//! The core's invariants (docs/DESIGN.md: targets, grace period, responses), checked on one review.
//!
//! - never a panic: `admission::respond` turns a panic into `Outcome::Error`, and
//!   libFuzzer's panic hook aborts before that anyway;
//! - the response is a v1 AdmissionReview carrying the uid, `allowed` matches the
//!   decision and the base64 patch decodes to the decision's patch;
//! - the server path (`admission::review`, which skips parsing objects it cannot act on)
//!   decides exactly as the core does on the whole request;
//! - DELETE, CONNECT, sub-resources, unsupported kinds and `/validate` never get a patch;
//! - a denial carries no patch; warnings are at most `MAX_WARNING_CHARS` (256);
//! - the patch applies (json-patch, RFC 6902) and touches only the fields docs/DESIGN.md#responses
//!   lists;
//! - a second pass on the patched object yields neither a patch nor a denial;
//! - unknown fields survive: every leaf outside the fields we may rewrite is unchanged;
//! - the grace period is never lowered;
//! - every cleanup target we wrote is normalized, never `/`, and at or below a writable
//!   mount of the container that cleans it;
//! - every target is on a hostPath volume whose host path lies at or below an
//!   `allowedHostPathPrefixes` entry (none configured: no target at all; issue 17 class 5);
//! - no target has another volume at or below it (container side, mount paths read as
//!   the kubelet reads them; host side, any hostPath view of the pod), and no target's
//!   host path is inside or contains a protected path (`tests/support/safety_oracle.rs`).

use crate::safety_oracle::{self, SidecarMounts};
use prestop_injector::admission::{self, Operation, Outcome, Request};
use prestop_injector::config::Config;
use prestop_injector::mutation::hook::{sidecar_targets, Action, Hook, PROGRAM};
use prestop_injector::mutation::targets::{is_at_or_below, mounts, normalize};
use prestop_injector::mutation::scope::workload;
use prestop_injector::mutation::{decide, Decision, Endpoint};
use serde_json::Value;

pub const ENDPOINTS: [Endpoint; 3] = [Endpoint::Mutate, Endpoint::MutateAuto, Endpoint::Validate];

/// Runs one review body through the server path and the core and checks every invariant.
pub fn check_review(body: &[u8], endpoint: Endpoint, config: &Config) {
    let Ok(reviewed) = admission::review(body, endpoint, config) else {
        return;
    };
    assert_ne!(
        reviewed.outcome,
        Outcome::Error,
        "the core panicked; respond() answered 500"
    );
    check_response(&reviewed.body, &reviewed.request.uid, &reviewed.decision);
    // The whole request, objects included. It can only fail where `review` skipped an
    // object it did not need, which is not a fault.
    let Ok(whole) = admission::parse_request(body) else {
        return;
    };
    let decision = decide(&whole, endpoint, config);
    assert_eq!(
        reviewed.decision, decision,
        "admission::review decided differently from the core on the whole request"
    );
    check_decision(&whole, endpoint, config, &decision);
}

/// The serialized answer says what the decision says.
pub fn check_response(body: &[u8], uid: &str, decision: &Decision) {
    let response: Value = serde_json::from_slice(body).expect("the response is JSON");
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(
        response["response"]["uid"], uid,
        "the uid is carried through"
    );
    assert_eq!(
        response["response"]["allowed"],
        decision.denial.is_none(),
        "allowed matches the decision"
    );
    match &decision.patch {
        None => assert!(response["response"].get("patch").is_none()),
        Some(patch) => {
            use base64::Engine as _;
            assert_eq!(response["response"]["patchType"], "JSONPatch");
            let text = response["response"]["patch"]
                .as_str()
                .expect("patch is a string");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .expect("patch is base64");
            let decoded: Value = serde_json::from_slice(&bytes).expect("patch is JSON");
            assert_eq!(
                decoded,
                serde_json::to_value(patch).expect("patch serializes")
            );
        }
    }
}

/// Checks a decision on a whole request (objects parsed).
pub fn check_decision(request: &Request, endpoint: Endpoint, config: &Config, decision: &Decision) {
    for warning in &decision.warnings {
        assert!(
            warning.chars().count() <= prestop_injector::mutation::MAX_WARNING_CHARS,
            "warning over {} characters: {warning:?}",
            prestop_injector::mutation::MAX_WARNING_CHARS
        );
    }
    let Some(patch) = &decision.patch else {
        return;
    };
    assert!(decision.denial.is_none(), "a denial carries a patch");
    assert_ne!(endpoint, Endpoint::Validate, "/validate patched");
    assert!(
        !matches!(request.operation, Operation::Delete | Operation::Connect),
        "{} patched",
        request.operation.as_str()
    );
    assert!(
        request.sub_resource.as_deref().unwrap_or("").is_empty(),
        "a sub-resource was patched"
    );
    let workload = workload::find(&request.kind, request.operation)
        .expect("only supported kinds and operations are patched");
    // The core's own JSON model, as serde_json's: the oracles below read serde_json's.
    let object: Value = request
        .object
        .clone()
        .expect("a patch without an object")
        .into();
    let object = &object;

    let mut patched = object.clone();
    if let Err(error) = json_patch::patch(&mut patched, &patch.to_json_patch()) {
        panic!("the patch does not apply: {error}\npatch: {}", json(patch));
    }
    let template = workload.template;
    for operation in &patch.0 {
        let path = operation.path().to_string();
        assert!(
            allowed_path(&path, template, workload.job_spec),
            "the patch touches {path}, which docs/DESIGN.md#responses does not allow\npatch: {}",
            json(patch)
        );
    }

    let mut again = request.clone();
    again.object = Some(patched.clone().into());
    let second = decide(&again, endpoint, config);
    assert_eq!(
        second.patch,
        None,
        "second pass is not empty\nfirst patch: {}",
        json(patch)
    );
    assert_eq!(
        second.denial,
        None,
        "second pass denies what the first pass patched\nfirst patch: {}",
        json(patch)
    );

    check_preserved(object, &patched, template);
    let before = object.pointer(template).unwrap_or(&Value::Null);
    let after = patched.pointer(template).unwrap_or(&Value::Null);
    check_grace(before, after);
    check_targets(before, after);
    check_safety(after, config);
}

/// docs/DESIGN.md#targets (issue 17 class 5, issue 9 classes 1–3): every target's host path is at
/// or below an allowed prefix, no target has another volume at or below it in the container
/// that cleans it, no other hostPath view of the pod at or below its host path, and its
/// host path neither inside nor containing a protected path.
pub fn check_safety(template: &Value, config: &Config) {
    let protected: Vec<String> = config
        .protected_host_paths
        .iter()
        .filter_map(|p| normalize(p))
        .collect();
    let lists = safety_oracle::Lists {
        protected: &protected,
        allowed: &config.allowed_host_path_prefixes,
    };
    let spec = template.get("spec").unwrap_or(&Value::Null);
    // The sidecar's own merged list (class 4) is checked once the sidecar branch lands:
    // then use `SidecarMounts::Own`.
    let violations = safety_oracle::violations(spec, lists, SidecarMounts::SourceContainer);
    assert!(
        violations.is_empty(),
        "docs/DESIGN.md#targets violated: {violations:?}\nin {template}"
    );
}

fn json(patch: &prestop_injector::json::patch::Patch) -> String {
    serde_json::to_string(patch).unwrap_or_default()
}

/// docs/DESIGN.md#responses: targeted operations only.
pub fn allowed_path(path: &str, template: &str, job_spec: Option<&str>) -> bool {
    if job_spec.is_some_and(|spec| path == format!("{spec}/ttlSecondsAfterFinished")) {
        return true;
    }
    let Some(rest) = path
        .strip_prefix(template)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return false;
    };
    if rest == "spec/terminationGracePeriodSeconds"
        || rest == "metadata"
        || rest == "metadata/annotations"
        || rest == "metadata/annotations/prestop-injector.io~1status"
        // The workload's settings record (docs/DESIGN.md#annotations, the Pod-level pass), also
        // ours.
        || rest == "metadata/annotations/prestop-injector.io~1settings"
        // The reaper's: the seal, and the targets left to it (docs/REAPER.md#what-it-empties).
        || rest == "metadata/annotations/prestop-injector.io~1seal"
        || rest == "metadata/annotations/prestop-injector.io~1reap"
        || rest == "spec/initContainers"
        || rest.starts_with("spec/initContainers/")
        || list_entry(rest, "spec/volumes")
    {
        return true;
    }
    let Some(rest) = rest.strip_prefix("spec/containers/") else {
        return false;
    };
    let Some((index, field)) = rest.split_once('/') else {
        return false;
    };
    index.bytes().all(|b| b.is_ascii_digit()) && rewritable(field)
}

/// Fields of a container the core may rewrite: the hook, and argv of the shell fix
/// (`command` followed by `args`: without a command, `args[0]` is the program).
fn rewritable(field: &str) -> bool {
    let argv_entry = |list: &str| {
        field
            .strip_prefix(list)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|index| index.bytes().all(|b| b.is_ascii_digit()))
    };
    field == "lifecycle"
        || field == "lifecycle/preStop"
        || field.starts_with("lifecycle/preStop/")
        || argv_entry("command")
        || argv_entry("args")
        || exec_command(field)
        || list_entry(field, "volumeMounts")
}

/// The list itself (added when absent) or one whole element: the cleaner program's volume
/// and read-only mount are appended and removed as a whole
/// (docs/DESIGN.md#the-hook-and-the-cleaner-program).
fn list_entry(field: &str, list: &str) -> bool {
    let index = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    field
        .strip_prefix(list)
        .is_some_and(|rest| rest.is_empty() || rest.strip_prefix('/').is_some_and(index))
}

/// `…/exec/command` or an element of it (probes and lifecycle handlers,
/// docs/DESIGN.md#the-shell-fix).
fn exec_command(field: &str) -> bool {
    field.ends_with("/exec/command")
        || field
            .rsplit_once("/exec/command/")
            .is_some_and(|(_, index)| index.bytes().all(|b| b.is_ascii_digit()))
}

/// Unknown fields survive: every leaf of the original outside the rewritable fields is
/// unchanged in the patched object. Containers are matched by index (we never add or
/// remove app containers), init containers by name (ours is added, moved or removed).
pub fn check_preserved(original: &Value, patched: &Value, template: &str) {
    let mut leaves = Vec::new();
    flatten(original, String::new(), &mut leaves);
    let init_prefix = format!("{template}/spec/initContainers");
    let containers_prefix = format!("{template}/spec/containers/");
    for (pointer, value) in leaves {
        if pointer == format!("{template}/spec/terminationGracePeriodSeconds")
            || pointer.starts_with(&format!(
                "{template}/metadata/annotations/prestop-injector.io~1status"
            ))
            || pointer.ends_with("/ttlSecondsAfterFinished")
            || pointer == init_prefix
            || pointer.starts_with(&format!("{init_prefix}/"))
        {
            continue;
        }
        if grows(value) {
            continue;
        }
        if let Some(rest) = pointer.strip_prefix(&containers_prefix) {
            if rest
                .split_once('/')
                .is_some_and(|(_, field)| rewritable(field))
            {
                continue;
            }
        }
        assert_eq!(
            patched.pointer(&pointer),
            Some(value),
            "field {pointer} changed or vanished"
        );
    }
    let init = |object: &Value| -> Vec<Value> {
        object
            .pointer(&init_prefix)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (init(original), init(patched));
    for container in &before {
        if is_our_sidecar(container) {
            continue;
        }
        let Some(name) = container.get("name").and_then(Value::as_str) else {
            continue;
        };
        let named = |c: &&Value| c.get("name").and_then(Value::as_str) == Some(name);
        if before.iter().filter(named).count() != 1 {
            continue;
        }
        let Some(now) = after.iter().find(named) else {
            panic!("init container {name:?} vanished");
        };
        let mut leaves = Vec::new();
        flatten(container, String::new(), &mut leaves);
        for (pointer, value) in leaves {
            if grows(value) || rewritable(pointer.trim_start_matches('/')) {
                continue;
            }
            assert_eq!(
                now.pointer(&pointer),
                Some(value),
                "field {pointer} of init container {name:?} changed or vanished"
            );
        }
    }
}

/// `null`, `{}` and `[]` may gain members; what is added is checked by [`allowed_path`].
fn grows(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(list) => list.is_empty(),
        _ => false,
    }
}

fn is_our_sidecar(container: &Value) -> bool {
    argv(container.get("command")).is_some_and(|argv| sidecar_targets(&argv).is_some())
}

/// Scalars and empty containers, with their JSON Pointers.
fn flatten<'a>(value: &'a Value, pointer: String, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                flatten(value, format!("{pointer}/{escaped}"), out);
            }
        }
        Value::Array(list) if !list.is_empty() => {
            for (index, value) in list.iter().enumerate() {
                flatten(value, format!("{pointer}/{index}"), out);
            }
        }
        _ => out.push((pointer, value)),
    }
}

/// docs/DESIGN.md#grace-period: never lowered (an absent value means the API server's default, 30).
pub fn check_grace(before: &Value, after: &Value) {
    let grace = |template: &Value| {
        template
            .pointer("/spec/terminationGracePeriodSeconds")
            .cloned()
    };
    let (old, new) = (grace(before), grace(after));
    let old = match old {
        None | Some(Value::Null) => 30,
        Some(value) => match value.as_u64() {
            Some(seconds) => seconds,
            None => return,
        },
    };
    let new = match new {
        None | Some(Value::Null) => 30,
        Some(value) => value
            .as_u64()
            .unwrap_or_else(|| panic!("grace period became {value}")),
    };
    assert!(new >= old, "grace period lowered from {old} to {new}");
}

fn argv(value: Option<&Value>) -> Option<Vec<String>> {
    value?
        .as_array()?
        .iter()
        .map(|a| a.as_str().map(str::to_owned))
        .collect()
}

/// docs/DESIGN.md#targets: the targets of every hook or sidecar we wrote.
pub fn check_targets(before: &Value, after: &Value) {
    let list = |template: &Value, field: &str| -> Vec<Value> {
        template
            .pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let writable = |container: &Value, target: &str| {
        mounts(&container.clone().into())
            .iter()
            .any(|m| m.writable && is_at_or_below(target, &m.path))
    };
    let check = |target: &str, what: &str| {
        assert_ne!(target, "/", "{what} cleans /");
        assert_eq!(
            normalize(target).as_deref(),
            Some(target),
            "{what} target {target:?} is not normalized"
        );
    };
    let containers = list(after, "containers");
    let old_containers = list(before, "containers");
    for (index, container) in containers.iter().enumerate() {
        let hook = container.pointer("/lifecycle/preStop");
        if hook
            == old_containers
                .get(index)
                .and_then(|c| c.pointer("/lifecycle/preStop"))
        {
            continue;
        }
        let command = argv(container.pointer("/lifecycle/preStop/exec/command"));
        // Only the program checks identity at run time; the shell-mode hook has no --host.
        let program = command
            .as_ref()
            .is_some_and(|argv| argv.first().map(String::as_str) == Some(PROGRAM));
        let hook = command.and_then(|argv| Hook::from_argv(&argv));
        if let Some(Hook {
            action: Action::Cleanup(targets),
            ..
        }) = hook
        {
            assert!(!targets.is_empty(), "a cleanup hook without targets");
            for target in targets {
                // The expected host path the program checks at run time is the one the
                // rule computed: never absent from what the webhook renders.
                assert!(
                    !program || target.host.is_some(),
                    "preStop target {} carries no expected host path",
                    target.path
                );
                let target = target.path;
                check(&target, "preStop");
                assert!(
                    writable(container, &target),
                    "preStop target {target} is not under a writable mount of {container}"
                );
            }
        }
    }
    let old_init = list(before, "initContainers");
    for init in list(after, "initContainers") {
        if old_init.contains(&init) {
            continue;
        }
        let Some(targets) = argv(init.get("command")).and_then(|argv| sidecar_targets(&argv))
        else {
            continue;
        };
        for target in targets {
            check(&target, "sidecar");
            assert!(
                writable(&init, &target),
                "sidecar target {target} is not under one of its own writable mounts"
            );
            assert!(
                containers.iter().any(|c| writable(c, &target)),
                "sidecar target {target} is not under a writable mount of any app container"
            );
        }
    }
}
