//! docs/DESIGN.md#the-hook-and-the-cleaner-program: delivering the cleaner program into the pod.
//!
//! An init container from `cleaner.image`, first in `initContainers`, runs
//! `prestop-clean install /.prestop-injector`: it copies the static program into an
//! `emptyDir`, which every container with a program hook mounts **read-only** at
//! [`PROGRAM_DIR`]. Nothing else of the pod changes.
//!
//! Contract:
//! - Ours is recognised by the installer's exact command (not its name), and the volume by
//!   the installer's mount, so names can take a suffix when the pod already uses ours.
//! - [`Delivery::apply`] adds, updates key by key (fields the API server defaults after
//!   our patch, such as `imagePullPolicy`, stay) or removes the installer, the volume and
//!   the mounts, so a second pass yields no patch and "nothing to clean" takes all of it
//!   back out.
//! - [`diff`] is `json_patch::diff` with one correction: inserting or removing the
//!   installer (or the sidecar) among the user's init containers is one `add`/`remove`
//!   at its index, not a rewrite of every init container after it (`init_diff`).

use crate::json::patch::PatchOperation;
use crate::json::{json, Map, Value};
use crate::mutation::hook::ours::{installer_argv, is_installer};
use crate::mutation::hook::PROGRAM_DIR;
use crate::mutation::inject::named::{
    free_container_name, free_name, list, merge, name_of, remove_at, update_named,
    update_our_mounts,
};
use crate::mutation::inject::others::with_others;

/// Name of the installer init container (a suffix `-2`, `-3`, … when a container has it).
pub const INSTALLER_NAME: &str = "prestop-install";
/// Name of the `emptyDir` that carries the program (suffixed likewise when taken).
pub const VOLUME_NAME: &str = "prestop-clean";
/// The program is a few MiB; a small limit keeps a misbehaving installer from filling the node.
const SIZE_LIMIT: &str = "16Mi";
/// distroless `nonroot`: any numeric non-root user can write an `emptyDir`.
const INSTALLER_USER: u64 = 65532;

/// The names of our installer and volume in one pod spec: found, or chosen free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub installer: String,
    pub volume: String,
}

impl Delivery {
    /// Reads the spec as it came in.
    pub fn of(spec: &Value) -> Delivery {
        let ours = list(spec, "initContainers")
            .iter()
            .find(|c| is_installer(c));
        let installer = ours.and_then(name_of).map(str::to_owned);
        let volume = ours.and_then(|installer| {
            list(installer, "volumeMounts")
                .iter()
                .find(|m| m.get("mountPath").and_then(Value::as_str) == Some(PROGRAM_DIR))
                .and_then(name_of)
                .map(str::to_owned)
        });
        let installer = installer.unwrap_or_else(|| free_container_name(spec, INSTALLER_NAME));
        let volume = volume.unwrap_or_else(|| {
            let taken: Vec<&str> = list(spec, "volumes").iter().filter_map(name_of).collect();
            free_name(VOLUME_NAME, &taken)
        });
        Delivery { installer, volume }
    }

    fn is_our_mount(&self, mount: &Value) -> bool {
        name_of(mount) == Some(self.volume.as_str())
            && mount.get("mountPath").and_then(Value::as_str) == Some(PROGRAM_DIR)
    }

    /// The container's own mount at, above or below [`PROGRAM_DIR`], which would hide
    /// the program or be hidden by it: then that container gets no program hook.
    pub fn conflict<'c>(&self, container: &'c Value) -> Option<&'c str> {
        list(container, "volumeMounts")
            .iter()
            .filter(|mount| !self.is_our_mount(mount))
            .filter_map(|mount| mount.get("mountPath").and_then(Value::as_str))
            .find(|path| overlaps(path, PROGRAM_DIR))
    }

    fn installer_container(&self, image: &str) -> Map<String, Value> {
        let mut container = Map::new();
        container.insert("name".into(), json!(self.installer));
        container.insert("image".into(), json!(image));
        container.insert("command".into(), json!(installer_argv()));
        container.insert(
            "volumeMounts".into(),
            json!([{"name": self.volume, "mountPath": PROGRAM_DIR}]),
        );
        container.insert(
            "resources".into(),
            json!({"requests": {"cpu": "10m", "memory": "16Mi"},
                   "limits": {"cpu": "100m", "memory": "32Mi"}}),
        );
        container.insert(
            "securityContext".into(),
            json!({
                "runAsNonRoot": true,
                "runAsUser": INSTALLER_USER,
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            }),
        );
        container
    }

    /// Makes `spec` match: with any entry of `needs` (one per app container) true, the
    /// installer (first), the volume and a read-only mount in exactly those containers;
    /// otherwise none of them.
    pub fn apply(&self, spec: &mut Value, needs: &[bool], image: &str) {
        let wanted = needs.iter().any(|&need| need);
        self.apply_installer(spec, wanted.then_some(image));
        let volume = json!({"name": self.volume, "emptyDir": {"sizeLimit": SIZE_LIMIT}});
        let volume = volume.as_object().filter(|_| wanted);
        update_named(spec, "volumes", &self.volume, volume);
        let mount = json!({"name": self.volume, "mountPath": PROGRAM_DIR, "readOnly": true});
        update_our_mounts(spec, &self.volume, &mount, needs, &|m| self.is_our_mount(m));
    }

    fn apply_installer(&self, spec: &mut Value, image: Option<&str>) {
        let position = list(spec, "initContainers").iter().position(is_installer);
        let Some(spec_map) = spec.as_object_mut() else {
            return;
        };
        match (image, position) {
            (None, None) => {}
            (None, Some(index)) => remove_at(spec_map, "initContainers", index),
            (Some(image), Some(index)) => {
                if let Some(existing) = spec_map
                    .get_mut("initContainers")
                    .and_then(|list| list.get_mut(index))
                    .and_then(Value::as_object_mut)
                {
                    let mut wanted = self.installer_container(image);
                    let mounts = mounts_with_others(existing.get("volumeMounts"), &wanted);
                    wanted.insert("volumeMounts".into(), mounts);
                    merge(existing, wanted);
                }
            }
            (Some(image), None) => {
                let slot = spec_map.entry("initContainers").or_insert(Value::Null);
                if slot.is_null() {
                    *slot = Value::Array(Vec::new());
                }
                if let Some(list) = slot.as_array_mut() {
                    list.insert(0, Value::Object(self.installer_container(image)));
                }
            }
        }
    }
}

