//! Host paths: which directory on the node a container path is (docs/DESIGN.md#targets).
//!
//! The host path of a target is the volume's `hostPath.path` + the mount's `subPath` + the
//! target's suffix below its mount. A `subPathExpr` is a directory below the volume's that
//! only the kubelet knows, so its host path is *open*: any directory below a known prefix
//! (or the prefix itself, when the expression may expand to nothing). Every check treats an
//! open path as every directory it may be: fail closed.

use super::mounts::{kubelet_mount_path, sub_path, Mount, SubPath};
use crate::json::Value;
use crate::mutation::hook::ours::is_our_sidecar;
use crate::policy::{normalize, HostPath, Open};

/// The pod volume called `name`.
pub fn volume<'a>(spec: &'a Value, name: &str) -> Option<&'a Value> {
    spec.get("volumes")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
}

/// The `hostPath.path` of a hostPath volume, normalized; `Some(anywhere)` when it cannot
/// be read (relative, `..`, not a string); `None` for other volume types.
pub fn volume_host_path(volume: &Value) -> Option<HostPath> {
    let host_path = volume.get("hostPath").filter(|h| !h.is_null())?;
    Some(
        host_path
            .get("path")
            .and_then(Value::as_str)
            .and_then(normalize)
            .map_or_else(HostPath::anywhere, HostPath::exact),
    )
}

/// The host directory a mount shows, when its volume is a hostPath; `Err` with the bad
/// sub path when it cannot be known.
pub fn mount_host_path(spec: &Value, mount: &Mount) -> Option<Result<HostPath, String>> {
    mount_host_path_with(spec, mount, &mount.sub_path)
}

/// [`mount_host_path`] with `sub_path` in place of the mount's own (a `subPathExpr` the
/// caller expanded).
pub fn mount_host_path_with(
    spec: &Value,
    mount: &Mount,
    sub_path: &SubPath,
) -> Option<Result<HostPath, String>> {
    let base = volume_host_path(volume(spec, mount.volume)?)?;
    Some(with_sub_path(base, sub_path))
}

fn with_sub_path(base: HostPath, sub_path: &SubPath) -> Result<HostPath, String> {
    match sub_path {
        SubPath::Whole => Ok(base),
        SubPath::Fixed(path) => Ok(base.join(&format!("/{path}"))),
        SubPath::Expr { non_empty, .. } => Ok(HostPath {
            open: Some(match (base.open, non_empty) {
                (Some(Open::AtOrBelow), _) | (None, false) => Open::AtOrBelow,
                _ => Open::Below,
            }),
            known: base.known,
        }),
        SubPath::Invalid(text) => Err(text.clone()),
    }
}

/// Where one hostPath volume is seen: through a mount (volume + sub path), or declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    pub volume: String,
    pub sub_path: SubPath,
    pub host: HostPath,
    /// The container path, for messages; `None` for the volume as declared, and for a
    /// mount whose path the kubelet's way cannot be read (`/b/../c`).
    pub mount_path: Option<String>,
    /// The volume as declared in `spec.volumes`, not a container's mount of it.
    pub declared: bool,
}

/// Every place a hostPath volume of the pod shows a host directory: each volume as
/// declared in `spec.volumes` (mounted or not), and each mount of one in any container
/// (init, app, ephemeral). A mount we cannot read shows its volume's whole tree.
pub fn pod_views(spec: &Value) -> Vec<View> {
    pod_views_resolving(spec, &|_, _| None)
}

/// [`pod_views`], with `resolve(mount, container)` naming the directory a `subPathExpr`
/// expands to when the caller knows it for certain (the node reaper sees the pod, not a
/// template); `None` keeps it open.
pub fn pod_views_resolving(
    spec: &Value,
    resolve: &dyn Fn(&Value, &Value) -> Option<String>,
) -> Vec<View> {
    let mut views = Vec::new();
    for volume in spec
        .get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(host) = volume_host_path(volume) {
            let name = volume.get("name").and_then(Value::as_str).unwrap_or("");
            views.push(View {
                volume: name.to_owned(),
                sub_path: SubPath::Whole,
                host,
                mount_path: None,
                declared: true,
            });
        }
    }
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        let containers = spec.get(field).and_then(Value::as_array);
        for container in containers
            .into_iter()
            .flatten()
            .filter(|c| !is_our_sidecar(c))
        {
            let list = container.get("volumeMounts").and_then(Value::as_array);
            for raw in list.into_iter().flatten() {
                if let Some(view) = mount_view(spec, raw, container, resolve) {
                    views.push(view);
                }
            }
        }
    }
    views
}

/// Where each mount of one `container` shows a hostPath volume's directory: the views
/// [`pod_views`] gives for that container, with every `subPathExpr` kept open.
pub fn container_views(spec: &Value, container: &Value) -> Vec<View> {
    let list = container.get("volumeMounts").and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .filter_map(|raw| mount_view(spec, raw, container, &|_, _| None))
        .collect()
}

fn mount_view(
    spec: &Value,
    raw: &Value,
    container: &Value,
    resolve: &dyn Fn(&Value, &Value) -> Option<String>,
) -> Option<View> {
    let name = raw.get("name").and_then(Value::as_str)?;
    let base = volume_host_path(volume(spec, name)?)?;
    let sub_path = match sub_path(raw, container) {
        expr @ SubPath::Expr { .. } => match resolve(raw, container) {
            Some(known) if known.is_empty() => SubPath::Whole,
            Some(known) => SubPath::Fixed(known),
            None => expr,
        },
        other => other,
    };
    // An invalid sub path may be joined in ways we cannot predict (`x/../..` is above the
    // volume): it may show any directory of the node.
    let host = with_sub_path(base, &sub_path).unwrap_or_else(|_| HostPath::anywhere());
    let mount_path = raw
        .get("mountPath")
        .and_then(Value::as_str)
        .and_then(kubelet_mount_path);
    Some(View {
        volume: name.to_owned(),
        sub_path,
        host,
        mount_path,
        declared: false,
    })
}
