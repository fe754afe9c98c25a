//! What one pod means to the reaper, read from the pod itself (pure).
//!
//! - **Uses**: every host directory the pod shows — each hostPath volume as declared and
//!   each mount of one, in any container ([`pod_views_resolving`]). A directory is never
//!   emptied while a pod on the node uses it, a parent of it or a child of it. A
//!   `subPathExpr` is expanded when the pod says for certain what it is
//!   ([`super::expand`]); otherwise the use stays open (every directory it might be).
//! - **Cleanable**: only for an *injected* pod (our status annotation, and a seal that
//!   one of the reaper's keys made for its namespace and the cleanup containers, mounts
//!   and volumes it has now: [`crate::mutation::seal`]; never with `inject: "false"`),
//!   the host directories of the targets of the cleanup we injected: the `--target`s of
//!   the cleaner program's hook (or a v1 shell hook) in each app container and of our
//!   cleanup sidecar, and the targets no cleanup in the pod runs, which the webhook left
//!   to the reaper in `prestop-injector.io/reap` (issue 38, class 2). The annotation's content is never trusted: each target goes through
//!   the webhook's own rule ([`check_target`], with the reaper's config), only an exact
//!   host path (a `subPathExpr` expanded for certain) is kept, and it must be the one the
//!   target's `--host` names. Anything refused is reported, never recorded.
//! - **Users**: for each cleanable directory, the user of the container(s) whose cleanup
//!   targets it ([`RecordedUser::of_container`]): the reaper's walk runs as that user,
//!   and a directory whose user is not known is recorded as such and never emptied.

use super::expand;
use super::user::RecordedUser;
use super::views;
use crate::config::Config;
use crate::json::Value;
use crate::mutation::hook::Target;
use crate::mutation::scope::record::{self, Recorded};
use crate::mutation::scope::settings::{Annotations, REAP, SEAL, STATUS};
use crate::mutation::seal::{self, Cleaner, Verdict};
use crate::mutation::targets::{
    check_target, container_mounts, mount_host_path_with, mount_of, pod_views_resolving, HostPath,
    PathRefusal, SubPath,
};
use std::collections::{BTreeMap, HashSet};

/// The reaper's view of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodFacts {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Every host directory the pod uses (some open: any directory below `known`).
    pub uses: Vec<HostPath>,
    /// The PersistentVolumeClaims its volumes name ([`pod_claims`]).
    pub claims: Vec<String>,
    /// The pod has ended for good while its object remains ([`crate::node::ended`]): it
    /// uses nothing any more, and what it recorded may be emptied (issue 38, class 1).
    pub ended: bool,
    /// Exact host directories the pod's injected cleanup may empty, each once.
    pub cleanable: Vec<String>,
    /// The user each cleanable directory would be emptied as.
    pub users: BTreeMap<String, RecordedUser>,
    /// Targets of the injected cleanup that the reaper will not empty, and why.
    pub refused: Vec<Refused>,
}

/// A target of an injected cleanup that the reaper refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub container: String,
    pub target: String,
    /// A metric label from a closed set.
    pub reason: &'static str,
    /// Why, as the end of a sentence that starts with the target (no pod name in it, so
    /// the pods of one workload share it).
    pub why: String,
    /// The sentence for the log line and the Event.
    pub message: String,
}

/// The facts of `pod` (a v1 Pod as JSON); `None` without a uid.
pub fn pod_facts(pod: &Value, config: &Config) -> Option<PodFacts> {
    pod_facts_with(pod, config, true)
}

