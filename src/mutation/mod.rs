//! The mutation core: one AdmissionRequest in, a [`Decision`] out.
//!
//! Contract:
//! - Pure and synchronous: no I/O, no clock, no globals. The server and the offline CLI
//!   call the same [`decide`].
//! - The object is mutated as a `crate::json::Value` and the patch is the diff of the value
//!   before and after, so fields our types don't know survive untouched and an unchanged
//!   object yields no patch at all.
//! - Idempotent: deciding again on the patched object yields no patch (our own hooks are
//!   recognised and rebuilt, never wrapped twice).
//! - Never patches DELETE, CONNECT, sub-resources or kinds outside docs/DESIGN.md#scope.
//! - What a controller creates from a template (Pods, a Deployment's ReplicaSets, a
//!   CronJob's Jobs) is decided from the settings recorded on that template, never
//!   re-decided from what it carries; unrecorded, it is left alone (see `record`).
//! - On `/mutate/auto` without a cleanup annotation, only provably private, per-pod
//!   directories are cleaned (see `sharing`); an exec-hook cleanup goes only where the
//!   kubelet cannot start the container again in its pod (see `restarts`) and no other
//!   container of the pod still uses the directory (`sharing::still_used_by`).
//! - A pod template for Windows nodes only is left alone, with one warning (see `os`).
//! - A template whose cleanup we inject is sealed for its namespace (see `seal`), so that
//!   the reaper can tell our cleanup from a copy; without a key nothing is sealed.
//! - Malformed annotations are denied with a sentence that names the annotation, the bad
//!   value and the accepted forms.

use crate::config::Config;
use crate::json::patch::{AddOperation, PatchOperation};
use crate::json::{Map, Value};
use inject::delivery;
use record::Recorded;
use scope::{gates, os, record, settings, workload};
use settings::{Annotations, BadAnnotation, SETTINGS, STATUS};
use targets::sharing;
use workload::Workload;

// The pipeline, in the order a review meets it: `scope` (is the object ours to change,
// and with which settings), `targets` (which directories), `hook` (the preStop command we
// write and recognise), `inject` (how the cleanup reaches the pod: the installer or the
// sidecar), `shell_fix` (bash in images without it), `grace` (the termination grace
// period). `pod` runs them on one pod template; `orphan` is the `/validate` guard.
mod containers;
mod grace;
pub mod hook;
pub mod inject;
mod object_text;
mod orphan;
mod pod;
mod request;
pub mod scope;
pub mod seal;
pub mod shell_fix;
pub mod targets;
mod warning;

pub use grace::DEFAULT_GRACE_SECONDS;
pub use inject::sidecar::NAME as SIDECAR_NAME;
pub use orphan::MESSAGE as ORPHAN_DELETE_MESSAGE;
pub use request::{GroupVersionKind, Operation, Request};

/// Which URL the review came to; decides the default scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/mutate`: only objects that carry a `prestop-injector.io/` annotation.
    Mutate,
    /// `/mutate/auto`: every object of a supported kind; cleanup defaults to `auto`.
    MutateAuto,
    /// `/validate`: the orphan-delete guard.
    Validate,
}

impl Endpoint {
    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::MutateAuto => "mutate_auto",
            Endpoint::Validate => "validate",
        }
    }
}

/// A refusal the user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// HTTP-style code carried in `status.code`.
    pub code: u16,
    /// Short machine label for metrics, e.g. `bad_annotation`.
    pub reason: &'static str,
    /// The sentence shown to the user.
    pub message: String,
}

/// What the webhook answers: allow (with an optional patch) or deny, plus warnings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// RFC 6902 operations; `None` when nothing changes.
    pub patch: Option<crate::json::patch::Patch>,
    pub warnings: Vec<String>,
    /// `Some` when the request is refused.
    pub denial: Option<Denial>,
}

impl Decision {
    pub fn allow() -> Decision {
        Decision::default()
    }

    pub fn deny(denial: Denial) -> Decision {
        Decision {
            denial: Some(denial),
            ..Decision::default()
        }
    }
}

