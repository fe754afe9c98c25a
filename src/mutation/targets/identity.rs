//! The identity a target must have on the node, as the cleaner program checks it at run
//! time (docs/DESIGN.md#identity-is-checked-on-the-node).
//!
//! The webhook's string rules decide what to *ask* for; the program, inside the
//! container, compares the `root` of the target's mount in `/proc/self/mountinfo` (the
//! directory the node really mounted, after every symlink it resolved) with the host path
//! handed to it here as `--host`:
//! - `hostPath.path` + `subPath` + the target's suffix below its mount, with every `$`
//!   written `$$`;
//! - a `subPathExpr` kept verbatim in Kubernetes' `$(VAR)` syntax: the program expands it
//!   from its own environment (the container's, or the sidecar's copies of the entries
//!   it references) exactly as the kubelet expands it;
//! - `--whole-filesystem` when the host path of the target's mount is exactly one of
//!   `allowedHostPathPrefixes`: only then may that mount be a whole filesystem's root.
//!
//! A target that is not on a hostPath volume, or whose host path cannot be written (an
//! unreadable `hostPath.path` or `subPath`), gets no `--host`: the program refuses it.

use super::host::volume;
use super::mounts::{mount_of, Mount};
use crate::config::Config;
use crate::json::Value;
use crate::policy::normalize;
use prestop_clean::argv::Target;

/// [`identify`] for each of `paths`, cleaned by `container` (its own mounts).
pub fn identify_in(
    spec: &Value,
    container: &Value,
    paths: &[String],
    config: &Config,
) -> Vec<Target> {
    identify_all(spec, &super::mounts::mounts(container), paths, config)
}

/// `target` (a normalized container path) with the identity it must have, for a
/// container whose volume mounts are `mounts` in the pod `spec`.
pub fn identify(spec: &Value, mounts: &[Mount], target: &str, config: &Config) -> Target {
    let Some((host, mount_host)) = expected_host(spec, mounts, target) else {
        return Target::path_only(target);
    };
    let whole_filesystem = mount_host.is_some_and(|mount_host| {
        config
            .allowed_host_path_prefixes
            .iter()
            .filter_map(|prefix| normalize(prefix))
            .any(|prefix| prefix == mount_host)
    });
    Target {
        path: target.to_owned(),
        host: Some(host),
        whole_filesystem,
    }
}

/// [`identify`] for each of `targets`.
pub fn identify_all(
    spec: &Value,
    mounts: &[Mount],
    targets: &[String],
    config: &Config,
) -> Vec<Target> {
    targets
        .iter()
        .map(|target| identify(spec, mounts, target, config))
        .collect()
}

/// The `--host` text of `target`, and the exact host path of its mount when no
/// `subPathExpr` is involved.
fn expected_host(spec: &Value, mounts: &[Mount], target: &str) -> Option<(String, Option<String>)> {
    let mount = mount_of(mounts, target)?;
    let host_path = volume(spec, mount.volume)?
        .get("hostPath")
        .filter(|h| !h.is_null())?
        .get("path")
        .and_then(Value::as_str)
        .and_then(normalize)?;
    let text = |key: &str| {
        mount
            .raw
            .get(key)
            .filter(|v| !v.is_null())
            .map(|v| v.as_str().map(str::to_owned))
    };
    let suffix = mount.below(target);
    match (text("subPath"), text("subPathExpr")) {
        (Some(Some(sub)), None) if !sub.is_empty() => {
            let sub = normalize(&format!("/{sub}"))?;
            let mount_host = join(&host_path, &sub);
            Some((escape(&join(&mount_host, suffix)), Some(mount_host)))
        }
        (None, Some(Some(expr))) if !expr.is_empty() => {
            // Verbatim: the program expands it as the kubelet does. A '/' between the
            // parts keeps it below the volume's path even when it expands to nothing.
            let base = if host_path == "/" {
                String::new()
            } else {
                escape(&host_path)
            };
            Some((format!("{base}/{expr}{}", escape(suffix)), None))
        }
        (None | Some(Some(_)), None) | (None, Some(Some(_))) => {
            Some((escape(&join(&host_path, suffix)), Some(host_path)))
        }
        // Both set, or not strings: the kubelet refuses the mount; so does the program.
        _ => None,
    }
}

/// `base` + `suffix` (empty, or absolute and normalized).
fn join(base: &str, suffix: &str) -> String {
    match (base, suffix) {
        (base, "" | "/") => base.to_owned(),
        ("/", suffix) => suffix.to_owned(),
        (base, suffix) => format!("{base}{suffix}"),
    }
}

/// A literal path in `$(VAR)` syntax: every `$` doubled.
fn escape(path: &str) -> String {
    path.replace('$', "$$")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;
    use crate::mutation::targets::container_mounts;

    fn identify_in(spec: &Value, target: &str, config: &Config) -> Target {
        let mounts = container_mounts(&spec["containers"][0]).unwrap();
        identify(spec, &mounts, target, config)
    }

    #[test]
    fn host_paths_as_the_program_reads_them() {
        let spec = json!({
            "containers": [{"volumeMounts": [
                {"name": "h", "mountPath": "/data"},
                {"name": "h", "mountPath": "/sub", "subPath": "a//b/"},
                {"name": "h", "mountPath": "/expr", "subPathExpr": "$(POD_NAME)/x"},
                {"name": "root", "mountPath": "/host"},
                {"name": "e", "mountPath": "/empty"},
                {"name": "h", "mountPath": "/both", "subPath": "a", "subPathExpr": "b"},
            ]}],
            "volumes": [
                {"name": "h", "hostPath": {"path": "/mnt/$x/"}},
                {"name": "root", "hostPath": {"path": "/"}},
                {"name": "e", "emptyDir": {}},
            ],
        });
        let config = Config {
            allowed_host_path_prefixes: vec!["/mnt/$x/a/b/".into()],
            ..Config::default()
        };
        let host = |target: &str| identify_in(&spec, target, &config).host;
        assert_eq!(host("/data").as_deref(), Some("/mnt/$$x"));
        assert_eq!(host("/data/k$/l").as_deref(), Some("/mnt/$$x/k$$/l"));
        assert_eq!(host("/sub/c").as_deref(), Some("/mnt/$$x/a/b/c"));
        assert_eq!(host("/expr").as_deref(), Some("/mnt/$$x/$(POD_NAME)/x"));
        assert_eq!(host("/expr/y").as_deref(), Some("/mnt/$$x/$(POD_NAME)/x/y"));
        assert_eq!(host("/host/srv").as_deref(), Some("/srv"));
        assert_eq!(host("/empty"), None);
        assert_eq!(host("/both"), None);
        // The mount's host path is exactly an allowed prefix: it may be a whole disk.
        assert!(identify_in(&spec, "/sub", &config).whole_filesystem);
        assert!(identify_in(&spec, "/sub/c", &config).whole_filesystem);
        assert!(!identify_in(&spec, "/data", &config).whole_filesystem);
        assert!(!identify_in(&spec, "/expr", &config).whole_filesystem);
    }
}