/// [`pod_facts`]; with `read_only_views_keep` false, a hostPath volume strictly above
/// every allowed prefix that every container mounts read-only (node-exporter's `/`, a
/// debug pod's) is not a use: it cannot write what the walk removes
/// (docs/REAPER.md#when). The running containers' mounts are still checked.
pub fn pod_facts_with(
    pod: &Value,
    config: &Config,
    read_only_views_keep: bool,
) -> Option<PodFacts> {
    let text = |pointer: &str| pod.pointer(pointer).and_then(Value::as_str);
    let uid = text("/metadata/uid").filter(|uid| !uid.is_empty())?;
    let empty = Value::Null;
    let spec = pod.get("spec").unwrap_or(&empty);
    let resolve = |mount: &Value, container: &Value| {
        let expr = mount.get("subPathExpr").and_then(Value::as_str)?;
        expand::sub_path_expr(expr, container, pod)
    };
    let mut facts = PodFacts {
        uid: uid.to_owned(),
        namespace: text("/metadata/namespace").unwrap_or("").to_owned(),
        name: text("/metadata/name").unwrap_or("").to_owned(),
        uses: views::reachable(
            pod_views_resolving(spec, &resolve),
            &if read_only_views_keep {
                HashSet::new()
            } else {
                views::read_only_views(spec, config)
            },
            config,
        ),
        claims: pod_claims(pod),
        ended: pod
            .get("status")
            .and_then(|status| {
                crate::json::from_value::<k8s_openapi::api::core::v1::PodStatus>(status.clone())
                    .ok()
            })
            .is_some_and(|status| crate::node::ended::status_has_ended(&status)),
        cleanable: Vec::new(),
        users: BTreeMap::new(),
        refused: Vec::new(),
    };
    if pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS))
        .is_none()
        || opted_out(pod, config)
    {
        return Some(facts);
    }
    let mut cleaners = seal::cleanup_containers(spec);
    let reap = annotation(pod, REAP);
    match reap.map(|text| seal::reaper_targets(spec, text)) {
        Some(Ok(left_to_us)) => cleaners.extend(left_to_us),
        Some(Err(why)) => facts.refused.push(Refused {
            container: String::new(),
            target: String::new(),
            reason: "seal_mismatch",
            message: format!("pod {}/{}: {why}", facts.namespace, facts.name),
            why,
        }),
        None => {}
    }
    let sealed = sealed(pod, spec, &facts.namespace, config);
    for cleaner in &cleaners {
        let name = cleaner.name();
        for target in &cleaner.targets {
            let decided = sealed.clone().and_then(|()| {
                let dir = host_directory(pod, spec, cleaner.container, &target.path, config)?;
                match dir {
                    Some(dir) => same_as_argv(dir, cleaner, target, pod).map(Some),
                    None => Ok(None),
                }
            });
            match decided {
                Ok(Some(dir)) => {
                    let user = RecordedUser::of_container(pod, cleaner.container);
                    let user = match facts.users.remove(&dir) {
                        Some(before) => before.merge(user),
                        None => user,
                    };
                    facts.users.insert(dir.clone(), user);
                    if !facts.cleanable.contains(&dir) {
                        facts.cleanable.push(dir);
                    }
                }
                Ok(None) => {}
                Err((reason, why)) => facts.refused.push(Refused {
                    container: name.to_owned(),
                    message: format!(
                        "target {} of container {name:?} of pod {}/{} {why}",
                        target.path, facts.namespace, facts.name
                    ),
                    target: target.path.clone(),
                    reason,
                    why,
                }),
            }
        }
    }
    Some(facts)
}

/// The claims of the pod's volumes, in its namespace: each `persistentVolumeClaim`, and
/// the claim the ephemeral-volume controller makes for each `ephemeral` volume
/// (`<pod>-<volume>`). Their PVs may be host directories (hostPath, local) that the spec
/// does not name; the reaper reads them from the API when it checks a directory.
pub fn pod_claims(pod: &Value) -> Vec<String> {
    let pod_name = pod.pointer("/metadata/name").and_then(Value::as_str);
    let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array);
    let mut claims: Vec<String> = Vec::new();
    for volume in volumes.into_iter().flatten() {
        let claim = match (
            volume.pointer("/persistentVolumeClaim/claimName"),
            volume.get("ephemeral").filter(|e| !e.is_null()),
            volume.get("name").and_then(Value::as_str),
            pod_name,
        ) {
            (Some(name), _, _, _) => name.as_str().map(str::to_owned),
            (None, Some(_), Some(volume), Some(pod)) => Some(format!("{pod}-{volume}")),
            _ => None,
        };
        if let Some(claim) = claim.filter(|c| !c.is_empty() && !claims.contains(c)) {
            claims.push(claim);
        }
    }
    claims
}

/// `inject: "false"` on the pod, or in the settings record its template carried: the
/// pod is ignored (never recorded, never emptied, no refusal reported), as the webhook
/// ignores it. A value we cannot read counts as an opt-out (fail closed).
fn opted_out(pod: &Value, config: &Config) -> bool {
    let annotations = pod.pointer("/metadata/annotations");
    if Annotations::new(Some(pod), None).opted_out() != Ok(false) {
        return true;
    }
    matches!(
        record::read(annotations.and_then(Value::as_object), config),
        Ok(Some(Recorded::OptedOut)) | Err(_)
    )
}

/// Whether the webhook sealed the pod's cleanup as it is now, for its own namespace
/// ([`seal::verify`] under the reaper's keys): a copied status annotation and argv, a
/// seal moved to another namespace or kept over changed mounts or volumes are refused.
fn sealed(pod: &Value, spec: &Value, namespace: &str, config: &Config) -> Result<(), Refusal> {
    let verdict = seal::verify(
        &config.seal,
        namespace,
        spec,
        annotation(pod, REAP),
        annotation(pod, SEAL),
    );
    let Some(reason) = verdict.reason() else {
        return Ok(());
    };
    let why = match verdict {
        Verdict::Unsealed if config.seal.is_empty() => {
            "cannot be proven injected by the webhook: the reaper has no seal key".to_owned()
        }
        Verdict::Unsealed => format!(
            "cannot be proven injected by the webhook: it has no {SEAL} annotation in the v1 format"
        ),
        _ => format!(
            "has a {SEAL} that none of the reaper's keys made for namespace {namespace:?} and \
             the pod's cleanup containers, {REAP}, mounts and volumes as they are now"
        ),
    };
    Err((reason, why))
}

