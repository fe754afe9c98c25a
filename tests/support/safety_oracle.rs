//! An independent check of docs/DESIGN.md#targets on a mutated pod template: every target our hooks
//! or our sidecar clean, against the mounts of the container that cleans it and the pod's
//! hostPath volumes. Deliberately written apart from `src/mutation/targets` (small, its
//! own normalization and its own copy of the protected list), so a bug there cannot hide
//! here. It may accept a little more than the core (it ignores `env` when two mounts use
//! the same `subPathExpr`), never less. The allow-list comes first (issue 17 class 5): a
//! target must be on a hostPath volume whose host path is surely at or below an allowed
//! prefix.
#![allow(dead_code)]

use prestop_injector::mutation::hook::{sidecar_targets, Action, Hook};
use serde_json::Value;

const TREES: &[&str] = &[
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
    "/var/lock",
    "/var/lib/kubelet",
    "/var/lib/containerd",
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/lib/etcd",
    "/var/lib/cni",
    "/opt/cni",
    "/var/lib/calico",
    "/var/lib/rancher",
    "/var/lib/k0s",
    "/var/snap",
    "/var/lib/kube-proxy",
    "/var/lib/longhorn",
    "/var/openebs",
    "/var/lib/dpkg",
    "/var/lib/apt",
    "/var/lib/rpm",
    "/var/lib/systemd",
    "/var/roothome",
    "/var/home",
    "/home/kubernetes",
    "/mnt/stateful_partition",
    "/local",
    "/sysroot",
    "/mnt/k8s-disks",
    "/mnt/disks",
    "/mnt/fast-disks",
    "/var/lib/csi-hostpath-data",
    "/kind",
    "/var/lib/rook",
    "/opt/local-path-provisioner",
    "/var/opt",
    "/var/lib/prestop-injector",
];
const EXACT: &[&str] = &[
    "/", "/home", "/opt", "/srv", "/var", "/var/lib", "/tmp", "/var/tmp", "/mnt",
];

/// `path.Clean("/" + p)`, refusing `..` and control characters.
pub fn clean(path: &str) -> Option<String> {
    if path.is_empty() || path.chars().any(char::is_control) {
        return None;
    }
    let mut parts = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            part => parts.push(part),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// `a` is `b` or below it.
pub fn under(a: &str, b: &str) -> bool {
    b == "/" || a == b || a.starts_with(&format!("{b}/"))
}

/// A host directory: exact, or some directory below `known` (`subPathExpr`).
#[derive(Debug, Clone)]
struct Host {
    known: String,
    open: bool,
}

fn volume<'a>(spec: &'a Value, name: &str) -> Option<&'a Value> {
    spec["volumes"]
        .as_array()?
        .iter()
        .find(|v| v["name"] == name)
}

/// The host directory a mount shows (`None`: not a hostPath), or `Err` when unknowable.
fn mount_host(spec: &Value, mount: &Value) -> Option<Result<Host, String>> {
    let name = mount["name"].as_str()?;
    let host_path = volume(spec, name)?.get("hostPath")?;
    let Some(base) = host_path["path"]
        .as_str()
        .filter(|p| p.starts_with('/'))
        .and_then(clean)
    else {
        return Some(Err(format!("hostPath {}", host_path["path"])));
    };
    let sub = mount["subPath"].as_str().unwrap_or("");
    let expr = mount["subPathExpr"].as_str().unwrap_or("");
    if !sub.is_empty() {
        if sub.starts_with('/') || !expr.is_empty() {
            return Some(Err(format!("subPath {sub}")));
        }
        let Some(sub) = clean(sub) else {
            return Some(Err(format!("subPath {sub}")));
        };
        return Some(Ok(Host {
            known: join(&base, &sub),
            open: false,
        }));
    }
    Some(Ok(Host {
        known: base,
        open: !expr.is_empty(),
    }))
}