/// Whether a mountPath is at, above or below `dir` ([`PROGRAM_DIR`], or the node agent's
/// mount); one that cannot be read as a clean path (`..`) counts as overlapping, failing
/// closed.
pub(super) fn overlaps(mount_path: &str, dir: &str) -> bool {
    let mut normalized = String::new();
    for segment in mount_path.split('/') {
        match segment {
            "" | "." => {}
            ".." => return true,
            segment => {
                normalized.push('/');
                normalized.push_str(segment);
            }
        }
    }
    normalized.is_empty()
        || normalized == dir
        || dir.starts_with(&format!("{normalized}/"))
        || normalized.starts_with(&format!("{dir}/"))
}

/// The installer's mounts: ours, and what admission plugins added before we see the Pod
/// (the ServiceAccount token's mount), as on the sidecar ([`with_others`]), so that
/// a Pod made from a template we injected needs no patch. A mount of theirs at, above or
/// below the program's directory goes: it would hide what the installer writes there.
fn mounts_with_others(existing: Option<&Value>, wanted: &Map<String, Value>) -> Value {
    let ours: &[Value] = wanted
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let hides = |mount: &Value| {
        !ours.contains(mount)
            && mount
                .get("mountPath")
                .and_then(Value::as_str)
                .is_none_or(|path| overlaps(path, PROGRAM_DIR))
    };
    let list = existing.and_then(Value::as_array);
    // Copied without the hiding ones only when there is one: on every Pod of an injected
    // workload there is none, and the list is read where it is.
    let without_hiding;
    let existing = match list {
        Some(list) if list.iter().any(hides) => {
            without_hiding = Value::Array(list.iter().filter(|m| !hides(m)).cloned().collect());
            Some(&without_hiding)
        }
        _ => existing,
    };
    with_others(existing, ours, |mount| {
        let path = mount.get("mountPath").and_then(Value::as_str)?;
        crate::mutation::targets::normalize(path).map(Value::String)
    })
    .unwrap_or_else(|| Value::Array(ours.to_vec()))
}

/// The patch from `original` to `mutated` (both pod templates: `metadata` + `spec`, at
/// `prefix` of the object), with our init containers added and removed by index (see
/// `init_diff`). The values added are moved out of `mutated`.
pub fn diff(prefix: &str, original: &Value, mutated: &mut Value) -> Vec<PatchOperation> {
    crate::mutation::inject::init_diff::diff(prefix, original, mutated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_mount_paths() {
        for (path, overlapping) in [
            ("/", true),
            ("/.prestop-injector", true),
            ("/.prestop-injector/", true),
            ("//.prestop-injector", true),
            ("/.prestop-injector/bin", true),
            ("/x/../.prestop-injector", true),
            ("/.prestop-injector-x", false),
            ("/.prestop", false),
            ("/data", false),
        ] {
            assert_eq!(overlaps(path, PROGRAM_DIR), overlapping, "{path}");
        }
    }

    #[test]
    fn names_take_a_suffix_when_taken() {
        let spec = json!({
            "initContainers": [{"name": "prestop-install"}],
            "containers": [{"name": "prestop-install-2"}],
            "volumes": [{"name": "prestop-clean"}],
        });
        assert_eq!(
            Delivery::of(&spec),
            Delivery {
                installer: "prestop-install-3".into(),
                volume: "prestop-clean-2".into()
            }
        );
        let delivery = Delivery::of(&json!({}));
        assert_eq!(delivery.installer, INSTALLER_NAME);
        assert_eq!(delivery.volume, VOLUME_NAME);
    }

    #[test]
    fn the_installer_goes_in_front_as_one_add() {
        let original = json!({"spec": {"initContainers": [{"name": "a", "image": "x"}, {"name": "b"}],
            "containers": [{"name": "app"}]}});
        let mut mutated = original.clone();
        let delivery = Delivery::of(&original["spec"]);
        delivery.apply(&mut mutated["spec"], &[true], "img");
        let patch = diff("", &original, &mut mutated.clone());
        let paths: Vec<String> = patch.iter().map(|op| op.path().to_string()).collect();
        assert_eq!(
            paths,
            [
                "/spec/initContainers/0",
                "/spec/containers/0/volumeMounts",
                "/spec/volumes"
            ]
        );
        let patched = crate::json::patch::Patch(patch)
            .apply_to(&original)
            .unwrap();
        assert_eq!(patched, mutated);

        // And back out: one remove, the user's init containers untouched.
        let mut restored = mutated.clone();
        Delivery::of(&mutated["spec"]).apply(&mut restored["spec"], &[false], "img");
        assert_eq!(restored, original);
        let patch = diff("", &mutated, &mut restored.clone());
        assert!(
            matches!(&patch[0], PatchOperation::Remove(op) if op.path == "/spec/initContainers/0")
        );
        let patched = crate::json::patch::Patch(patch).apply_to(&mutated).unwrap();
        assert_eq!(patched, original);
    }
}
