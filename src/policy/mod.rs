//! The host-path policy: host directories that may be cleaned, and the ones that never
//! are (docs/DESIGN.md#targets).
//!
//! **The allow-list first.** No list of names can be complete (every distribution has its
//! own layout), so only host paths at or below an `allowedHostPathPrefixes` entry are ever
//! cleaned, and with none configured (the shipped default) nothing is. The protected list
//! stays as the second check inside the allowed prefixes.
//!
//! A protected entry protects what is above it too: emptying `/data` empties
//! `/data/keep`. So a host path is refused when it is inside a protected tree **or
//! contains** a protected entry, built-in or from `protectedHostPaths`.
//!
//! A room of its own, below both of its readers: [`crate::config`] checks the operator's
//! lists against these rules at start-up, and the core (`mutation::targets`) and the
//! reaper apply them to every target. So the rules take the lists they read
//! (`protectedHostPaths`, `allowedHostPathPrefixes`) as arguments, not the `Config`, and
//! this module imports neither.

mod host_path;

pub use host_path::{is_at_or_below, normalize, on_one_line, HostPath, Open};
pub use prestop_clean::protected::{
    is_lib_tree, PROTECTED_EXACT, PROTECTED_TREES, REAPER_STATE_TREE,
};

/// The protected entry a host path is inside of or contains; `None` when it may be cleaned.
/// `protected_host_paths` is the operator's `protectedHostPaths`, checked after the
/// built-in list.
pub fn protected_entry(host: &HostPath, protected_host_paths: &[String]) -> Option<String> {
    if is_lib_tree(&host.known) {
        let first = host.known.split('/').nth(1).unwrap_or_default();
        return Some(format!("/{first}"));
    }
    // `/` contains every `/lib*`; an open path below `/` may be one.
    if host.known == "/" {
        return Some("/".to_owned());
    }
    // Built-in trees first, in their order, then the operator's; only the answer is owned.
    if let Some(tree) = PROTECTED_TREES.iter().find(|tree| host.may_overlap(tree)) {
        return Some((*tree).to_owned());
    }
    let configured = protected_host_paths
        .iter()
        .filter_map(|path| normalize(path));
    for tree in configured {
        if host.may_overlap(&tree) {
            return Some(tree);
        }
    }
    PROTECTED_EXACT
        .iter()
        .find(|entry| host.may_contain(entry))
        .map(|entry| (*entry).to_owned())
}

/// Whether every directory the host path may be lies at or below an
/// `allowedHostPathPrefixes` entry. None configured: nothing is allowed.
pub fn is_allowed(host: &HostPath, allowed_host_path_prefixes: &[String]) -> bool {
    allowed_host_path_prefixes
        .iter()
        .filter_map(|prefix| normalize(prefix))
        .any(|prefix| host.surely_below(&prefix))
}

/// Why `prefix`, an `allowedHostPathPrefixes` entry, may not be one, as the end of a
/// sentence starting with it; `None` when it may. A prefix is a directory the cleanup
/// could itself empty: absolute, without `..`, and neither `/`, nor inside a protected
/// tree, nor holding a built-in protected entry (`/var/lib` holds `/var/lib/kubelet`,
/// `/mnt` is protected itself): allowing one of those would make the second check the
/// only one. `protectedHostPaths` inside a prefix are fine: they are the operator's own
/// exceptions to it (allow `/data`, keep `/data/keep`).
pub fn prefix_refusal(prefix: &str) -> Option<String> {
    let Some(path) = normalize(prefix) else {
        return Some("is not an absolute path without ..".to_owned());
    };
    let host = HostPath {
        known: path.clone(),
        open: None,
    };
    // The built-in entries only: `protectedHostPaths` inside a prefix are the operator's
    // own exceptions to it.
    let entry = protected_entry(&host, &[])?;
    Some(if entry == path {
        "is itself protected".to_owned()
    } else if is_at_or_below(&path, &entry) {
        format!("is inside the protected host directory {entry}")
    } else {
        format!("holds the protected host directory {entry}")
    })
}

