//! Targets: which directories a container's cleanup may delete the contents of
//! (docs/DESIGN.md#targets).
//!
//! Takes the settings' cleanup paths (or `auto`) and each container's mounts; hands on,
//! per container, the checked targets with the identity each must have on the node (or a
//! refusal the user reads) to `pod`, which has them run by a hook or the sidecar.
//!
//! Everything here reads the pod spec only and is pure. A target is a container path at or
//! below one of the cleaning container's own writable mounts, never `/`, and is refused
//! (fail closed) when
//! - a mount path of that container cannot be read as the kubelet reads it ([`mounts`]),
//! - another mount of that container is at or below it, or shares its mount's path,
//! - its host path lies outside `allowedHostPathPrefixes` (none configured: every host
//!   path does), cannot be known, is inside a protected tree or contains a protected
//!   entry ([`crate::policy`]),
//! - another view of a hostPath volume of the pod (any container, or just declared) has a
//!   host path at or below it ([`host`]).
//!
//! [`check_target`] is the one rule; [`auto_targets`] and [`check_explicit`] apply it to a
//! container, and the sidecar applies it to its own merged mount list.

pub(in crate::mutation) mod env_refs;
mod host;
mod identity;
pub(crate) mod messages;
mod mounts;
mod refusal;
pub(in crate::mutation) mod sharing;
pub(in crate::mutation) mod stale_paths;
pub(in crate::mutation) mod without_agent;

pub use host::{
    container_views, mount_host_path, mount_host_path_with, pod_views, pod_views_resolving, volume,
    View,
};
pub use identity::{identify, identify_all, identify_in};
pub use mounts::{
    container_mounts, kubelet_mount_path, mount_of, mounts, BadMount, Mount, SubPath,
};
pub use refusal::PathRefusal;
// The host-path policy the target rule applies, under the names its callers have long
// used here.
pub use crate::policy::{
    is_allowed, is_at_or_below, is_protected_host_path, node_agent_directory_refusal, normalize,
    on_one_line, prefix_refusal, protected_entry, HostPath, Open, PROTECTED_EXACT, PROTECTED_TREES,
    REAPER_STATE_TREE,
};

use crate::config::Config;
use crate::json::Value;

/// The one rule: may `target` (a normalized container path) be emptied by a container
/// whose volume mounts are `mounts`, in the pod `spec`? `mounts` must be every mount of
/// the cleaning container — an app container's own ([`container_mounts`]) or the
/// sidecar's merged list. Returns the host path when the target is on a hostPath volume.
pub fn check_target(
    spec: &Value,
    mounts: &[Mount],
    target: &str,
    config: &Config,
) -> Result<Option<HostPath>, PathRefusal> {
    if target == "/" {
        return Err(PathRefusal::Protected {
            host_path: "/".to_owned(),
            entry: "/".to_owned(),
        });
    }
    let mount = mount_of(mounts, target).ok_or(PathRefusal::NotMounted)?;
    // Before anything else: with two mounts at one path, which one is "the" mount of the
    // target is a guess (the API server allows `/data` and `/data/`).
    if mounts.iter().filter(|m| m.path == mount.path).count() > 1 {
        return Err(PathRefusal::Duplicate(mount.path.clone()));
    }
    if !mount.writable {
        return Err(PathRefusal::ReadOnly(mount.path.clone()));
    }
    if let Some(nested) = mounts
        .iter()
        .find(|m| m.path != mount.path && is_at_or_below(&m.path, target))
    {
        return Err(PathRefusal::Nested(nested.path.clone()));
    }
    let declared = spec.get("volumes").and_then(Value::as_array);
    let same_name = |v: &&Value| v.get("name").and_then(Value::as_str) == Some(mount.volume);
    if declared.is_some_and(|list| list.iter().filter(same_name).count() > 1) {
        return Err(PathRefusal::AmbiguousVolume(mount.volume.to_owned()));
    }
    let Some(host) = mount_host_path(spec, mount) else {
        return Ok(None);
    };
    let host = host
        .map_err(|sub_path| PathRefusal::BadSubPath {
            mount: mount.path.clone(),
            sub_path,
        })?
        .join(mount.below(target));
    // Both checks refuse; when both apply, the protected entry is named: it says why.
    if let Some(entry) = protected_entry(&host, &config.protected_host_paths) {
        return Err(PathRefusal::Protected {
            host_path: host.display(),
            entry,
        });
    }
    if !is_allowed(&host, &config.allowed_host_path_prefixes) {
        return Err(PathRefusal::NotAllowed {
            host_path: host.display(),
            prefixes: config.allowed_host_path_prefixes.clone(),
        });
    }
    let own = (mount.volume, &mount.sub_path);
    if let Some(view) = pod_views(spec)
        .into_iter()
        .filter(|view| (view.volume.as_str(), &view.sub_path) != own)
        .find(|view| host.may_hold(&view.host))
    {
        return Err(PathRefusal::HostOverlap {
            host_path: host.display(),
            other: view.host.display(),
            volume: view.volume,
        });
    }
    Ok(Some(host))
}

