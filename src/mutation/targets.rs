//! SPEC §3: which directories a container's cleanup may delete the contents of.
//!
//! Everything here reads the pod spec only. A target is always a container path at or
//! below one of the container's own writable volume mounts, and never `/`.

use crate::config::Config;
use serde_json::Value;

/// One `volumeMount` of a container, with its path normalized.
#[derive(Debug, Clone)]
pub struct Mount<'a> {
    pub volume: &'a str,
    pub path: String,
    pub writable: bool,
    pub raw: &'a Value,
}

/// The container's volume mounts; entries without a name or an absolute path are ignored.
pub fn mounts(container: &Value) -> Vec<Mount<'_>> {
    let Some(list) = container.get("volumeMounts").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|raw| {
            let volume = raw.get("name")?.as_str()?;
            let path = normalize(raw.get("mountPath")?.as_str()?)?;
            let writable = raw.get("readOnly").and_then(Value::as_bool) != Some(true);
            Some(Mount {
                volume,
                path,
                writable,
                raw,
            })
        })
        .collect()
}

/// Collapses `//`, drops `.` and a trailing `/`; `None` for relative paths or `..`.
pub fn normalize(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut normalized = String::with_capacity(path.len());
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => return None,
            segment => {
                normalized.push('/');
                normalized.push_str(segment);
            }
        }
    }
    if normalized.is_empty() {
        normalized.push('/');
    }
    Some(normalized)
}

/// Whether `path` is `base` or lies below it (both normalized).
pub fn is_at_or_below(path: &str, base: &str) -> bool {
    base == "/"
        || path == base
        || (path.starts_with(base) && path.as_bytes().get(base.len()) == Some(&b'/'))
}

/// The mount a container path lives on: the deepest mount at or above it.
pub fn mount_of<'m, 'a>(mounts: &'m [Mount<'a>], path: &str) -> Option<&'m Mount<'a>> {
    mounts
        .iter()
        .filter(|mount| is_at_or_below(path, &mount.path))
        .max_by_key(|mount| mount.path.len())
}

/// The pod volume called `name`.
pub fn volume<'a>(spec: &'a Value, name: &str) -> Option<&'a Value> {
    spec.get("volumes")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(name))
}

/// Host directories that are never scratch space. Most protect their whole tree; the
/// ones in [`PROTECTED_EXACT`] protect only themselves, because their subdirectories
/// (`/var/lib/myjob`, `/opt/scratch`) are where scratch space usually lives — which is
/// why the tree-protected `/var/lib/kubelet` and friends are listed separately.
const PROTECTED_TREES: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/log",
    "/var/run",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/docker",
];
const PROTECTED_EXACT: &[&str] = &["/", "/home", "/opt", "/srv", "/var", "/var/lib"];

/// Whether a (normalized) host path must never be cleaned.
pub fn is_protected_host_path(host_path: &str, config: &Config) -> bool {
    let first_segment = host_path.split('/').nth(1).unwrap_or("");
    PROTECTED_EXACT.contains(&host_path)
        || first_segment.starts_with("lib") // /lib, /lib32, /lib64, /libx32
        || PROTECTED_TREES.iter().any(|tree| is_at_or_below(host_path, tree))
        || config
            .protected_host_paths
            .iter()
            .filter_map(|path| normalize(path))
            .any(|tree| is_at_or_below(host_path, &tree))
}

/// The host path of a hostPath volume that `auto` may clean, or why not.
pub fn cleanable_host_path(volume: &Value, config: &Config) -> Result<String, HostPathRefusal> {
    let host_path = volume.get("hostPath").ok_or(HostPathRefusal::NotHostPath)?;
    let kind = host_path.get("type").and_then(Value::as_str).unwrap_or("");
    if !matches!(kind, "" | "Directory" | "DirectoryOrCreate") {
        return Err(HostPathRefusal::NotDirectory);
    }
    let path = host_path
        .get("path")
        .and_then(Value::as_str)
        .and_then(normalize)
        .ok_or(HostPathRefusal::Protected)?;
    if is_protected_host_path(&path, config) {
        return Err(HostPathRefusal::Protected);
    }
    let allowed = &config.allowed_host_path_prefixes;
    if !allowed.is_empty()
        && !allowed
            .iter()
            .filter_map(|p| normalize(p))
            .any(|prefix| is_at_or_below(&path, &prefix))
    {
        return Err(HostPathRefusal::NotAllowed);
    }
    Ok(path)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostPathRefusal {
    NotHostPath,
    NotDirectory,
    Protected,
    NotAllowed,
}

/// A mount strictly below `path`: deleting the contents of `path` would reach into it,
/// and that volume may be anything (another hostPath, a Secret, a read-only mount).
pub fn nested_mount<'m, 'a>(mounts: &'m [Mount<'a>], path: &str) -> Option<&'m Mount<'a>> {
    mounts
        .iter()
        .find(|mount| mount.path != path && is_at_or_below(&mount.path, path))
}

