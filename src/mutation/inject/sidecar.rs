//! docs/DESIGN.md#the-sidecar: the native cleanup sidecar, an init container with `restartPolicy:
//! Always`.
//!
//! The kubelet sends SIGTERM to sidecars only after every app container has stopped —
//! when a Job finishes and when its pod is deleted — so the cleanup, which runs in the
//! sidecar's SIGTERM handler, starts after the app stopped writing. It has no preStop of
//! its own: on deletion that would run while the app may still write.
//!
//! It must also be a container every cluster accepts: Pod Security `restricted` fields
//! with the served containers' numeric user, exact copies of their mounts and of the env
//! those mounts reference ([`SidecarPlan`] decides which containers it can serve), and a
//! name no container of the pod has. It is recognised by its command, never its name.

use crate::config::{CleanerMode, Config};
use crate::json::{json, Map, Value};
use crate::mutation::hook;
use crate::mutation::hook::ours::is_our_sidecar;
use crate::mutation::inject::named::free_container_name;
use crate::mutation::inject::node_agent::{self, NodeAgent};
use crate::mutation::inject::others::with_others;
pub use crate::mutation::inject::sidecar_plan::SidecarPlan;
use crate::mutation::inject::sidecar_plan::{check_merged, copy_of};
use crate::mutation::scope::restarts;
use crate::mutation::targets;

/// The sidecar's name, unless a container of the pod already has it: then
/// `prestop-cleanup-2`, `-3`, … (see `named::free_container_name`).
pub const NAME: &str = "prestop-cleanup";

/// The shell sidecar's shell (`cleaner.mode: shell`); its image must provide it (busybox does).
const SHELL: &str = "/bin/sh";

impl SidecarPlan {
    /// Our sidecar: exact mounts and env from [`SidecarPlan`], and a securityContext that
    /// meets Pod Security `restricted` as the served containers' numeric user.
    fn container(&self, spec: &Value, config: &Config, name: &str) -> Map<String, Value> {
        let mut security = json!({
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        });
        if let Some((uid, gid)) = self.user {
            security["runAsUser"] = json!(uid);
            if let Some(gid) = gid {
                security["runAsGroup"] = json!(gid);
            }
        }
        let mut container = Map::new();
        container.insert("name".into(), json!(name));
        // The cleaner program from its own image (no shell), or the busybox script.
        let (image, command) = match config.cleaner.mode {
            CleanerMode::Binary => (
                config.cleaner.image.as_str(),
                hook::program_sidecar_argv(
                    &self.identified(spec, config),
                    self.node_agent.as_ref().map(|_| node_agent::SOCKET),
                    restarts::pod_restarts_in_place(spec).is_some(),
                ),
            ),
            CleanerMode::Shell => (
                config.sidecar.shell_image(),
                hook::sidecar_argv(SHELL, &self.targets),
            ),
        };
        container.insert("image".into(), json!(image));
        container.insert("command".into(), json!(command));
        container.insert("restartPolicy".into(), json!("Always"));
        if !self.env.is_empty() {
            container.insert("env".into(), Value::Array(self.env.clone()));
        }
        container.insert("volumeMounts".into(), Value::Array(self.own_mounts()));
        if config
            .sidecar
            .resources
            .as_object()
            .is_some_and(|r| !r.is_empty())
        {
            container.insert("resources".into(), config.sidecar.resources.clone());
        }
        container.insert("securityContext".into(), security);
        container
    }
}

impl SidecarPlan {
    /// Gives the program sidecar the node agent's socket when `agent` is configured and no
    /// mount the sidecar copies is in the way (see `inject::node_agent`). The shell sidecar
    /// cannot ask it.
    pub fn ask_node_agent(&mut self, agent: &NodeAgent, config: &Config) {
        self.node_agent = (config.cleaner.mode == CleanerMode::Binary)
            .then(|| agent.socket_for(&self.mounts))
            .flatten()
            .map(|_| agent.mount());
    }

    /// Whether the sidecar asks the node agent (so the pod needs its volume).
    pub fn asks_node_agent(&self) -> bool {
        self.node_agent.is_some()
    }

    /// The mounts the sidecar owns: the copies, then the node agent's.
    fn own_mounts(&self) -> Vec<Value> {
        self.mounts
            .iter()
            .chain(&self.node_agent)
            .cloned()
            .collect()
    }

    /// The targets with the host identity the program checks at run time, read from the
    /// sidecar's own copies of the mounts (and of the env their `subPathExpr`s use).
    fn identified(&self, spec: &Value, config: &Config) -> Vec<hook::Target> {
        let own = json!({"volumeMounts": self.mounts, "env": self.env});
        targets::identify_in(spec, &own, &self.targets, config)
    }
}

/// The keys of our sidecar we own; any other (defaulted by the API server after our
/// first patch: `imagePullPolicy`, `terminationMessagePath`, …) is left alone.
const OWNED_KEYS: &[&str] = &[
    "image",
    "command",
    "restartPolicy",
    "env",
    "volumeMounts",
    "resources",
    "securityContext",
];