/// Why `directory`, the config's `nodeAgent.hostDirectory`, may not be the node agent's
/// socket directory, as the end of a sentence starting with it; `None` when it may.
///
/// Every pod with our cleanup mounts it read-only, and a read-only mount still lets a
/// process connect to any socket in it: so it must be a directory of its own. It must be
/// absolute and normalized (what the DaemonSet mounts is exactly what the pods mount), and
/// neither a protected directory (`/run` holds the container runtime's socket) nor one that
/// holds a protected directory; inside one is fine (`/var/run/prestop-injector`: the
/// cleanup never reaches it). And it never meets an `allowedHostPathPrefixes` entry, so
/// it can be no cleanup target, and no target can hold it.
pub fn node_agent_directory_refusal(
    directory: &str,
    protected_host_paths: &[String],
    allowed_host_path_prefixes: &[String],
) -> Option<String> {
    if normalize(directory).as_deref() != Some(directory) {
        return Some("is not an absolute, normalized path (no .., no trailing /)".to_owned());
    }
    let configured: Vec<String> = protected_host_paths
        .iter()
        .filter_map(|path| normalize(path))
        .collect();
    let protected = PROTECTED_TREES
        .iter()
        .chain(PROTECTED_EXACT)
        .map(|entry| (*entry).to_owned())
        .chain(configured)
        .find(|entry| is_at_or_below(entry, directory));
    if let Some(entry) = protected {
        return Some(if entry == directory {
            "is itself protected".to_owned()
        } else {
            format!("holds the protected host directory {entry}")
        });
    }
    if is_lib_tree(directory) && directory.matches('/').count() == 1 {
        return Some("is itself protected".to_owned());
    }
    allowed_host_path_prefixes
        .iter()
        .filter_map(|prefix| normalize(prefix))
        .find(|prefix| on_one_line(prefix, directory))
        .map(|prefix| {
            format!("meets the allowedHostPathPrefixes entry {prefix}, which the cleanup empties")
        })
}

/// Whether `path` is a (normalized) host path that must never be cleaned, by the built-in
/// list or `protected_host_paths` (the operator's `protectedHostPaths`).
pub fn is_protected_host_path(path: &str, protected_host_paths: &[String]) -> bool {
    normalize(path).is_none_or(|path| {
        protected_entry(
            &HostPath {
                known: path,
                open: None,
            },
            protected_host_paths,
        )
        .is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_agent_directories() {
        let protected = ["/data/keep".to_owned()];
        let allowed = ["/mnt/scratch".to_owned()];
        for (directory, why) in [
            ("/", "protected"),
            ("/run", "itself protected"),
            ("/var/run", "itself protected"),
            ("/var", "holds the protected host directory /var/log"),
            ("/var/lib/kubelet", "itself protected"),
            ("/lib", "itself protected"),
            ("/data", "holds the protected host directory /data/keep"),
            (
                "/mnt/scratch/agent",
                "meets the allowedHostPathPrefixes entry /mnt/scratch",
            ),
            (
                "/mnt/scratch",
                "meets the allowedHostPathPrefixes entry /mnt/scratch",
            ),
            ("/var/run/prestop-injector/", "normalized"),
            ("/var/run/../prestop", "normalized"),
            ("var/run/prestop", "normalized"),
        ] {
            let refusal = node_agent_directory_refusal(directory, &protected, &allowed)
                .unwrap_or_else(|| panic!("{directory}: accepted"));
            assert!(refusal.contains(why), "{directory}: {refusal}");
        }
        for directory in [
            "/var/run/prestop-injector",
            "/run/prestop-injector",
            "/var/lib/prestop-injector-agent",
            "/opt/prestop",
        ] {
            assert_eq!(
                node_agent_directory_refusal(directory, &protected, &allowed),
                None,
                "{directory}"
            );
        }
    }

    #[test]
    fn protected_host_paths() {
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
            "/tmp",
            "/var/tmp",
            "/mnt",
            "/var/lib/etcd/member",
            "/var/lock",
            "/home/kubernetes/bin",
            "/opt/cni/bin",
            "/var/lib/rancher",
            // Above a protected tree: emptying it empties the tree.
            "/opt",
            "/home",
            "/var/lib/../x",
        ] {
            assert!(is_protected_host_path(path, &[]), "{path}");
        }
        for path in [
            "/mnt/scratch",
            "/var/lib/myjob",
            "/home/user",
            "/opt/x",
            "/srv/data",
            "/tmp/job",
            "/var/tmp/x",
            "/data",
        ] {
            assert!(!is_protected_host_path(path, &[]), "{path}");
        }
        assert!(is_protected_host_path("/library", &[]));
        let protected = ["/data/keep/".to_owned()];
        assert!(is_protected_host_path("/data/keep/x", &protected));
        assert!(is_protected_host_path("/data", &protected));
        assert!(!is_protected_host_path("/data/other", &protected));
    }
}