/// Decides one admission request.
pub fn decide(request: &Request, endpoint: Endpoint, config: &Config) -> Decision {
    if endpoint == Endpoint::Validate {
        return orphan::check(request, config);
    }
    if request
        .sub_resource
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        return Decision::allow();
    }
    let (Some(workload), Some(object)) = (
        workload::find(&request.kind, request.operation),
        &request.object,
    ) else {
        return Decision::allow();
    };
    let template = if workload.template.is_empty() {
        Some(object)
    } else {
        object.pointer(workload.template)
    };
    let annotations = Annotations::new(Some(object), template);
    let refuse = |bad: BadAnnotation| {
        Decision::deny(Denial {
            code: 400,
            reason: "bad_annotation",
            message: format!("{} {}: {bad}", request.kind.kind, describe(request, object)),
        })
    };
    let kind = workload.kind;
    let derived = record::is_derived(kind, object);
    // Opted out: no patch, not even a record. What its controller makes from the
    // template is unrecorded, so it is left alone too (below), and an opted-out
    // Deployment never rolls out because of us.
    match annotations.opted_out() {
        Err(bad) => return refuse(bad),
        Ok(true) => return Decision::allow(),
        Ok(false) => {}
    }
    // A Pod carries its template's record even when a copy of it has lost its owner.
    let recorded = if derived || kind == "Pod" {
        match record::read(annotations_at(template), config) {
            Ok(recorded) => recorded,
            Err(bad) => return refuse(bad),
        }
    } else {
        None
    };
    let mut warnings = Vec::new();
    let (settings, records) = match recorded {
        Some(Recorded::OptedOut) => return Decision::allow(),
        Some(Recorded::UnknownVersion(version)) => {
            return Decision {
                warnings: vec![format!(
                    "{SETTINGS} version {version} is not known to this injector; left unchanged"
                )],
                ..Decision::allow()
            }
        }
        Some(Recorded::Settings(settings)) => (settings, false),
        // Made from a template we mutate but never recorded: the workload's decision is
        // unknown (it predates the injector, or was left alone), so is ours.
        None if derived => return Decision::allow(),
        None => {
            if endpoint == Endpoint::Mutate && !annotations.requests_injection() {
                return Decision::allow();
            }
            let mut settings = match annotations.settings(endpoint, config) {
                Ok(settings) => settings,
                Err(bad) => return refuse(bad),
            };
            // Only the user's own annotation is refused; a record saying `sidecar` (or
            // `defaultMode: sidecar`) falls back to exec with a warning, in `pod`.
            if let (Ok(Some("sidecar")), Some(sentence)) = (
                annotations.get(settings::MODE),
                gates::sidecar_denial(config),
            ) {
                return refuse(BadAnnotation::new(settings::MODE, "sidecar", sentence));
            }
            sharing::apply(&mut settings, sharing::shared_by(kind, object));
            (settings, kind != "Pod")
        }
    };

    // Everything we inject is for Linux nodes: a Windows pod is left alone, said once.
    if let Some(why) = template
        .and_then(|t| t.get("spec"))
        .and_then(os::windows_only)
    {
        return Decision {
            warnings: vec![shorten(format!(
                "left unchanged: a Windows pod ({why}); the cleanup and shell fix are Linux only"
            ))],
            ..Decision::allow()
        };
    }
    // The API server refuses these; the offline CLI may be given one. A list that is not
    // one would take the program's installer or the sidecar nowhere, half a cleanup.
    if let Some(field) = template.and_then(|t| t.get("spec")).and_then(not_a_list) {
        return Decision {
            warnings: vec![format!(
                "left unchanged: spec.{field} of the pod template is not a list"
            )],
            ..Decision::allow()
        };
    }
    let mutated = patch_template(workload, template, |template, original| {
        // Only an injected template is recorded: what a controller makes from any other
        // template is left alone as unrecorded, which is what the workload got too.
        let found = pod::mutate(template, original, &settings, config)?;
        if records {
            let injected = annotations_at(Some(template)).is_some_and(|a| a.contains_key(STATUS));
            set_annotation(
                template,
                SETTINGS,
                injected.then(|| record::render(&settings)),
            );
        }
        let sealed = seal::wanted(template, namespace_of(request, object), config);
        set_annotation(template, seal::SEAL, sealed);
        Ok(found)
    });
    let mut operations = match mutated {
        Ok((operations, found)) => {
            warnings.extend(found);
            operations
        }
        Err(bad) => return refuse(bad),
    };
    if let Some(seconds) = settings.ttl_after_finished {
        match workload
            .job_spec
            .map(|pointer| (pointer, object.pointer(pointer).and_then(Value::as_object)))
        {
            // A single scalar added where it is absent: the one operation a diff would give.
            Some((pointer, Some(job_spec)))
                if job_spec
                    .get("ttlSecondsAfterFinished")
                    .is_none_or(Value::is_null) =>
            {
                operations.push(PatchOperation::Add(AddOperation {
                    path: format!("{pointer}/ttlSecondsAfterFinished"),
                    value: Value::from(seconds),
                }));
            }
            Some(_) => {}
            None if workload.kind != "Pod" => warnings.push(format!(
                "{} ignored: it applies to Jobs and CronJobs only",
                settings::TTL_AFTER_FINISHED
            )),
            None => {}
        }
    }
    if derived && operations.is_empty() {
        // Said once, to whoever applied the workload; a controller only logs them, for
        // every pod it creates.
        warnings.clear();
    }
    let patch = crate::json::patch::Patch(operations);
    Decision {
        patch: (!patch.0.is_empty()).then_some(patch),
        warnings: warnings.into_iter().map(shorten).collect(),
        denial: None,
    }
}

