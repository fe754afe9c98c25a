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
//!
//! Bounded: the distinct claims of a round are read [`CONCURRENT`] at a time within one
//! [`ROUND`]; what is not read by then is unknown, so one pod with a thousand claims
//! makes a judgement say "unknown", never late. And what a bound claim reaches is read
//! once per pod ([`Bound`]): the node agent is asked again every 50 ms while a cleanup
//! walks, and those questions cost the API server nothing for bound claims.

use super::ledger::KnownPod;
use super::reach::Reach;
use crate::mutation::targets::{normalize, HostPath, Open};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// Bound to a volume that is not a host directory: as fixed as a host one.
    NotHost {
        why: String,
    },
    Unknown {
        why: String,
    },
}

/// How long one round of claims (each distinct claim's claim and volume gets) may take:
/// the reaper's loop and the agent's judgement wait for it, so a slow API server (or a
/// pod with very many claims) must not stall them. Longer: unknown, checked again later.
const ROUND: Duration = Duration::from_secs(2);

/// Claims read at once in a round.
const CONCURRENT: usize = 8;

/// What bound claims reach (a host directory, or none), by (pod uid, claim), for the life
/// of each pod ([`Bound::keep_only`] forgets the pods that went): a claim that
/// a pod uses cannot be deleted while the pod is there (the `kubernetes.io/pvc-protection`
/// finalizer), its binding to a volume never changes, nor does that volume's path. So for
/// that pod the answer is fixed once the claim is bound; an unbound, missing or unreadable
/// claim is read again every round.
#[derive(Default)]
pub struct Bound {
    reached: Mutex<HashMap<(String, String), Volume>>,
}

/// Every claim of every pod in `pods`, each distinct claim read once, at most
/// [`CONCURRENT`] at a time within [`ROUND`]; with `bound`, a claim already found bound
/// for that pod is not read again.
pub async fn read(
    client: Option<&kube::Client>,
    pods: &[KnownPod],
    bound: Option<&Bound>,
) -> Vec<ClaimUse> {
    let known = |uid: &str, claim: &str| -> Option<Volume> {
        let reached = bound?.reached.lock().unwrap_or_else(|e| e.into_inner());
        reached.get(&(uid.to_owned(), claim.to_owned())).cloned()
    };
    // The distinct claims to read this round, in the order pods name them.
    let mut wanted: Vec<(String, String)> = Vec::new();
    for known_pod in pods {
        for claim in &known_pod.claims {
            let key = (known_pod.pod.namespace.clone(), claim.clone());
            if known(&known_pod.pod.uid, claim).is_none() && !wanted.contains(&key) {
                wanted.push(key);
            }
        }
    }
    let round = read_round(client, wanted).await;
    let mut uses = Vec::new();
    let mut found = Vec::new();
    for known_pod in pods {
        for claim in &known_pod.claims {
            let volume = known(&known_pod.pod.uid, claim).unwrap_or_else(|| {
                round
                    .get(&(known_pod.pod.namespace.clone(), claim.clone()))
                    .cloned()
                    .unwrap_or_else(|| Volume::Unknown {
                        why: format!(
                            "cannot be read: the API server did not answer within {ROUND:?}"
                        ),
                    })
            });
            if matches!(volume, Volume::Host { .. } | Volume::NotHost { .. }) {
                found.push(((known_pod.pod.uid.clone(), claim.clone()), volume.clone()));
            }
            uses.push(claim_use(&known_pod.pod.to_string(), claim, &volume));
        }
    }
    if let Some(bound) = bound {
        let mut reached = bound.reached.lock().unwrap_or_else(|e| e.into_inner());
        reached.extend(found);
    }
    uses
}

impl Bound {
    /// Forgets the claims of pods not in `pods` (the node's pods now): the asker of one
    /// question is left out of its own round, and must not lose another walker's entries.
    pub fn keep_only(&self, pods: &HashSet<&str>) {
        let mut reached = self.reached.lock().unwrap_or_else(|e| e.into_inner());
        reached.retain(|(uid, _), _| pods.contains(uid.as_str()));
    }
}

/// Reads `wanted` (namespace, claim) pairs, [`CONCURRENT`] at a time, for at most
/// [`ROUND`]; a pair missing from the answer was not read in time.
async fn read_round(
    client: Option<&kube::Client>,
    wanted: Vec<(String, String)>,
) -> HashMap<(String, String), Volume> {
    let read = Arc::new(Mutex::new(HashMap::new()));
    if wanted.is_empty() {
        return HashMap::new();
    }
    let places = Arc::new(tokio::sync::Semaphore::new(CONCURRENT));
    let mut tasks = tokio::task::JoinSet::new();
    for (namespace, claim) in wanted {
        let (client, places, read) = (client.cloned(), places.clone(), read.clone());
        tasks.spawn(async move {
            let Ok(_place) = places.acquire_owned().await else {
                return;
            };
            let volume = read_one(client.as_ref(), &namespace, &claim).await;
            read.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((namespace, claim), volume);
        });
    }
    // Whatever is not read by then stays out of the answer (unknown); the rest is
    // cancelled with the set.
    let _ = tokio::time::timeout(ROUND, async { while tasks.join_next().await.is_some() {} }).await;
    tasks.abort_all();
    let read = std::mem::take(&mut *read.lock().unwrap_or_else(|e| e.into_inner()));
    read
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
        Volume::Nothing { why } | Volume::NotHost { why } => {
            (format!("claim {claim}"), Err(Reach::Nothing(why.clone())))
        }
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
            return Volume::NotHost {
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