/// The text of the pod's annotation `key`, when it has one.
fn annotation<'p>(pod: &'p Value, key: &str) -> Option<&'p str> {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// `dir` when it is the host directory the target's `--host` names (expanded from the
/// pod as the program expands it). The shell forms carry no `--host` and rely on the
/// seal alone; the program's form without one is refused.
fn same_as_argv(
    dir: String,
    cleaner: &Cleaner,
    target: &Target,
    pod: &Value,
) -> Result<String, Refusal> {
    let Some(host) = &target.host else {
        if !cleaner.program {
            return Ok(dir);
        }
        let why = format!("is host path {dir}, but its argv names no --host to check it against");
        return Err(("host_mismatch", why));
    };
    let why = match expand::host_text(host, cleaner.container, pod) {
        Some(expected) if expected == dir => return Ok(dir),
        Some(expected) => {
            format!("is host path {dir} by the pod's volumes, but its --host says {expected}")
        }
        None => format!(
            "is host path {dir} by the pod's volumes, but its --host {host} cannot be expanded \
             for certain from the pod"
        ),
    };
    Err(("host_mismatch", why))
}

type Refusal = (&'static str, String);

/// The exact host directory of `target` in `container`, after the webhook's rule; `None`
/// when it is not on a hostPath volume (the kubelet removes the others itself).
fn host_directory(
    pod: &Value,
    spec: &Value,
    container: &Value,
    target: &str,
    config: &Config,
) -> Result<Option<String>, Refusal> {
    if prestop_clean::check_target(target).is_err() {
        return Err(("rule", "is not an absolute, normalized path".to_owned()));
    }
    let mounts = container_mounts(container).map_err(|bad| {
        let why = format!(
            "cannot be checked: the mountPath {} cannot be normalized",
            bad.mount_path
        );
        ("rule", why)
    })?;
    let host = match check_target(spec, &mounts, target, config) {
        Ok(None) => return Ok(None),
        Ok(Some(host)) => host,
        Err(refusal) => {
            // The rule saw the template's open path (`/mnt/scratch/jobs/*`): when the pod
            // does not say for certain what it is either, that is the reason.
            let reason = match refusal_reason(&refusal) {
                "rule" if sub_path_expr_unknown(pod, container, &mounts, target) => {
                    "host_path_unknown"
                }
                reason => reason,
            };
            return Err((reason, refusal.reason()));
        }
    };
    if host.open.is_none() {
        return Ok(Some(host.known));
    }
    // A subPathExpr: only a certain expansion gives a directory to empty.
    let unknown = || {
        let why = format!(
            "is host path {}: its subPathExpr cannot be expanded for certain from the pod",
            host.display()
        );
        ("host_path_unknown", why)
    };
    let mount = mount_of(&mounts, target).ok_or_else(unknown)?;
    let expr = mount
        .raw
        .get("subPathExpr")
        .and_then(Value::as_str)
        .ok_or_else(unknown)?;
    let known = expand::sub_path_expr(expr, container, pod).ok_or_else(unknown)?;
    let sub_path = if known.is_empty() {
        SubPath::Whole
    } else {
        SubPath::Fixed(known)
    };
    match mount_host_path_with(spec, mount, &sub_path) {
        Some(Ok(base)) => {
            let exact = base.join(mount.below(target));
            exact
                .open
                .is_none()
                .then_some(exact.known)
                .map(Some)
                .ok_or_else(unknown)
        }
        _ => Err(unknown()),
    }
}

/// Whether `target`'s mount has a `subPathExpr` that cannot be expanded for certain.
fn sub_path_expr_unknown(
    pod: &Value,
    container: &Value,
    mounts: &[crate::mutation::targets::Mount],
    target: &str,
) -> bool {
    mount_of(mounts, target)
        .and_then(|mount| mount.raw.get("subPathExpr").and_then(Value::as_str))
        .is_some_and(|expr| expand::sub_path_expr(expr, container, pod).is_none())
}

/// The metric label of a refusal of the webhook's rule.
fn refusal_reason(refusal: &PathRefusal) -> &'static str {
    match refusal {
        PathRefusal::Protected { .. } => "protected",
        PathRefusal::NotAllowed { .. } => "not_allowed",
        _ => "rule",
    }
}
