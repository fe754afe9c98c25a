//! SPEC §7: the native cleanup sidecar, an init container with `restartPolicy: Always`.
//!
//! The kubelet sends SIGTERM to sidecars only after every app container has stopped —
//! when a Job finishes and when its pod is deleted — so the cleanup, which runs in the
//! sidecar's SIGTERM handler, starts after the app stopped writing. It has no preStop of
//! its own: on deletion that would run while the app may still write.

use super::hook;
use super::targets::{self};
use crate::config::{CleanerMode, Config};
use serde_json::{json, Map, Value};

pub const NAME: &str = "prestop-cleanup";

/// The shell sidecar's shell (`cleaner.mode: shell`); its image must provide it (busybox does).
const SHELL: &str = "/bin/sh";

/// What the sidecar must clean and mount, gathered from the containers it serves.
#[derive(Debug, Default)]
pub struct SidecarPlan {
    pub targets: Vec<String>,
    mounts: Vec<Value>,
    run_as_user: Option<Value>,
    run_as_group: Option<Value>,
    user_of: Option<String>,
}

impl SidecarPlan {
    /// Adds a container's targets: their mounts are copied so the sidecar sees the same
    /// directories at the same paths, and it runs as that container's user and group.
    pub fn add(&mut self, container: &Value, paths: &[String], warnings: &mut Vec<String>) {
        let mounts = targets::mounts(container);
        for path in paths {
            let Some(mount) = targets::mount_of(&mounts, path) else {
                continue;
            };
            if !self
                .mounts
                .iter()
                .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(mount.path.as_str()))
            {
                let mut copy = Map::new();
                for key in ["name", "mountPath", "subPath", "subPathExpr"] {
                    if let Some(value) = mount.raw.get(key) {
                        copy.insert(key.to_owned(), value.clone());
                    }
                }
                self.mounts.push(Value::Object(copy));
            }
            if !self.targets.contains(path) {
                self.targets.push(path.clone());
            }
        }
        let name = container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let context = container.get("securityContext");
        let user = context.and_then(|c| c.get("runAsUser")).cloned();
        let group = context.and_then(|c| c.get("runAsGroup")).cloned();
        match &self.user_of {
            None => {
                self.user_of = Some(name.to_owned());
                self.run_as_user = user;
                self.run_as_group = group;
            }
            Some(first) if self.run_as_user != user || self.run_as_group != group => warnings.push(format!(
                "container {name:?} runs as another user than {first:?}; the cleanup sidecar runs as {first:?}"
            )),
            Some(_) => {}
        }
    }

    fn container(&self, config: &Config) -> Map<String, Value> {
        let mut security = json!({
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]},
        });
        if let Some(user) = &self.run_as_user {
            security["runAsUser"] = user.clone();
        }
        if let Some(group) = &self.run_as_group {
            security["runAsGroup"] = group.clone();
        }
        let mut container = Map::new();
        container.insert("name".into(), json!(NAME));
        // The cleaner program from its own image (no shell), or the busybox script.
        let (image, command) = match config.cleaner.mode {
            CleanerMode::Binary => (
                config.cleaner.image.as_str(),
                hook::program_sidecar_argv(&self.targets),
            ),
            CleanerMode::Shell => (
                config.sidecar.shell_image(),
                hook::sidecar_argv(SHELL, &self.targets),
            ),
        };
        container.insert("image".into(), json!(image));
        container.insert("command".into(), json!(command));
        container.insert("restartPolicy".into(), json!("Always"));
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

/// Whether one of the user's own init containers already has our sidecar's name: then we
/// can add no sidecar (names are unique) and must not touch theirs.
pub fn name_taken(spec: &Value) -> bool {
    spec.get("initContainers")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter()
                .any(|c| c.get("name").and_then(Value::as_str) == Some(NAME) && !is_ours(c))
        })
}

/// Adds, updates or removes our sidecar so that it matches `plan`. A user's container
/// that only shares the name is never touched (see [`name_taken`]).
///
/// An existing sidecar is updated key by key: fields the API server defaulted after our
/// first patch (`imagePullPolicy`, `terminationMessagePath`, …) are left alone, so a
/// second pass — or the Pod-level pass of a controller-created pod — yields no patch.
pub fn apply(spec: &mut Value, plan: Option<&SidecarPlan>, config: &Config) {
    let position = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .position(|c| c.get("name").and_then(Value::as_str) == Some(NAME))
        });
    match (plan, position) {
        (None, None) => {}
        (None, Some(index)) => {
            let Some(list) = spec.get_mut("initContainers").and_then(Value::as_array_mut) else {
                return;
            };
            if is_ours(&list[index]) {
                list.remove(index);
                if list.is_empty() {
                    spec.as_object_mut().map(|s| s.remove("initContainers"));
                }
            }
        }
        (Some(_), Some(index)) if !is_ours(&spec["initContainers"][index]) => {}
        (Some(plan), Some(index)) => {
            if let Some(existing) = spec["initContainers"][index].as_object_mut() {
                for (key, value) in plan.container(config) {
                    if existing.get(&key) != Some(&value) {
                        existing.insert(key, value);
                    }
                }
            }
        }
        (Some(plan), None) => {
            let Some(spec_map) = spec.as_object_mut() else {
                return;
            };
            let slot = spec_map.entry("initContainers").or_insert(Value::Null);
            if slot.is_null() {
                *slot = Value::Array(Vec::new());
            }
            if let Some(list) = slot.as_array_mut() {
                list.push(Value::Object(plan.container(config)));
            }
        }
    }
}
