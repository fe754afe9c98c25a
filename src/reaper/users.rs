//! Who uses a directory now: one check round, just before a walk (docs/REAPER.md#when).
//!
//! A round asks, for the candidate:
//! 1. the running containers and the node's own mounts ([`in_use::check`], mountinfo):
//!    catches what no spec shows (a bind mount made by hand, CSI);
//! 2. every pod bound to the node that the watch knows and that has not ended (running,
//!    crash-looping, pending, between init containers, terminating; an ended pod, terminal
//!    with nothing running, starts nothing again): each of its hostPath uses and the
//!    hostPath/local volumes of its claims ([`claims`], from the API), resolved on the
//!    node as the kubelet's mount would resolve them ([`on_node`]), and compared with the
//!    candidate by identity ([`reach::decide`]).
//!
//! Resolutions are cached for one round (pods of one Job share their paths), never
//! across rounds: what the app left on disk may change between two. The round is
//! cheap enough to be repeated during a walk (docs/REAPER.md gives the figure).

use super::claims::{self, ClaimUse};
use super::in_use::{self, Busy};
use super::ledger::KnownPod;
use super::on_node::{Exact, NodeRoot};
use super::reach::{self, Reach, Use};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What one round needs, owned: its file system part runs on a blocking thread.
#[derive(Clone)]
pub struct Check {
    /// The node's `/` in the reaper (`--node-root`); `None`: unknown, nothing emptied.
    pub node_root: Option<PathBuf>,
    /// For the claims; `None`: a pod with a claim makes the answer unknown.
    pub client: Option<kube::Client>,
    /// The pods bound to the node, as the watch knows them.
    pub pods: Vec<KnownPod>,
    /// The allowed prefixes, each resolved on the node before the candidate is opened.
    pub prefixes: Vec<String>,
    /// Whether a read-only view of a directory above every allowed prefix (a whole-node
    /// view: node-exporter's `/`, a debug pod) keeps the directory (`false` by default:
    /// docs/REAPER.md#when).
    pub read_only_views_keep: bool,
}

/// Whether anything on the node uses `directory` (host path), which the walk would
/// empty at `location` (its path in the reaper).
pub async fn check(check: Check, location: PathBuf, directory: String) -> Result<(), Busy> {
    let claims = claims::read(check.client.as_ref(), &check.pods, None).await;
    let round = tokio::task::spawn_blocking(move || {
        containers(
            &location,
            &directory,
            &check.prefixes,
            check.read_only_views_keep,
        )?;
        pods_on_the_node(
            check.node_root.as_deref(),
            &check.pods,
            &claims,
            &location,
            &directory,
            &check.prefixes,
        )
    })
    .await;
    round.unwrap_or_else(|error| Err(Busy::Unknown(format!("the check failed: {error}"))))
}

/// What the walk's own watch of the node's pods has seen, as it fills it during the walk.
#[derive(Clone, Default)]
pub struct Arrived {
    pub pods: Arc<Mutex<Vec<KnownPod>>>,
    /// Whether its last list completed and no error came since: otherwise a pod bound
    /// meanwhile may be missing from `pods`.
    pub in_sync: Arc<AtomicBool>,
}

/// A round's inputs for a walk: the claims' volumes read from the API once, when the walk
/// starts; the running containers' mounts and the pods' paths on the node are looked at
/// anew by every [`Repeat::check`], on the blocking thread that guards the walk.
pub struct Repeat {
    node_root: Option<PathBuf>,
    pods: Vec<KnownPod>,
    /// The pods the walk's own watch saw bound to the node since it started
    /// ([`crate::reaper::node::arrivals`]).
    arrivals: Option<Arrived>,
    claims: Vec<ClaimUse>,
    prefixes: Vec<String>,
    read_only_views_keep: bool,
}

impl Check {
    /// Reads the claims once, for the checks repeated during a walk.
    pub async fn for_walk(self) -> Repeat {
        let claims = claims::read(self.client.as_ref(), &self.pods, None).await;
        Repeat {
            node_root: self.node_root,
            pods: self.pods,
            arrivals: None,
            claims,
            prefixes: self.prefixes,
            read_only_views_keep: self.read_only_views_keep,
        }
    }
}

impl Repeat {
    /// Every look also resolves the pods in `arrivals`, which a watch fills during the
    /// walk; while that watch is out of sync, every look is unknown.
    pub fn with_arrivals(mut self, arrivals: Arrived) -> Repeat {
        self.arrivals = Some(arrivals);
        self
    }

