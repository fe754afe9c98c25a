//! What the one cleanup sidecar mounts, defines and runs as, gathered container by
//! container — and which containers it must refuse (docs/DESIGN.md#targets and
//! #the-sidecar).
//!
//! Each app container's targets passed that container's own rules, but the sidecar
//! sees the *union* of the mounts it copies: container A's hostPath at `/data` and B's
//! PVC at `/data/keep` would put the PVC inside A's target and empty it. So the merged
//! list obeys the same rules as any container: no other mount at or below a target, no
//! two different mounts at one (normalized) path. A container whose targets would break
//! them — or that the sidecar cannot copy faithfully or run as — is refused as a whole,
//! with the reason; the caller falls back to its exec hook when that is possible.
//!
//! Refusing the later container (first come, first served) is safe either way round:
//! each container's own exec hook sees only that container's mounts, which passed.

use crate::json::{Map, Value};
use crate::mutation::targets::env_refs;
use crate::mutation::targets::{self, is_at_or_below};

/// What the sidecar must clean and mount, gathered from the containers it serves.
#[derive(Debug, Default)]
pub struct SidecarPlan {
    pub targets: Vec<String>,
    /// Exact copies of the targets' volumeMounts, in the order first needed.
    pub(super) mounts: Vec<Value>,
    /// The `env` entries the copied `subPathExpr`s reference, in the containers' order.
    pub(super) env: Vec<Value>,
    /// The numeric user and group of the first container served.
    pub(super) user: Option<(u64, Option<u64>)>,
    served: Vec<String>,
    /// Mounts others put into our existing sidecar (see [`SidecarPlan::around`]).
    foreign: Vec<Value>,
    /// Our read-only mount of the node agent's directory, when the sidecar asks the agent
    /// (`inject::node_agent`); set by [`SidecarPlan::ask_node_agent`].
    pub(super) node_agent: Option<Value>,
}

/// A container's share of the sidecar, checked but not yet merged.
struct Share {
    targets: Vec<String>,
    mounts: Vec<Value>,
    env: Vec<Value>,
    user: (u64, Option<u64>),
}

impl SidecarPlan {
    /// A plan that also checks targets against `foreign` mounts: what admission plugins
    /// added to our sidecar before this pass stays there, so it must obey the target rules too.
    pub fn around(foreign: Vec<Value>) -> SidecarPlan {
        SidecarPlan {
            foreign,
            ..SidecarPlan::default()
        }
    }

    /// Adds `container`'s `paths` when the sidecar can clean them as safely as the
    /// container itself; otherwise changes nothing and says why (for a warning).
    pub fn try_add(
        &mut self,
        container: &Value,
        paths: &[String],
        pod_security: Option<&Value>,
    ) -> Result<(), String> {
        let share = share_of(container, paths, pod_security)?;
        if let Some(((uid, gid), first)) = self.user.zip(self.served.first()) {
            if (uid, gid) != share.user {
                return Err(format!("it runs as another user than {first:?}"));
            }
        }
        let mut mounts = self.mounts.clone();
        for mount in share.mounts {
            if !mounts.contains(&mount) {
                mounts.push(mount);
            }
        }
        let mut all_targets = self.targets.clone();
        all_targets.extend(share.targets.iter().cloned());
        check_merged(&[&mounts[..], &self.foreign[..]].concat(), &all_targets)?;
        let mut env = self.env.clone();
        for entry in share.env {
            let name = entry.get("name");
            match env.iter().find(|known| known.get("name") == name) {
                Some(known) if known != &entry => {
                    return Err(format!(
                        "its env var {} differs from the one the sidecar already copies",
                        name.and_then(Value::as_str).unwrap_or_default()
                    ))
                }
                Some(_) => {}
                None => env.push(entry),
            }
        }
        self.mounts = mounts;
        self.env = env;
        for target in share.targets {
            if !self.targets.contains(&target) {
                self.targets.push(target);
            }
        }
        self.user = Some(share.user);
        self.served.push(name_of(container).to_owned());
        Ok(())
    }
}