/// Mutates a copy of the pod template only — the rest of the object (metadata with its
/// managedFields is often the larger half) is never touched by the feature — and returns
/// the diff as operations on the whole object, plus the warnings.
fn patch_template(
    workload: &Workload,
    template: Option<&Value>,
    mutate: impl FnOnce(&mut Value, &Value) -> Result<Vec<String>, BadAnnotation>,
) -> Result<(Vec<PatchOperation>, Vec<String>), BadAnnotation> {
    let Some(original) = template else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut mutated = original.clone();
    let warnings = mutate(&mut mutated, original)?;
    // A pass that changed nothing (every Pod made from a template we injected) has
    // nothing to diff: its copy is the original, member for member, in order. Told
    // without the diff's pointers and its copy of the init containers: ~60 k
    // instructions of such a Pod's review.
    if crate::json_diff::same_in_order(original, &mutated) {
        return Ok((Vec::new(), warnings));
    }
    let operations = delivery::diff(workload.template, original, &mut mutated);
    Ok((operations, warnings))
}

/// The first of the pod spec's lists the core writes to that is there but not a list.
fn not_a_list(spec: &Value) -> Option<&'static str> {
    ["initContainers", "containers", "volumes"]
        .into_iter()
        .find(|field| {
            spec.get(field)
                .is_some_and(|v| !v.is_null() && !v.is_array())
        })
}

fn annotations_at(template: Option<&Value>) -> Option<&Map<String, Value>> {
    template?.pointer("/metadata/annotations")?.as_object()
}

/// Sets (or removes) one of our annotations on a pod template (the record of settings,
/// the seal), touching nothing else.
fn set_annotation(template: &mut Value, key: &str, text: Option<String>) {
    match text {
        Some(text) => {
            if let Some(annotations) =
                pod::child(template, "metadata").and_then(|m| pod::child(m, "annotations"))
            {
                if annotations.get(key).and_then(Value::as_str) != Some(text.as_str()) {
                    annotations[key] = Value::String(text);
                }
            }
        }
        None => {
            if let Some(annotations) = template
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
            {
                annotations.shift_remove(key);
            }
        }
    }
}

/// The namespace the object (and so every pod made from its template) lives in.
fn namespace_of<'r>(request: &'r Request, object: &'r Value) -> Option<&'r str> {
    request
        .namespace
        .as_deref()
        .or_else(|| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
        })
        .filter(|namespace| !namespace.is_empty())
}

/// `namespace/name` of the object for messages; `generateName` objects have no name yet.
fn describe(request: &Request, object: &Value) -> String {
    let metadata = object.get("metadata");
    let field = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let name = request
        .name
        .as_deref()
        .filter(|s| !s.is_empty())
        .or_else(|| field("name"))
        .map(str::to_owned)
        .or_else(|| field("generateName").map(|prefix| format!("{prefix}*")))
        .unwrap_or_else(|| "(unnamed)".to_owned());
    match request
        .namespace
        .as_deref()
        .filter(|s| !s.is_empty())
        .or_else(|| field("namespace"))
    {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name,
    }
}

pub use warning::MAX_WARNING_CHARS;

/// Every warning in at most [`MAX_WARNING_CHARS`], its citations shortened first.
fn shorten(text: String) -> String {
    warning::fit(&text, MAX_WARNING_CHARS)
}