/// What `auto` found in one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoTargets {
    /// Mount paths of writable mounts of cleanable hostPath volumes.
    pub targets: Vec<String>,
    /// Candidates refused, with why: one warning each.
    pub skipped: Vec<(String, PathRefusal)>,
    /// The container's mounts cannot all be read: nothing in it is cleaned.
    pub unreadable: Option<BadMount>,
}

/// Volume sources whose directory on the node the webhook cannot know: a local, hostPath
/// or local-path PersistentVolume (through a claim, or an ephemeral one) and a CSI or flex
/// driver may each put it inside a hostPath target.
const HIDDEN_SOURCES: &[&str] = &["persistentVolumeClaim", "ephemeral", "csi", "flexVolume"];

/// The first volume of the pod with a [`HIDDEN_SOURCES`] source: (name, source).
fn hidden_volume(spec: &Value) -> Option<(String, String)> {
    let volumes = spec.get("volumes").and_then(Value::as_array)?;
    volumes.iter().find_map(|v| {
        let source = HIDDEN_SOURCES.iter().find(|s| v.get(**s).is_some())?;
        let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
        Some((name.to_owned(), (*source).to_owned()))
    })
}

/// `auto`: the container's writable mounts of hostPath directory volumes that pass
/// [`check_target`] — none at all in a pod with a volume whose host directory cannot be
/// seen (issue 17 class 6, fail closed): any of them may lie inside any hostPath target,
/// mounted by another container whose mounts the cleaning container's run-time checks
/// never see. Explicit paths are the user's word and still pass.
pub fn auto_targets(spec: &Value, container: &Value, config: &Config) -> AutoTargets {
    let mut found = AutoTargets::default();
    let mounts = match container_mounts(container) {
        Ok(mounts) => mounts,
        Err(bad) => {
            // Only worth a warning when the container mounts a hostPath at all.
            let raw = container.get("volumeMounts").and_then(Value::as_array);
            let mounts_host_path = raw.into_iter().flatten().any(|m| {
                m.get("name")
                    .and_then(Value::as_str)
                    .and_then(|name| volume(spec, name))
                    .is_some_and(|v| v.get("hostPath").is_some())
            });
            if mounts_host_path {
                found.unreadable = Some(bad);
            }
            return found;
        }
    };
    for mount in mounts.iter().filter(|m| is_candidate(spec, m)) {
        if found.targets.contains(&mount.path)
            || found.skipped.iter().any(|(path, _)| path == &mount.path)
        {
            continue;
        }
        let checked = check_target(spec, &mounts, &mount.path, config).and_then(|host| {
            match hidden_volume(spec) {
                Some((volume, source)) => Err(PathRefusal::HiddenVolume { volume, source }),
                None => Ok(host),
            }
        });
        match checked {
            Ok(_) => found.targets.push(mount.path.clone()),
            Err(refusal) => found.skipped.push((mount.path.clone(), refusal)),
        }
    }
    found
}

