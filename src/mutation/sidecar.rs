//! SPEC §7: the native cleanup sidecar, an init container with `restartPolicy: Always`.
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

use super::hook;
pub use super::sidecar_plan::SidecarPlan;
use crate::config::Config;
use serde_json::{json, Map, Value};

/// The sidecar's name, unless a container of the pod already has it: then
/// `prestop-cleanup-2`, `-3`, … (see [`free_name`]).
pub const NAME: &str = "prestop-cleanup";

/// The sidecar's shell; the configured image must provide it (busybox does).
const SHELL: &str = "/bin/sh";

impl SidecarPlan {
    /// Our sidecar: exact mounts and env from [`SidecarPlan`], and a securityContext that
    /// meets Pod Security `restricted` as the served containers' numeric user.
    fn container(&self, config: &Config, name: &str) -> Map<String, Value> {
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
        container.insert("image".into(), json!(config.sidecar.image));
        container.insert(
            "command".into(),
            json!(hook::sidecar_argv(SHELL, &self.targets)),
        );
        container.insert("restartPolicy".into(), json!("Always"));
        if !self.env.is_empty() {
            container.insert("env".into(), Value::Array(self.env.clone()));
        }
        container.insert("volumeMounts".into(), Value::Array(self.mounts.clone()));
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

/// Whether an init container is the sidecar we generated (by its command, not its name).
fn is_ours(container: &Value) -> bool {
    container
        .get("command")
        .and_then(Value::as_array)
        .and_then(|argv| {
            argv.iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .is_some_and(|argv| hook::sidecar_targets(&argv).is_some())
}

/// The first of `prestop-cleanup`, `prestop-cleanup-2`, … that no container of the pod
/// (init, app or ephemeral) is named.
fn free_name(spec: &Value) -> String {
    let taken: Vec<&str> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .filter_map(|key| spec.get(*key).and_then(Value::as_array))
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    std::iter::once(NAME.to_owned())
        .chain((2..).map(|n| format!("{NAME}-{n}")))
        .find(|name| !taken.contains(&name.as_str()))
        .unwrap_or_else(|| NAME.to_owned())
}

/// Adds, updates or removes our sidecar so that it matches `plan`; returns its name.
/// Our sidecar is recognised by its command, never by its name, so a user's container
/// that only shares the name is never touched.
///
/// An existing sidecar is updated key by key ([`OWNED_KEYS`]) and keeps its name, so a
/// second pass — or the Pod-level pass of a controller-created pod — yields no patch.
pub fn apply(spec: &mut Value, plan: Option<&SidecarPlan>, config: &Config) -> Option<String> {
    let position = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .and_then(|list| list.iter().position(is_ours));
    match (plan, position) {
        (None, None) => None,
        (None, Some(index)) => {
            let list = spec
                .get_mut("initContainers")
                .and_then(Value::as_array_mut)?;
            list.remove(index);
            if list.is_empty() {
                spec.as_object_mut().map(|s| s.remove("initContainers"));
            }
            None
        }
        (Some(plan), Some(index)) => {
            let existing = spec["initContainers"][index].as_object_mut()?;
            let name = existing.get("name").and_then(Value::as_str)?.to_owned();
            let mut wanted = plan.container(config, &name);
            for key in OWNED_KEYS {
                match wanted.remove(*key) {
                    Some(value) if existing.get(*key) != Some(&value) => {
                        existing.insert((*key).to_owned(), value);
                    }
                    Some(_) => {}
                    None => {
                        existing.remove(*key);
                    }
                }
            }
            Some(name)
        }
        (Some(plan), None) => {
            let name = free_name(spec);
            let slot = spec
                .as_object_mut()?
                .entry("initContainers")
                .or_insert(Value::Null);
            if slot.is_null() {
                *slot = Value::Array(Vec::new());
            }
            slot.as_array_mut()?
                .push(Value::Object(plan.container(config, &name)));
            Some(name)
        }
    }
}
