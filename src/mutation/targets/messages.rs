//! What the user reads when a target is refused: the denial of an explicit path (the
//! annotation, the value, the path, the reason and what is accepted) and one short
//! warning per `auto` candidate skipped, or per explicit path left alone because the
//! operator has set no `allowedHostPathPrefixes`.

use super::{AutoTargets, PathRefusal};
use crate::mutation::scope::settings::{BadAnnotation, CLEANUP};
use crate::mutation::warning::{self, cited, cited_list};

/// The denial for an explicit path: which path, in which container, why, and what is
/// accepted.
pub(crate) fn explicit_refusal(
    paths: &[String],
    path: &str,
    container: &str,
    refusal: &PathRefusal,
) -> BadAnnotation {
    let place = if container.is_empty() || refusal.is_not_ours() {
        String::new()
    } else {
        format!(" in container {container:?}")
    };
    let accepted = match refusal {
        PathRefusal::NotMounted | PathRefusal::ReadOnly(_) | PathRefusal::Nested(_) => {
            "give paths inside the container's own writable mounts, with no other mount inside"
        }
        PathRefusal::AmbiguousVolume(_) => "declare each volume once in spec.volumes",
        PathRefusal::BadMountPath(_) | PathRefusal::Duplicate(_) => {
            "give each volumeMount its own mountPath without .., or pick containers with prestop-injector.io/containers"
        }
        PathRefusal::BadSubPath { .. } => "use a relative subPath without ..",
        PathRefusal::Protected { .. } => {
            "give paths on host directories that are scratch space, not system or protected data"
        }
        PathRefusal::NotAllowed { .. } => {
            "give paths on hostPath volumes below one of those prefixes"
        }
        PathRefusal::NotHostPath(_) => {
            "only hostPath directories below allowedHostPathPrefixes are cleaned; the kubelet removes emptyDirs itself"
        }
        PathRefusal::HostOverlap { .. } | PathRefusal::HiddenVolume { .. } => {
            "give paths whose host directory holds no other volume of the pod"
        }
    };
    BadAnnotation::new(
        CLEANUP,
        &paths.join(","),
        format!("{path}{place} {}; {accepted}", refusal.reason()),
    )
}

/// One warning per `auto` candidate refused, or one for a container whose mounts cannot
/// all be read (it gets no cleanup at all).
pub(crate) fn auto_warnings(container: &str, found: &AutoTargets) -> Vec<String> {
    if let Some(bad) = &found.unreadable {
        return vec![fit(format!(
            "container {} not cleaned: mountPath {} cannot be normalized",
            cited(format_args!("{container:?}")),
            cited(&bad.mount_path)
        ))];
    }
    found
        .skipped
        .iter()
        .map(|(target, refusal)| {
            let name = cited(format_args!("{container:?}"));
            fit(match refusal {
                PathRefusal::NotAllowed { host_path, .. } if refusal.is_unconfigured() => {
                    unconfigured(container, target, host_path)
                }
                PathRefusal::Nested(nested) => format!(
                    "container {name}: {} not cleaned: {} is mounted inside it",
                    cited(target),
                    cited(nested)
                ),
                other => format!(
                    "container {name}: {} not cleaned: it {}",
                    cited(target),
                    other.reason_citing(&|value| cited(value), &|items| cited_list(items))
                ),
            })
        })
        .collect()
}

/// The warning for an explicit path that only the missing `allowedHostPathPrefixes`
/// keeps from being cleaned.
pub(crate) fn explicit_unconfigured(container: &str, path: &str, refusal: &PathRefusal) -> String {
    let host_path = match refusal {
        PathRefusal::NotAllowed { host_path, .. } => host_path.as_str(),
        _ => "",
    };
    fit(unconfigured(container, path, host_path))
}

/// The key first, the reason whole; the names and paths are what [`fit`] shortens.
fn unconfigured(container: &str, path: &str, host_path: &str) -> String {
    format!(
        "no allowedHostPathPrefixes set, nothing is deleted: container {} {} (host path {}) \
         not cleaned",
        cited(format_args!("{container:?}")),
        cited(path),
        cited(host_path)
    )
}

/// docs/DESIGN.md#responses: a warning is at most 120 characters; long names and paths are
/// shortened in the middle, the reason never ([`warning::fit`]).
fn fit(text: String) -> String {
    warning::fit(&text, warning::MAX_WARNING_CHARS)
}
