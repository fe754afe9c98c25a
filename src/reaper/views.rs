//! What a pod's containers reach on the node, for who uses a directory (issue 32,
//! finding 2): each mount as it shows its volume, not the volume as declared; and which
//! read-only whole-node views are not uses (docs/REAPER.md#when).

use crate::config::Config;
use crate::json::Value;
use crate::mutation::targets::{HostPath, View};
use std::collections::HashSet;

/// What the pod's containers can reach: each mount as it shows the volume (its
/// `subPath`, its `subPathExpr` expanded from the pod, or, when that cannot be expanded,
/// the known part and anything below it), and a volume as declared only when no
/// container mounts it (the kubelet still sets it up). So the pods of one Job that mount
/// `/mnt/scratch/jobs` with `subPathExpr: $(POD_UID)` each reach their own directory,
/// and never hold each other's (issue 32, finding 2).
///
/// A view of a `read_only` volume is left out only where it shows a directory strictly
/// above every allowed prefix: a read-only mount of `/mnt` with `subPath: scratch/job`
/// reads the directory itself and keeps it, whatever its volume is.
pub fn reachable(views: Vec<View>, read_only: &HashSet<String>, config: &Config) -> Vec<HostPath> {
    let mounted: HashSet<String> = views
        .iter()
        .filter(|view| !view.declared)
        .map(|view| view.volume.clone())
        .collect();
    views
        .into_iter()
        .filter(|view| !view.declared || !mounted.contains(&view.volume))
        .filter(|view| {
            !(read_only.contains(&view.volume)
                && view.host.open.is_none()
                && above_every_prefix(&view.host.known, config))
        })
        .map(|view| view.host)
        .collect()
}

/// Whether `path` is strictly above every allowed prefix (and there is one).
fn above_every_prefix(path: &str, config: &Config) -> bool {
    let path = path.trim_end_matches('/');
    !config.allowed_host_path_prefixes.is_empty()
        && config.allowed_host_path_prefixes.iter().all(|prefix| {
            let prefix = prefix.trim_end_matches('/');
            prefix != path
                && prefix
                    .strip_prefix(path)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
}

/// The hostPath volumes strictly above every allowed prefix that some container mounts
/// and every container mounts `readOnly: true` (init, app, ephemeral, ours).
pub fn read_only_views(spec: &Value, config: &Config) -> HashSet<String> {
    let mut read_only = HashSet::new();
    let mut written = HashSet::new();
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        let containers = spec.get(field).and_then(Value::as_array);
        for mount in containers
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("volumeMounts").and_then(Value::as_array))
            .flatten()
        {
            let Some(name) = mount.get("name").and_then(Value::as_str) else {
                continue;
            };
            if mount.get("readOnly").and_then(Value::as_bool) == Some(true) {
                read_only.insert(name.to_owned());
            } else {
                written.insert(name.to_owned());
            }
        }
    }
    let volumes = spec.get("volumes").and_then(Value::as_array);
    volumes
        .into_iter()
        .flatten()
        .filter_map(|volume| {
            let name = volume.get("name").and_then(Value::as_str)?;
            let path = volume.pointer("/hostPath/path").and_then(Value::as_str)?;
            (read_only.contains(name)
                && !written.contains(name)
                && above_every_prefix(path, config))
            .then(|| name.to_owned())
        })
        .collect()
}