fn name_of(container: &Value) -> &str {
    container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The keys of a volumeMount that decide what the kubelet mounts where, and how.
pub(super) const MOUNT_KEYS: &[&str] = &[
    "name",
    "mountPath",
    "subPath",
    "subPathExpr",
    "mountPropagation",
    "readOnly",
    "recursiveReadOnly",
];

fn share_of(
    container: &Value,
    paths: &[String],
    pod_security: Option<&Value>,
) -> Result<Share, String> {
    let user = numeric_user(container, pod_security)?;
    let mounts = targets::mounts(container);
    let mut copies: Vec<Value> = Vec::new();
    let mut referenced: Vec<String> = Vec::new();
    for path in paths {
        let mount =
            targets::mount_of(&mounts, path).ok_or_else(|| format!("{path} is on no mount"))?;
        if mount.raw.get("mountPropagation").and_then(Value::as_str) == Some("Bidirectional") {
            // Only a privileged container may have it, and the sidecar never is one.
            return Err(format!("{} uses Bidirectional propagation", mount.path));
        }
        let copy = copy_of(mount.raw);
        if let Some(expression) = mount.raw.get("subPathExpr").and_then(Value::as_str) {
            referenced.extend(env_refs::references(expression));
        }
        if !copies.contains(&copy) {
            copies.push(copy);
        }
    }
    Ok(Share {
        targets: paths.to_vec(),
        mounts: copies,
        env: env_closure(container, referenced)?,
        user,
    })
}

/// The sidecar's copy of a volumeMount: exactly the keys that decide what is mounted.
pub(super) fn copy_of(mount: &Value) -> Value {
    let mut copy = Map::new();
    for key in MOUNT_KEYS {
        if let Some(value) = mount.get(*key) {
            copy.insert((*key).to_owned(), value.clone());
        }
    }
    Value::Object(copy)
}

/// Pod Security `restricted` wants a numeric non-root user, and only the app's own user
/// may delete what the app wrote: the container's `runAsUser`, else the pod's. Root, or
/// a user only the image knows, rules the sidecar out for this container.
fn numeric_user(
    container: &Value,
    pod_security: Option<&Value>,
) -> Result<(u64, Option<u64>), String> {
    let field = |key: &str| {
        container
            .pointer(&format!("/securityContext/{key}"))
            .or_else(|| pod_security.and_then(|s| s.get(key)))
            .filter(|v| !v.is_null())
    };
    let group = field("runAsGroup").and_then(Value::as_u64);
    match field("runAsUser").map(Value::as_u64) {
        // What real workloads miss most (none of 10 with writable hostPaths had one): say
        // what to set, where the user reads it.
        None => Err("it has no runAsUser; set securityContext.runAsUser and runAsGroup".to_owned()),
        Some(None) => Err("its runAsUser is not a number".to_owned()),
        Some(Some(0)) => Err("it runs as root".to_owned()),
        Some(Some(uid)) => Ok((uid, group)),
    }
}

/// The `env` entries that `names` need, with everything their values reference in turn,
/// in the container's order (the kubelet expands `$(X)` only from earlier entries, so
/// keeping the order keeps the meaning). A name defined nowhere in `env` — maybe in
/// `envFrom`, maybe nowhere — cannot be copied faithfully: refuse.
fn env_closure(container: &Value, mut names: Vec<String>) -> Result<Vec<Value>, String> {
    let env: &[Value] = container
        .get("env")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut needed: Vec<String> = Vec::new();
    while let Some(name) = names.pop() {
        if needed.contains(&name) {
            continue;
        }
        let definitions: Vec<&Value> = env
            .iter()
            .filter(|e| e.get("name").and_then(Value::as_str) == Some(name.as_str()))
            .collect();
        if definitions.is_empty() {
            return Err(format!(
                "its subPathExpr uses $({name}), which is not in its env"
            ));
        }
        for definition in definitions {
            // Without containerName a resourceFieldRef reads the *sidecar's* resources:
            // the copy would name another directory.
            let resource = definition.pointer("/valueFrom/resourceFieldRef");
            if resource.is_some_and(|r| r.get("containerName").is_none()) {
                return Err(format!(
                    "its env var {name} reads its own resources, which the sidecar does not share"
                ));
            }
            if let Some(value) = definition.get("value").and_then(Value::as_str) {
                names.extend(env_refs::references(value));
            }
        }
        needed.push(name);
    }
    Ok(env
        .iter()
        .filter(|e| {
            e.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| needed.iter().any(|x| x == n))
        })
        .cloned()
        .collect())
}

