//! What a pod's PersistentVolumeClaims reach, read from the API at check time.
//!
//! A `hostPath` or `local` PersistentVolume is a host directory that the pod spec never
//! names: only the claim does. So for each claim of each known pod: the claim (in the
//! pod's namespace) → its bound volume → that volume's path, which is then a use like a
//! hostPath ([`super::users`] resolves it on the node).
//!
//! Why gets at check time and not a cache fed by watches: the answer must be as fresh as
//! the check (a claim bound a second ago counts), a check happens only when a directory
//! is due (or, mid-walk, only for pods that have claims), and each claim is read once per
//! round. The cost is two gets per distinct claim per round; pods without claims cost no
//! request.
//!
//! Fail closed: a claim or volume that cannot be read is [`Reach::Unknown`]. A local
//! volume of another node is not on this node, but it is counted anyway (its node
//! affinity is not read): at worst a directory waits for that pod to go.

use super::ledger::KnownPod;
use super::reach::Reach;
use crate::mutation::targets::{normalize, HostPath, Open};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use std::collections::HashMap;

/// One claim of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimUse {
    /// `namespace/name (uid …)` of the pod.
    pub pod: String,
    /// `claim data → PersistentVolume pv-1 (hostPath /mnt/x)`, for messages.
    pub via: String,
    /// The host directory to resolve on the node, or what the claim reaches already.
    pub target: Result<HostPath, Reach>,
}

/// What a claim reaches, as read from the API.
#[derive(Debug, Clone)]
enum Volume {
    Host {
        volume: String,
        kind: &'static str,
        path: String,
    },
    Nothing {
        why: String,
    },
    Unknown {
        why: String,
    },
}

/// How long one claim (its claim and volume gets) may take: the reaper's loop waits for
/// the check, so a slow API server must not stall it. Longer: unknown, checked again
/// after the delay.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Every claim of every pod in `pods`, each distinct claim read once.
pub async fn read(client: Option<&kube::Client>, pods: &[KnownPod]) -> Vec<ClaimUse> {
    let mut round: HashMap<(String, String), Volume> = HashMap::new();
    let mut uses = Vec::new();
    for known in pods {
        for claim in &known.claims {
            let key = (known.pod.namespace.clone(), claim.clone());
            if !round.contains_key(&key) {
                let volume = tokio::time::timeout(READ_TIMEOUT, read_one(client, &key.0, claim))
                    .await
                    .unwrap_or_else(|_| Volume::Unknown {
                        why: format!(
                            "cannot be read: the API server did not answer within {READ_TIMEOUT:?}"
                        ),
                    });
                round.insert(key.clone(), volume);
            }
            uses.push(claim_use(&known.pod.to_string(), claim, &round[&key]));
        }
    }
    uses
}

fn claim_use(pod: &str, claim: &str, volume: &Volume) -> ClaimUse {
    let (via, target) = match volume {
        Volume::Host { volume, kind, path } => {
            let via = format!("claim {claim} → PersistentVolume {volume} ({kind} {path})");
            // A path the API server accepted but we cannot read exactly may be anywhere.
            let host = normalize(path).map_or_else(
                || HostPath {
                    known: "/".to_owned(),
                    open: Some(Open::AtOrBelow),
                },
                |known| HostPath { known, open: None },
            );
            (via, Ok(host))
        }
        Volume::Nothing { why } => (format!("claim {claim}"), Err(Reach::Nothing(why.clone()))),
        Volume::Unknown { why } => (format!("claim {claim}"), Err(Reach::Unknown(why.clone()))),
    };
    ClaimUse {
        pod: pod.to_owned(),
        via,
        target,
    }
}

async fn read_one(client: Option<&kube::Client>, namespace: &str, claim: &str) -> Volume {
    let Some(client) = client else {
        return Volume::Unknown {
            why: "cannot be read: the reaper has no API client".to_owned(),
        };
    };
    let claims: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(client.clone(), namespace);
    let pvc = match claims.get_opt(claim).await {
        Ok(Some(pvc)) => pvc,
        // The pod cannot start before its claim exists; once it does, the next check
        // reads it.
        Ok(None) => {
            return Volume::Nothing {
                why: "does not exist: the pod cannot start without it".to_owned(),
            }
        }
        Err(error) => {
            return Volume::Unknown {
                why: format!("cannot be read (PersistentVolumeClaim {namespace}/{claim}): {error}"),
            }
        }
    };
    let Some(name) = pvc
        .spec
        .and_then(|spec| spec.volume_name)
        .filter(|name| !name.is_empty())
    else {
        return Volume::Nothing {
            why: "is not bound to a volume yet".to_owned(),
        };
    };
    let volumes: kube::Api<PersistentVolume> = kube::Api::all(client.clone());
    let pv = match volumes.get(&name).await {
        Ok(pv) => pv,
        Err(error) => {
            return Volume::Unknown {
                why: format!("is bound to PersistentVolume {name}, which cannot be read: {error}"),
            }
        }
    };
    let spec = pv.spec.unwrap_or_default();
    let host = match (spec.host_path, spec.local) {
        (Some(host), _) => ("hostPath", host.path),
        (None, Some(local)) => ("local", local.path),
        (None, None) => {
            return Volume::Nothing {
                why: format!(
                    "is bound to PersistentVolume {name}, neither hostPath nor local: not a \
                     host directory (a CSI mount shows in the running containers' mounts)"
                ),
            }
        }
    };
    Volume::Host {
        volume: name,
        kind: host.0,
        path: host.1,
    }
}
