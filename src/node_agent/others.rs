//! Which other pods may use a directory that no process uses at the instant (issue 38,
//! class 4): "someone may use it" means any pod bound to the node, not ended, whose spec
//! reaches the directory — running, bound but not started, between two init containers,
//! crash-looping — not only a process that happens to run while the agent looks. A Job's
//! replacement still pulling its image has staged input there; a crash-looping pod's
//! cache is there between two restarts.
//!
//! The rule is the reaper's own ([`users::pods_on_the_node`]): each hostPath use of each
//! pod (its mounts as they show the volume: `subPath`, `subPathExpr` expanded from the
//! pod), and the hostPath or local volumes of its claims (read from the API), resolved in
//! the node's root as the kubelet's mount would resolve them, and compared with the
//! directory by identity, above, at or below it. The pods come from the agent's watch
//! ([`NodePods`]); out of sync, nobody can say who is bound, and the answer is unknown.
//!
//! Not counted: the asking pod (named by the kernel, its cgroup), the agent's own pod
//! (its reaper container mounts the prefixes, above every directory; known by the agent's
//! own cgroup, never by a name), and pods that have ended ([`crate::node::ended`]).

use crate::config::Config;
use crate::node::ended::has_ended;
use crate::node::pods::NodePods;
use crate::reaper::claims;
use crate::reaper::derive::pod_facts_with;
use crate::reaper::in_use::Busy;
use crate::reaper::ledger::KnownPod;
use crate::reaper::on_node::NodeRoot;
use crate::reaper::users;
use std::collections::HashSet;
use std::path::PathBuf;

/// What the question needs, for the life of the agent.
pub struct Others {
    pub pods: NodePods,
    /// The agent's own pod uid, from its own cgroup (`None` outside a pod: a process of
    /// the node, as in the e2e suites).
    pub own: Option<String>,
    /// The node's `/` in the agent (`--host-root`).
    pub node_root: PathBuf,
    /// The agent's `--allow` prefixes as a config: a read-only view of a directory
    /// above every one of them (node-exporter's `/`) is no use, as for the reaper.
    pub config: Config,
    /// Reads the claims' volumes; `None`: a pod with a claim makes the answer unknown.
    pub client: Option<kube::Client>,
    /// Where the claims are read.
    pub runtime: tokio::runtime::Handle,
    /// What bound claims reach, read once per pod: a walking cleanup asks again every
    /// 50 ms, and must not cost the API server two gets per claim each time.
    pub bound: claims::Bound,
}

impl Others {
    /// `Ok` when no pod bound to the node but `asker` and the agent's own, none ended,
    /// reaches the node's directory `host`.
    pub fn check(&self, asker: Option<&str>, host: &str) -> Result<(), Busy> {
        let known = {
            let picture = self.pods.now();
            if !picture.is_synced() {
                return Err(Busy::Unknown(
                    "the agent's watch of the node's pods is not in sync, so which pods are \
                     bound to the node (and may use the directory without a process now) \
                     cannot be told"
                        .to_owned(),
                ));
            }
            let on_the_node: HashSet<&str> = picture
                .pods()
                .filter_map(|pod| pod.metadata.uid.as_deref())
                .collect();
            self.bound.keep_only(&on_the_node);
            picture
                .pods()
                .filter(|pod| {
                    let uid = pod.metadata.uid.as_deref();
                    uid != asker && uid != self.own.as_deref() && !has_ended(pod)
                })
                .cloned()
                .collect::<Vec<_>>()
        };
        // Derived outside the picture's lock: the watch that keeps it goes on meanwhile.
        let known: Vec<KnownPod> = known
            .iter()
            .filter_map(|pod| {
                let value = crate::json::to_value(pod.as_ref()).ok()?;
                pod_facts_with(&value, &self.config, false)
            })
            .map(|facts| KnownPod::of(&facts))
            .collect();
        let claims = if known.iter().any(|pod| !pod.claims.is_empty()) {
            self.runtime.block_on(claims::read(
                self.client.as_ref(),
                &known,
                Some(&self.bound),
            ))
        } else {
            Vec::new()
        };
        let prefixes = &self.config.allowed_host_path_prefixes;
        let root = NodeRoot::open(&self.node_root).map_err(Busy::Unknown)?;
        let real = root
            .real_path(prefixes, host)
            .map_err(|why| Busy::Unknown(format!("cannot place {host} on the node: {why}")))?;
        let location = self.node_root.join(real.trim_start_matches('/'));
        users::pods_on_the_node(
            Some(&self.node_root),
            &known,
            &claims,
            &location,
            host,
            prefixes,
        )
    }
}

/// The pod uid of this process, from its own cgroup, as the agent names every asker.
pub fn own_pod() -> Option<String> {
    let text = std::fs::read("/proc/self/cgroup").ok()?;
    prestop_clean::agent::peer::pod_of_cgroup(&text)
}