    /// One look: what [`check`] decides, with the claims of the walk's start, and the pods
    /// bound to the node since.
    pub fn check(&self, location: &Path, directory: &str) -> Result<(), Busy> {
        containers(
            location,
            directory,
            &self.prefixes,
            self.read_only_views_keep,
        )?;
        let none = Vec::new();
        let arrived = match &self.arrivals {
            None => None,
            Some(arrivals) if !arrivals.in_sync.load(Ordering::SeqCst) => {
                return Err(Busy::Unknown(
                    "the walk's watch of the node's pods is out of sync (a list failed or \
                     started again), so a pod bound to the node meanwhile would not be seen"
                        .to_owned(),
                ));
            }
            Some(arrivals) => Some(arrivals.pods.lock().unwrap_or_else(|e| e.into_inner())),
        };
        let arrived: &Vec<KnownPod> = arrived.as_deref().unwrap_or(&none);
        let known_at_start = |pod: &KnownPod| self.pods.iter().any(|k| k.pod.uid == pod.pod.uid);
        // Their claims' volumes were not read at the walk's start: unknown, not unused.
        if let Some(pod) = arrived
            .iter()
            .find(|pod| !pod.ended && !known_at_start(pod) && !pod.claims.is_empty())
        {
            return Err(Busy::Unknown(format!(
                "{} was bound to the node during the walk with PersistentVolumeClaims, whose \
                 volumes the walk has not read",
                pod.pod
            )));
        }
        // A pod the watch saw again is taken as it saw it last: an ephemeral container
        // added during the walk may mount more than the pod did at its start. An ended
        // pod uses nothing (the one whose directory this is, seen again, among them).
        let pods: Vec<KnownPod> = self
            .pods
            .iter()
            .filter(|known| !arrived.iter().any(|seen| seen.pod.uid == known.pod.uid))
            .cloned()
            .chain(arrived.iter().filter(|pod| !pod.ended).cloned())
            .collect();
        pods_on_the_node(
            self.node_root.as_deref(),
            &pods,
            &self.claims,
            location,
            directory,
            &self.prefixes,
        )
    }
}

/// The running containers' mounts ([`in_use`]): a read-only view strictly above the
/// candidate's allowed prefix counts only when the operator asks for it.
fn containers(
    location: &Path,
    directory: &str,
    prefixes: &[String],
    keep: bool,
) -> Result<(), Busy> {
    let prefix = prefixes
        .iter()
        .map(|prefix| prefix.trim_end_matches('/'))
        .filter(|prefix| {
            prefix.is_empty()
                || directory == *prefix
                || directory
                    .strip_prefix(*prefix)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|prefix| prefix.len());
    match prefix {
        Some(prefix) if !keep => {
            let below = directory[prefix.len()..]
                .split('/')
                .filter(|part| !part.is_empty())
                .count();
            match location.ancestors().nth(below) {
                Some(at) => in_use::check_beside_read_only_views(location, directory, at),
                None => in_use::check(location, directory),
            }
        }
        _ => in_use::check(location, directory),
    }
}

/// Whether a pod in `pods` (or a claim in `claims`) reaches `directory` on the node.
/// Synchronous: the file system part of a round.
pub fn pods_on_the_node(
    node_root: Option<&Path>,
    pods: &[KnownPod],
    claims: &[ClaimUse],
    location: &Path,
    directory: &str,
    prefixes: &[String],
) -> Result<(), Busy> {
    let Some(node_root) = node_root else {
        return Err(Busy::Unknown(format!(
            "the reaper has no view of the node's root (--node-root), so it cannot tell which \
             pods reach {directory} through symlinks or volumes"
        )));
    };
    let root = NodeRoot::open(node_root).map_err(Busy::Unknown)?;
    // Where the directory really is on the node: its allowed prefix may be behind the
    // operator's symlink (RHCOS `/mnt -> var/mnt`), which the kubelet followed when it
    // mounted the prefix in the reaper.
    let real = root
        .real_path(prefixes, directory)
        .map_err(|why| Busy::Unknown(format!("cannot place {directory} on the node: {why}")))?;
    let candidate = match root.exact(&real) {
        Ok(Exact::Directory(lineage)) => lineage,
        // Missing on the node: nothing to empty, unless the reaper's view has it.
        Ok(Exact::Absent) => {
            return match std::fs::symlink_metadata(location) {
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(Busy::Unknown(format!(
                    "{directory} is not on the node at {} (its real path {real}), yet {} \
                     (where the reaper would empty it) is there",
                    root.path().join(real.trim_start_matches('/')).display(),
                    location.display()
                ))),
            };
        }
        Err(why) => return Err(Busy::Unknown(format!("{directory} {why}"))),
    };
    // What the walk empties must be that very directory of the node.
    match std::fs::symlink_metadata(location) {
        Ok(meta) if (meta.dev(), meta.ino()) == candidate.identity() => {}
        Ok(meta) => {
            return Err(Busy::Unknown(format!(
                "{} (where the reaper would empty {directory}) is not the node's {directory} \
                 at {}: device and inode {}:{} against {}:{}",
                location.display(),
                root.path().join(real.trim_start_matches('/')).display(),
                meta.dev(),
                meta.ino(),
                candidate.identity().0,
                candidate.identity().1
            )))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(Busy::Unknown(format!(
                "cannot stat {}: {error}",
                location.display()
            )))
        }
    }
    let mut round: HashMap<String, Reach> = HashMap::new();
    let mut resolve = |path: &str| -> Reach {
        round
            .entry(path.to_owned())
            .or_insert_with(|| root.resolve(path))
            .clone()
    };
    let mut uses = Vec::new();
    for known in pods {
        let pod = known.pod.to_string();
        for host in &known.uses {
            uses.push(Use {
                pod: pod.clone(),
                via: format!("hostPath {}", host.display()),
                // An open use (a subPathExpr) is anything below its known part: on the
                // candidate's line exactly when its known part is.
                reach: resolve(&host.known),
            });
        }
    }
    for claim in claims {
        uses.push(Use {
            pod: claim.pod.clone(),
            via: claim.via.clone(),
            reach: match &claim.target {
                Ok(host) => resolve(&host.known),
                Err(reach) => reach.clone(),
            },
        });
    }
    reach::decide(&candidate, directory, &uses)
}