/// A writable mount of a hostPath volume of type `""`, `Directory` or `DirectoryOrCreate`.
fn is_candidate(spec: &Value, mount: &Mount) -> bool {
    let Some(host_path) = volume(spec, mount.volume).and_then(|v| v.get("hostPath")) else {
        return false;
    };
    let kind = host_path.get("type").and_then(Value::as_str).unwrap_or("");
    mount.writable && mount.path != "/" && matches!(kind, "" | "Directory" | "DirectoryOrCreate")
}

/// Checks an explicit, already syntax-checked path against one container's mounts.
pub fn check_explicit(
    spec: &Value,
    container: &Value,
    path: &str,
    config: &Config,
) -> Result<(), PathRefusal> {
    // An unreadable mount may be the one that covers `path` (`data/../scratch`), so a
    // container with one refuses every path.
    let mounts =
        container_mounts(container).map_err(|bad| PathRefusal::BadMountPath(bad.mount_path))?;
    match check_target(spec, &mounts, path, config)? {
        Some(_) => Ok(()),
        // Not a host directory, so under no allowed prefix (docs/DESIGN.md#targets: non-hostPath
        // volumes are never targets). `check_target` found the mount, so `mount_of` does too.
        None => Err(PathRefusal::NotHostPath(
            mount_of(&mounts, path).map_or_else(String::new, |m| m.volume.to_owned()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    /// How the sidecar uses the rule: its merged list of the app containers' mounts.
    #[test]
    fn a_merged_mount_list_is_checked_as_one_container() {
        let spec = json!({
            "containers": [
                {"name": "a", "volumeMounts": [{"name": "scratch", "mountPath": "/data"}]},
                {"name": "b", "volumeMounts": [{"name": "db", "mountPath": "/data/keep"}]},
            ],
            "volumes": [
                {"name": "scratch", "hostPath": {"path": "/mnt/scratch"}},
                {"name": "db", "persistentVolumeClaim": {"claimName": "db"}},
            ],
        });
        let config = Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]").unwrap();
        let [a, b] = [&spec["containers"][0], &spec["containers"][1]];
        let own = container_mounts(a).unwrap();
        let host = check_target(&spec, &own, "/data", &config).unwrap();
        assert_eq!(host.map(|h| h.known).as_deref(), Some("/mnt/scratch"));
        let merged: Vec<Mount> = own
            .into_iter()
            .chain(container_mounts(b).unwrap())
            .collect();
        assert_eq!(
            check_target(&spec, &merged, "/data", &config),
            Err(PathRefusal::Nested("/data/keep".into()))
        );
    }

    #[test]
    fn refusals_in_order() {
        let spec = json!({"volumes": [{"name": "h", "hostPath": {"path": "/mnt/h"}}, {"name": "e", "emptyDir": {}}]});
        let container = json!({"volumeMounts": [
            {"name": "h", "mountPath": "/h"},
            {"name": "e", "mountPath": "/h/"},
            {"name": "e", "mountPath": "/ro", "readOnly": true},
            {"name": "h", "mountPath": "/sub", "subPath": "/abs"},
        ]});
        let mounts = container_mounts(&container).unwrap();
        let check = |path: &str| check_target(&spec, &mounts, path, &Config::default());
        assert_eq!(check("/nowhere"), Err(PathRefusal::NotMounted));
        assert_eq!(check("/h/x"), Err(PathRefusal::Duplicate("/h".into())));
        assert_eq!(check("/ro"), Err(PathRefusal::ReadOnly("/ro".into())));
        assert!(matches!(check("/sub"), Err(PathRefusal::BadSubPath { .. })));
        assert!(matches!(check("/"), Err(PathRefusal::Protected { .. })));
    }
}