/// docs/DESIGN.md#targets on the sidecar's own mount list: no two different mounts at one
/// normalized path, and no mount at or below a target other than the one the target lives on.
pub(super) fn check_merged(mounts: &[Value], targets: &[String]) -> Result<(), String> {
    let paths: Vec<String> = mounts
        .iter()
        .map(|m| {
            m.get("mountPath")
                .and_then(Value::as_str)
                .and_then(targets::normalize)
                .ok_or_else(|| "a mountPath cannot be normalized".to_owned())
        })
        .collect::<Result<_, _>>()?;
    for (index, path) in paths.iter().enumerate() {
        if paths[..index].contains(path) {
            return Err(format!("another container mounts another volume at {path}"));
        }
    }
    for target in targets {
        let Some(own) = paths
            .iter()
            .filter(|path| is_at_or_below(target, path))
            .max_by_key(|path| path.len())
        else {
            return Err(format!("{target} is on no mount of the sidecar"));
        };
        if let Some(nested) = paths
            .iter()
            .find(|path| *path != own && is_at_or_below(path, target))
        {
            return Err(format!(
                "the sidecar would mount {nested} inside the target {target}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    fn container(name: &str, mounts: Value) -> Value {
        json!({"name": name, "securityContext": {"runAsUser": 1000}, "volumeMounts": mounts})
    }

    #[test]
    fn a_mount_of_a_later_container_inside_a_target_is_refused() {
        let a = container("a", json!([{"name": "host", "mountPath": "/data"}]));
        let b = container("b", json!([{"name": "pvc", "mountPath": "/data/keep"}]));
        let mut plan = SidecarPlan::default();
        plan.try_add(&a, &["/data".into()], None).unwrap();
        let refused = plan.try_add(&b, &["/data/keep".into()], None).unwrap_err();
        assert!(
            refused.contains("/data/keep inside the target /data"),
            "{refused}"
        );
        assert_eq!(plan.targets, ["/data"]);
        assert_eq!(plan.mounts, [json!({"name": "host", "mountPath": "/data"})]);

        // The other way round: the earlier mount would sit inside the later target.
        let mut plan = SidecarPlan::default();
        plan.try_add(&b, &["/data/keep".into()], None).unwrap();
        assert!(plan.try_add(&a, &["/data".into()], None).is_err());
        assert_eq!(plan.targets, ["/data/keep"]);
    }

    #[test]
    fn one_normalized_path_holds_one_mount() {
        let a = container("a", json!([{"name": "one", "mountPath": "/data"}]));
        let b = container("b", json!([{"name": "two", "mountPath": "/data/"}]));
        let same = container("c", json!([{"name": "one", "mountPath": "/data"}]));
        let mut plan = SidecarPlan::default();
        plan.try_add(&a, &["/data".into()], None).unwrap();
        assert!(plan.try_add(&b, &["/data".into()], None).is_err());
        plan.try_add(&same, &["/data".into()], None).unwrap();
        assert_eq!(plan.mounts.len(), 1);
    }

    #[test]
    fn users_env_and_propagation() {
        let mut plan = SidecarPlan::default();
        let pod = json!({"runAsUser": 2000, "runAsGroup": 3000});
        let mut c = container(
            "a",
            json!([{"name": "v", "mountPath": "/d", "subPathExpr": "$(DIR)"}]),
        );
        c["securityContext"] = json!({});
        c["env"] = json!([
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "UNUSED", "value": "x"},
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "DIR", "value": "$(NS)/$(POD)"},
        ]);
        plan.try_add(&c, &["/d".into()], Some(&pod)).unwrap();
        assert_eq!(plan.user, Some((2000, Some(3000))));
        let names: Vec<&str> = plan
            .env
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["NS", "POD", "DIR"]);

        for (security, env, mount_extra, reason) in [
            (json!({"runAsUser": 0}), json!([]), json!({}), "root"),
            (json!({}), json!([]), json!({}), "no runAsUser"),
            (
                json!({"runAsUser": 1000}),
                json!([]),
                json!({"subPathExpr": "$(X)"}),
                "not in its env",
            ),
            (
                json!({"runAsUser": 1000}),
                json!([]),
                json!({"mountPropagation": "Bidirectional"}),
                "Bidirectional",
            ),
            (
                json!({"runAsUser": 1000}),
                json!([{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}]),
                json!({"subPathExpr": "$(X)"}),
                "reads its own resources",
            ),
        ] {
            let mut mount = json!({"name": "v", "mountPath": "/e"});
            mount
                .as_object_mut()
                .unwrap()
                .extend(mount_extra.as_object().unwrap().clone());
            let c = json!({"name": "b", "securityContext": security, "env": env, "volumeMounts": [mount]});
            let refused = SidecarPlan::default()
                .try_add(&c, &["/e".into()], None)
                .unwrap_err();
            assert!(refused.contains(reason), "{refused}");
        }
    }
}
