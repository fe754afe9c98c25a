//! Why a path cannot be cleaned ([`PathRefusal`]), and the end of the sentence the user
//! reads for each reason. Apart from the rule that decides it ([`super::check_target`]):
//! the denials and warnings (`messages`) and the reaper read the same refusals.

use crate::policy::is_at_or_below;

/// Why a path cannot be cleaned. Each variant's text is what the user reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRefusal {
    /// No mount of the container covers the path.
    NotMounted,
    /// The deepest mount covering the path is read-only.
    ReadOnly(String),
    /// A mount path of the container cannot be read as the kubelet reads it.
    BadMountPath(String),
    /// Two mounts of the container are at this (normalized) path.
    Duplicate(String),
    /// Another mount lies at or below the path.
    Nested(String),
    /// `spec.volumes` declares the mount's volume more than once: which one is meant is
    /// a guess (the API server refuses this; the `mutate` CLI may not have asked it).
    AmbiguousVolume(String),
    /// The mount's subPath is absolute, has `..` or is not a string.
    BadSubPath { mount: String, sub_path: String },
    /// The host path is inside or contains a protected entry.
    Protected { host_path: String, entry: String },
    /// The host path is under no `allowedHostPathPrefixes` entry; `prefixes` are the
    /// configured ones, empty when the operator has named none (then nothing is cleaned).
    NotAllowed {
        host_path: String,
        prefixes: Vec<String>,
    },
    /// An explicit path on a volume that is not a hostPath (emptyDir, PVC, CSI…): only
    /// host directories below `allowedHostPathPrefixes` are ever cleaned.
    NotHostPath(String),
    /// `auto` only: the pod has a volume whose host directory the webhook cannot see (a
    /// PVC, ephemeral, CSI or flex volume); it may lie inside this hostPath target.
    HiddenVolume { volume: String, source: String },
    /// Another hostPath view of the pod is at or below the host path.
    HostOverlap {
        host_path: String,
        other: String,
        volume: String,
    },
}

impl PathRefusal {
    /// Whether the container simply does not clean this path (another container may):
    /// every other refusal is a safety rule and denies an explicit path.
    pub fn is_not_ours(&self) -> bool {
        matches!(self, PathRefusal::NotMounted | PathRefusal::ReadOnly(_))
    }

    /// Whether the only thing missing is the operator's `allowedHostPathPrefixes`: the
    /// user can do nothing about it, so an explicit path gets a warning, not a denial.
    pub fn is_unconfigured(&self) -> bool {
        matches!(self, PathRefusal::NotAllowed { prefixes, .. } if prefixes.is_empty())
    }

    /// The reason, as the end of a sentence starting with the path.
    pub fn reason(&self) -> String {
        self.reason_citing(&|value| value.to_owned(), &|items| items.join(", "))
    }

    /// [`PathRefusal::reason`] with each name and path it cites passed through `cite`
    /// (warnings mark them with [`crate::mutation::warning::cited`], so that only they are
    /// shortened), and the list of allowed prefixes through `list` (warnings mark it with
    /// [`crate::mutation::warning::cited_list`]: it is shortened first, by whole items).
    /// The protected entry is the rule itself and is never cited.
    pub(crate) fn reason_citing(
        &self,
        cite: &dyn Fn(&str) -> String,
        list: &dyn Fn(&[String]) -> String,
    ) -> String {
        match self {
            PathRefusal::NotMounted => "is not at or below a writable volumeMount".to_owned(),
            PathRefusal::ReadOnly(mount) => format!("is on the read-only mount {}", cite(mount)),
            PathRefusal::BadMountPath(raw) => {
                format!(
                    "cannot be checked: the mountPath {} cannot be normalized",
                    cite(raw)
                )
            }
            PathRefusal::Duplicate(path) => {
                format!("is on {}, where two volumes are mounted", cite(path))
            }
            PathRefusal::Nested(nested) => {
                format!("has another volume mounted inside it at {}", cite(nested))
            }
            PathRefusal::AmbiguousVolume(name) => format!(
                "is on volume {}, which spec.volumes declares more than once",
                cite(&format!("{name:?}"))
            ),
            PathRefusal::BadSubPath { mount, sub_path } => format!(
                "is on {}, whose subPath {} is absolute or has ..",
                cite(mount),
                cite(sub_path)
            ),
            PathRefusal::Protected { host_path, entry } if host_path == entry => {
                format!("is the protected host directory {entry}")
            }
            PathRefusal::Protected { host_path, entry } if is_at_or_below(host_path, entry) => {
                format!(
                    "is host path {}, inside the protected host directory {entry}",
                    cite(host_path)
                )
            }
            PathRefusal::Protected { host_path, entry } => format!(
                "is host path {}, which holds the protected host directory {entry}",
                cite(host_path)
            ),
            PathRefusal::NotAllowed {
                host_path,
                prefixes,
            } if prefixes.is_empty() => format!(
                "is host path {}: no allowedHostPathPrefixes are set, so nothing is cleaned",
                cite(host_path)
            ),
            PathRefusal::NotAllowed {
                host_path,
                prefixes,
            } => format!(
                "is host path {}, outside allowedHostPathPrefixes ({})",
                cite(host_path),
                list(prefixes)
            ),
            PathRefusal::NotHostPath(volume) => format!(
                "is on volume {}, which is not a hostPath",
                cite(&format!("{volume:?}"))
            ),
            PathRefusal::HiddenVolume { volume, source } => format!(
                "may hold volume {} ({source}); name it in cleanup to clean it",
                cite(&format!("{volume:?}"))
            ),
            PathRefusal::HostOverlap {
                host_path,
                other,
                volume,
            } => format!(
                "is host path {}, and volume {} shows {} inside it",
                cite(host_path),
                cite(&format!("{volume:?}")),
                cite(other)
            ),
        }
    }
}