/// What `auto` found in one container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoTargets {
    /// Mount paths of writable mounts of cleanable hostPath volumes.
    pub targets: Vec<String>,
    /// Cleanable mounts skipped because another mount lies inside them: (target, nested).
    pub skipped: Vec<(String, String)>,
}

/// `auto`: the container's writable mounts of cleanable hostPath volumes.
pub fn auto_targets(spec: &Value, container: &Value, config: &Config) -> AutoTargets {
    let mounts = mounts(container);
    let mut found = AutoTargets::default();
    for mount in &mounts {
        if !mount.writable || mount.path == "/" || found.targets.contains(&mount.path) {
            continue;
        }
        let Some(volume) = volume(spec, mount.volume) else {
            continue;
        };
        if cleanable_host_path(volume, config).is_err() {
            continue;
        }
        match nested_mount(&mounts, &mount.path) {
            Some(nested) => found
                .skipped
                .push((mount.path.clone(), nested.path.clone())),
            None => found.targets.push(mount.path.clone()),
        }
    }
    found
}

/// Why an explicit path cannot be cleaned in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRefusal {
    /// No mount of the container covers the path.
    NotMounted,
    /// The deepest mount covering the path is read-only.
    ReadOnly(String),
    /// The mount is a hostPath volume on a protected host directory.
    Protected { mount: String, host_path: String },
    /// Another mount lies inside the path.
    Nested(String),
}

/// Checks an explicit, already syntax-checked path against one container's mounts.
pub fn check_explicit(
    spec: &Value,
    container: &Value,
    path: &str,
    config: &Config,
) -> Result<(), PathRefusal> {
    let mounts = mounts(container);
    let mount = mount_of(&mounts, path).ok_or(PathRefusal::NotMounted)?;
    if !mount.writable {
        return Err(PathRefusal::ReadOnly(mount.path.clone()));
    }
    let host_path = volume(spec, mount.volume)
        .and_then(|v| v.get("hostPath"))
        .and_then(|h| h.get("path"))
        .and_then(Value::as_str);
    if let Some(host_path) = host_path {
        let normalized = normalize(host_path);
        if normalized
            .as_deref()
            .is_none_or(|p| is_protected_host_path(p, config))
        {
            return Err(PathRefusal::Protected {
                mount: mount.path.clone(),
                host_path: host_path.to_owned(),
            });
        }
    }
    if let Some(nested) = nested_mount(&mounts, path) {
        return Err(PathRefusal::Nested(nested.path.clone()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_collapses_and_refuses() {
        for (path, normalized) in [
            ("/a/b", Some("/a/b")),
            ("/a//b/", Some("/a/b")),
            ("/a/./b", Some("/a/b")),
            ("/", Some("/")),
            ("//", Some("/")),
            ("a/b", None),
            ("/a/../b", None),
            ("", None),
        ] {
            assert_eq!(normalize(path).as_deref(), normalized, "{path}");
        }
    }

    #[test]
    fn at_or_below_respects_segment_boundaries() {
        assert!(is_at_or_below("/data", "/data"));
        assert!(is_at_or_below("/data/x", "/data"));
        assert!(is_at_or_below("/anything", "/"));
        assert!(!is_at_or_below("/database", "/data"));
        assert!(!is_at_or_below("/dat", "/data"));
    }

    #[test]
    fn protected_host_paths() {
        let config = Config::default();
        for path in [
            "/",
            "/etc",
            "/etc/ssl",
            "/lib",
            "/lib64/x",
            "/var",
            "/var/lib",
            "/var/lib/kubelet/pods/x",
            "/var/log/a",
            "/home",
            "/proc/1",
            "/run/k3s",
        ] {
            assert!(is_protected_host_path(path, &config), "{path}");
        }
        for path in [
            "/mnt/scratch",
            "/var/lib/myjob",
            "/home/user",
            "/opt/x",
            "/srv/data",
            "/tmp",
            "/data",
        ] {
            assert!(!is_protected_host_path(path, &config), "{path}");
        }
        // SPEC's `/lib*` is a glob on the first segment: conservative on purpose.
        assert!(is_protected_host_path("/library", &config));
        let config = Config {
            protected_host_paths: vec!["/data/".into()],
            ..Config::default()
        };
        assert!(is_protected_host_path("/data/x", &config));
    }
}