fn join(base: &str, suffix: &str) -> String {
    if suffix == "/" {
        base.to_owned()
    } else if base == "/" {
        suffix.to_owned()
    } else {
        format!("{base}{suffix}")
    }
}

/// Every host directory a hostPath volume shows in the pod: declared, and per mount.
fn views(spec: &Value) -> Vec<(String, String, String, Host)> {
    let mut out = Vec::new();
    for v in spec["volumes"].as_array().into_iter().flatten() {
        if v.get("hostPath").is_some() {
            let name = v["name"].as_str().unwrap_or("").to_owned();
            let host = v["hostPath"]["path"]
                .as_str()
                .filter(|p| p.starts_with('/'))
                .and_then(clean)
                .map_or(
                    Host {
                        known: "/".into(),
                        open: true,
                    },
                    |known| Host { known, open: false },
                );
            out.push((name, "/".to_owned(), String::new(), host));
        }
    }
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec[field].as_array().into_iter().flatten() {
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                let host = match mount_host(spec, m) {
                    None => continue,
                    Some(Ok(host)) => host,
                    // Unknowable: anything below its volume (or anywhere).
                    Some(Err(_)) => Host {
                        known: "/".into(),
                        open: true,
                    },
                };
                let (sub, expr) = source(m);
                out.push((m["name"].as_str().unwrap_or("").to_owned(), sub, expr, host));
            }
        }
    }
    out
}

/// Which directory of its volume a mount shows: its `subPath` cleaned (`./` is the
/// volume itself, like no subPath) and its `subPathExpr`.
fn source(mount: &Value) -> (String, String) {
    let sub = mount["subPath"].as_str().unwrap_or("");
    let sub = match clean(sub) {
        _ if sub.is_empty() => "/".to_owned(),
        Some(cleaned) if !sub.starts_with('/') => cleaned,
        _ => format!("invalid {sub}"),
    };
    let expr = mount["subPathExpr"].as_str().unwrap_or("").to_owned();
    (sub, expr)
}

fn protected(host: &Host, extra: &[String]) -> Option<String> {
    let trees = TREES
        .iter()
        .map(|t| (*t).to_owned())
        .chain(extra.iter().cloned());
    for tree in trees {
        if under(&host.known, &tree) || under(&tree, &host.known) {
            return Some(tree);
        }
    }
    let first = host.known.split('/').nth(1).unwrap_or("");
    if first.starts_with("lib") {
        return Some(format!("/{first}"));
    }
    EXACT
        .iter()
        .find(|e| under(e, &host.known) && (!host.open || **e != host.known || host.known == "/"))
        .map(|e| (*e).to_owned())
}

/// The config's lists, as the oracle reads them.
#[derive(Debug, Clone, Copy)]
pub struct Lists<'a> {
    /// `protectedHostPaths`.
    pub protected: &'a [String],
    /// `allowedHostPathPrefixes`: none, nothing may be cleaned.
    pub allowed: &'a [String],
}

