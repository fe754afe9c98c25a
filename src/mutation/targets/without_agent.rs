//! docs/DESIGN.md#identity-is-checked-on-the-node: without the node agent's word, the
//! cleaner program empties only a directory of its pod's own, named by the pod's uid
//! (`subPathExpr: $(POD_UID)`; issue 31). A fixed directory may be where a link planted on
//! the node leads (another container's root filesystem repeats any path), or where a
//! Job's replacement pod already works: only the node can tell. So where the config names
//! no `nodeAgent`, each such target is said at admission, not first in a
//! `FailedPreStopHook` Event.

use crate::json::Value;
use crate::mutation::targets::sharing::is_private;
use crate::mutation::warning::cited;

/// One warning per target of `container`: one that is not a per-pod directory (its
/// mount's `subPathExpr` does not name the pod's uid) is not cleaned without the agent;
/// a per-pod one is, but without the node's word on who else reads it: a reader on the
/// node of a directory above it (a log shipper mounting the parent) is not looked for
/// (issue 38, class 9). Said, rather than cleaning nothing: the directory is the pod's
/// own by its name, and the install without the agent is the operator's choice.
pub fn warn_fixed(container: &Value, name: &str, paths: &[String], warnings: &mut Vec<String>) {
    let mounts = container
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for path in paths {
        // The mount the target is on: the deepest whose mountPath holds it. A plain
        // lookup, not a parse of every mount (the seed review pays for this warning).
        let mount = mounts
            .iter()
            .filter_map(|m| Some((m, m.get("mountPath")?.as_str()?.trim_end_matches('/'))))
            .filter(|(_, at)| holds(at, path))
            .max_by_key(|(_, at)| at.len());
        let per_pod = mount.is_some_and(|(m, _)| is_private(container, m));
        if !per_pod {
            warnings.push(format!(
                "container {}: {} is not cleaned without the node agent (config nodeAgent): \
                 only a per-pod directory is; use subPathExpr: $(POD_UID)",
                cited(format_args!("{name:?}")),
                cited(path)
            ));
        } else {
            warnings.push(format!(
                "container {}: {} is cleaned without the node agent (config nodeAgent): a \
                 reader on the node of a directory above it is not looked for",
                cited(format_args!("{name:?}")),
                cited(path)
            ));
        }
    }
}

/// One warning per target of `container`, served by the sidecar of a pod whose
/// `restartPolicy` (`policy`) lets the kubelet restart it in place: its SIGTERM may be a
/// sandbox recreation's, and only the node agent can say that the pod is ending (issue
/// 31), so without it the sidecar removes nothing, per-pod directory or not.
pub fn warn_restartable(name: &str, paths: &[String], policy: &str, warnings: &mut Vec<String>) {
    for path in paths {
        warnings.push(format!(
            "container {}: {} is not cleaned without the node agent (config nodeAgent): \
             {policy} restarts the pod in place, and only the node can say it is ending",
            cited(format_args!("{name:?}")),
            cited(path)
        ));
    }
}

/// `path` is `at` or below it (`at` without a trailing `/`; empty is `/`).
fn holds(at: &str, path: &str) -> bool {
    at.is_empty()
        || path
            .strip_prefix(at)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}