/// The mounts of our existing sidecar that are no copy of an app container's mount:
/// admission plugins put them there (the ServiceAccount token, say) and they stay.
pub fn foreign_mounts(spec: &Value) -> Vec<Value> {
    let Some(ours) = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .and_then(|list| list.iter().find(|c| is_our_sidecar(c)))
    else {
        return Vec::new();
    };
    let copies: Vec<Value> = crate::mutation::containers::app_containers(spec)
        .iter()
        .filter_map(|c| c.get("volumeMounts").and_then(Value::as_array))
        .flatten()
        .map(copy_of)
        .collect();
    ours.get("volumeMounts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| !copies.contains(&copy_of(m)) && !is_node_agent_mount(m))
        .cloned()
        .collect()
}

/// Whether a mount of our sidecar is the node agent's, which is ours to add or remove.
fn is_node_agent_mount(mount: &Value) -> bool {
    mount.get("mountPath").and_then(Value::as_str) == Some(node_agent::MOUNT_PATH)
}

/// Adds, updates or removes our sidecar so that it matches `plan`; returns its name.
/// Our sidecar is recognised by its command, never by its name, so a user's container
/// that only shares the name is never touched.
///
/// An existing sidecar is updated key by key ([`OWNED_KEYS`]) and keeps its name, so a
/// second pass — or the Pod-level pass of a controller-created pod — yields no patch.
/// What admission plugins add to it before we see the Pod (the ServiceAccount token
/// mount, an Indexed Job's `JOB_COMPLETION_INDEX`) is kept — unless a mount of theirs
/// lies inside a target: then the sidecar is removed (fail closed) with a warning.
pub fn apply(
    spec: &mut Value,
    plan: Option<&SidecarPlan>,
    config: &Config,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let position = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .and_then(|list| list.iter().position(is_our_sidecar));
    let Some(plan) = plan else {
        if let Some(index) = position {
            remove(spec, index);
        }
        return None;
    };
    let Some(index) = position else {
        let name = free_container_name(spec, NAME);
        let wanted = plan.container(spec, config, &name);
        let slot = spec
            .as_object_mut()?
            .entry("initContainers")
            .or_insert(Value::Null);
        if slot.is_null() {
            *slot = Value::Array(Vec::new());
        }
        let list = slot.as_array_mut()?;
        list.insert(place(list), Value::Object(wanted));
        return Some(name);
    };
    let index = keep_in_place(spec, index)?;
    let name = spec["initContainers"][index]
        .get("name")
        .and_then(Value::as_str)?
        .to_owned();
    let mut wanted = plan.container(spec, config, &name);
    let existing = spec["initContainers"][index].as_object_mut()?;
    for key in OWNED_KEYS {
        let value = match *key {
            "env" => with_others(existing.get("env"), &plan.env, |e| e.get("name").cloned()),
            "volumeMounts" => {
                // A node agent mount of an earlier pass that is no longer wanted goes.
                let own = plan.own_mounts();
                let kept: Option<Value> = existing.get(key).and_then(Value::as_array).map(|all| {
                    all.iter()
                        .filter(|m| !is_node_agent_mount(m) || own.contains(m))
                        .cloned()
                        .collect()
                });
                with_others(kept.as_ref().or(existing.get(key)), &own, |m| {
                    let path = m.get("mountPath").and_then(Value::as_str)?;
                    targets::normalize(path).map(Value::String)
                })
            }
            _ => wanted.remove(key),
        };
        match value {
            Some(value) if existing.get(key) != Some(&value) => {
                existing.insert((*key).to_owned(), value);
            }
            Some(_) => {}
            None => {
                existing.remove(key);
            }
        }
    }
    let mounts = existing.get("volumeMounts").and_then(Value::as_array);
    if let Err(problem) = check_merged(mounts.map_or(&[], Vec::as_slice), &plan.targets) {
        warnings.push(format!("cleanup sidecar removed: {problem}"));
        remove(spec, index);
        return None;
    }
    Some(name)
}

/// docs/DESIGN.md#the-sidecar: where our sidecar goes in `list` (without it): before the first user
/// native sidecar, else last. Native sidecars stop in reverse order, so ours stops after every
/// one that may still write or ship the directory; it needs nothing from them, and the
/// installer (first, see `delivery`) is an ordinary init container.
fn place(list: &[Value]) -> usize {
    list.iter()
        .position(|c| {
            !is_our_sidecar(c) && c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
        })
        .unwrap_or(list.len())
}

/// Moves our sidecar at `index` to its [`place`] when a user sidecar came before it (say
/// an UPDATE added one); returns where it now is.
fn keep_in_place(spec: &mut Value, index: usize) -> Option<usize> {
    let list = spec.get_mut("initContainers")?.as_array_mut()?;
    let ours = list.remove(index);
    let wanted = place(list);
    list.insert(wanted, ours);
    Some(wanted)
}

fn remove(spec: &mut Value, index: usize) {
    if let Some(list) = spec.get_mut("initContainers").and_then(Value::as_array_mut) {
        list.remove(index);
        if list.is_empty() {
            spec.as_object_mut().map(|s| s.remove("initContainers"));
        }
    }
}