/// Checks one cleaning container (`mounts` are its volumeMounts) and one target.
fn check(spec: &Value, mounts: &[Value], target: &str, lists: Lists) -> Result<(), String> {
    if target == "/" || clean(target).as_deref() != Some(target) {
        return Err(format!("target {target:?} is / or not normalized"));
    }
    let mut cleaned = Vec::new();
    for m in mounts {
        let path = m["mountPath"].as_str().and_then(clean);
        let Some(path) = path else {
            return Err(format!(
                "the cleaner has an unreadable mountPath {}",
                m["mountPath"]
            ));
        };
        cleaned.push((path, m));
    }
    let Some((own_path, own)) = cleaned
        .iter()
        .filter(|(p, _)| under(target, p))
        .max_by_key(|(p, _)| p.len())
    else {
        return Err(format!("{target} is on no mount"));
    };
    if own["readOnly"] == true {
        return Err(format!("{target} is on the read-only mount {own_path}"));
    }
    let at_or_below = cleaned
        .iter()
        .filter(|(p, _)| under(p, target) || p == own_path)
        .count();
    if at_or_below > 1 {
        return Err(format!(
            "{target}: another mount is at or below it, or at {own_path}"
        ));
    }
    let Some(host) = mount_host(spec, own) else {
        return Err(format!("{target} is not on a hostPath volume"));
    };
    let host = host.map_err(|why| format!("{target}: unknowable host path ({why})"))?;
    // The part of the target below its mount, with its leading `/`: under a mount at `/`
    // that is the whole target (class 6.15: `/mnt` + `scratch` is not `/mnt/scratch`).
    let below = if own_path == "/" {
        target
    } else {
        &target[own_path.len()..]
    };
    let host = match host.open {
        false => Host {
            known: join(&host.known, below),
            open: false,
        },
        true => host,
    };
    // Open or not, every directory it may be is at or below `known`.
    if !lists
        .allowed
        .iter()
        .filter_map(|prefix| clean(prefix))
        .any(|prefix| under(&host.known, &prefix))
    {
        return Err(format!(
            "{target}: host path {host:?} is outside allowedHostPathPrefixes {:?}",
            lists.allowed
        ));
    }
    if let Some(entry) = protected(&host, lists.protected) {
        return Err(format!(
            "{target}: host path {host:?} overlaps protected {entry}"
        ));
    }
    let (sub, expr) = source(own);
    let own_key = (own["name"].as_str().unwrap_or("").to_owned(), sub, expr);
    for (name, sub, expr, other) in views(spec) {
        if (name.clone(), sub, expr) == own_key {
            continue;
        }
        let holds = if other.open {
            // Some directory below an ancestor of the target may be below the target.
            under(&other.known, &host.known) || under(&host.known, &other.known)
        } else if host.open {
            // The target is some directory below `known`: it may hold anything below.
            other.known != host.known && under(&other.known, &host.known)
        } else {
            under(&other.known, &host.known)
        };
        if holds {
            return Err(format!(
                "{target}: host path {host:?} holds volume {name:?} at {other:?}"
            ));
        }
    }
    Ok(())
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|a| a.as_str().map(str::to_owned))
        .collect()
}

fn list(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// Which mount list a sidecar target is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SidecarMounts {
    /// The sidecar's own merged list (docs/DESIGN.md#the-sidecar; issue 9 class 4).
    Own,
    /// Some app container's list: the rules of classes 1–3 without class 4's merge.
    SourceContainer,
}

/// Every violation of docs/DESIGN.md#targets in a (patched) pod template spec: targets of our exec
/// hooks and of our sidecar.
pub fn violations(spec: &Value, lists: Lists, sidecar: SidecarMounts) -> Vec<String> {
    let mut found = Vec::new();
    let containers = list(&spec["containers"]);
    for c in &containers {
        let argv = strings(&c["lifecycle"]["preStop"]["exec"]["command"]).unwrap_or_default();
        if let Some(Hook {
            action: Action::Cleanup(targets),
            ..
        }) = Hook::from_argv(&argv)
        {
            let mounts = list(&c["volumeMounts"]);
            for t in prestop_injector::mutation::hook::target_paths(&targets) {
                if let Err(why) = check(spec, &mounts, &t, lists) {
                    found.push(format!("container {}: {why}", c["name"]));
                }
            }
        }
    }
    for init in list(&spec["initContainers"]) {
        let argv = strings(&init["command"]).unwrap_or_default();
        for t in sidecar_targets(&argv).unwrap_or_default() {
            let result = match sidecar {
                SidecarMounts::Own => check(spec, &list(&init["volumeMounts"]), &t, lists),
                SidecarMounts::SourceContainer => containers
                    .iter()
                    .map(|c| check(spec, &list(&c["volumeMounts"]), &t, lists))
                    .find(Result::is_ok)
                    .unwrap_or_else(|| Err(format!("{t} passes in no app container"))),
            };
            if let Err(why) = result {
                found.push(format!("sidecar: {why}"));
            }
        }
    }
    found
}
