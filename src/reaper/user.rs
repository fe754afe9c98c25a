//! Whose rights a gone pod's directory is emptied with (issue 26, item 2; pure).
//!
//! The reaper never removes what the pod's own user could not have removed: its walk runs
//! as that user ([`prestop_clean::as_user`]). The user is read from the pod when it is
//! recorded, for the container whose cleanup targets the directory:
//! - `status.containerStatuses[].user.linux` (or `initContainerStatuses` for the cleanup
//!   sidecar) when the kubelet reports it (Kubernetes ≥ 1.31): the ids its first
//!   process really runs with, the image's `USER` and `/etc/group` included;
//! - else the container's `securityContext.runAsUser` / `runAsGroup` over the pod's, with
//!   the pod's `supplementalGroups` and `fsGroup` (fewer groups than an image's
//!   `/etc/group` may add: fewer rights, never more);
//! - **unknown** without a uid or a gid (the image's `USER` decides, which the reaper
//!   cannot see), and with `hostUsers: false` (a user namespace maps the pod's ids to
//!   others on the node): nothing is emptied.

use crate::json::Value;
use serde::{Deserialize, Serialize};

/// The identity a walk runs as.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodUser {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, sorted, each once.
    #[serde(default)]
    pub groups: Vec<u32>,
}

impl std::fmt::Display for PodUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "uid {} gid {} groups {:?}",
            self.uid, self.gid, self.groups
        )
    }
}

impl From<&PodUser> for prestop_clean::as_user::User {
    fn from(user: &PodUser) -> Self {
        prestop_clean::as_user::User {
            uid: user.uid,
            gid: user.gid,
            groups: user.groups.clone(),
        }
    }
}

/// The user a record was made with, as the state file keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedUser {
    /// A record of a reaper that did not record users (an older state file): refused.
    #[default]
    NotRecorded,
    Known(PodUser),
    /// Why it is not known: the end of a sentence that starts with the pod.
    Unknown(String),
    /// Containers of the pod clean the directory as different users.
    Ambiguous(String),
}

impl RecordedUser {
    pub fn is_not_recorded(&self) -> bool {
        matches!(self, RecordedUser::NotRecorded)
    }

    /// The user of `container` (an element of `containers` or `initContainers`) of `pod`.
    pub fn of_container(pod: &Value, container: &Value) -> RecordedUser {
        if pod.pointer("/spec/hostUsers") == Some(&Value::Bool(false)) {
            return RecordedUser::Unknown(
                "runs in a user namespace (hostUsers: false): its uids on the node are not the \
                 ones it names, so its rights there are not known"
                    .to_owned(),
            );
        }
        let name = container.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(user) = reported(pod, name) {
            return user;
        }
        let field = |key: &str| {
            let set = |v: &&Value| !v.is_null();
            container
                .pointer(&format!("/securityContext/{key}"))
                .filter(set)
                .or_else(|| {
                    pod.pointer(&format!("/spec/securityContext/{key}"))
                        .filter(set)
                })
        };
        let (uid, gid) = match (field("runAsUser"), field("runAsGroup")) {
            (Some(uid), Some(gid)) => (id(uid), id(gid)),
            _ => {
                return RecordedUser::Unknown(format!(
                    "has no runAsUser and runAsGroup for container {name:?} (the image's USER \
                     decides, which the reaper cannot see), and the kubelet has not reported \
                     its user: set both in its securityContext or the pod's"
                ))
            }
        };
        let mut groups = Vec::new();
        let pod_context = pod.pointer("/spec/securityContext");
        for gid in pod_context
            .and_then(|c| c.get("supplementalGroups"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .chain(pod_context.and_then(|c| c.get("fsGroup")))
        {
            match id(gid) {
                Some(gid) => groups.push(gid),
                None => return out_of_range(name),
            }
        }
        match (uid, gid) {
            (Some(uid), Some(gid)) => known(uid, gid, groups),
            _ => out_of_range(name),
        }
    }

    /// The user of a directory that several containers of one pod clean.
    pub fn merge(self, other: RecordedUser) -> RecordedUser {
        match (self, other) {
            (a, b) if a == b => a,
            (RecordedUser::Known(a), RecordedUser::Known(b)) => RecordedUser::Ambiguous(format!(
                "cleans it in containers running as different users ({a}; {b})"
            )),
            (unknown @ (RecordedUser::Unknown(_) | RecordedUser::Ambiguous(_)), _)
            | (_, unknown) => unknown,
        }
    }
}

/// What the kubelet reports for container `name`, if it does.
fn reported(pod: &Value, name: &str) -> Option<RecordedUser> {
    let status = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .filter_map(|list| pod.pointer(&format!("/status/{list}"))?.as_array())
        .flatten()
        .find(|status| status.get("name").and_then(Value::as_str) == Some(name))?;
    let linux = status.pointer("/user/linux")?;
    let out = || Some(out_of_range(name));
    let (Some(uid), Some(gid)) = (linux.get("uid").and_then(id), linux.get("gid").and_then(id))
    else {
        return out();
    };
    let mut groups = Vec::new();
    for gid in linux
        .get("supplementalGroups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match id(gid) {
            Some(gid) => groups.push(gid),
            None => return out(),
        }
    }
    Some(known(uid, gid, groups))
}

fn known(uid: u32, gid: u32, mut groups: Vec<u32>) -> RecordedUser {
    groups.sort_unstable();
    groups.dedup();
    RecordedUser::Known(PodUser { uid, gid, groups })
}

fn out_of_range(name: &str) -> RecordedUser {
    RecordedUser::Unknown(format!(
        "names a uid or gid for container {name:?} that is not between 0 and 4294967294"
    ))
}

/// A Linux id: 0 to 2^32 - 2 (2^32 - 1 is -1, "unchanged", to the system calls).
fn id(value: &Value) -> Option<u32> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n != u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    fn user(uid: u32, gid: u32, groups: &[u32]) -> RecordedUser {
        RecordedUser::Known(PodUser {
            uid,
            gid,
            groups: groups.to_vec(),
        })
    }

    fn pod(pod_context: Value, container_context: Value, status: Value) -> (Value, Value) {
        let container = json!({"name": "app", "securityContext": container_context});
        let pod = json!({"spec": {"securityContext": pod_context,
                                  "containers": [container.clone()]},
                         "status": status});
        (pod, container)
    }

    fn of(pod_context: Value, container_context: Value, status: Value) -> RecordedUser {
        let (pod, container) = pod(pod_context, container_context, status);
        RecordedUser::of_container(&pod, &container)
    }

    #[test]
    fn the_container_over_the_pod_with_the_pods_groups() {
        let pod_context = json!({"runAsUser": 1, "runAsGroup": 2,
                                 "supplementalGroups": [30, 10, 30], "fsGroup": 20});
        assert_eq!(
            of(pod_context.clone(), json!({}), json!({})),
            user(1, 2, &[10, 20, 30])
        );
        assert_eq!(
            of(pod_context, json!({"runAsUser": 7}), json!({})),
            user(7, 2, &[10, 20, 30])
        );
        assert_eq!(
            of(json!({"runAsGroup": 0}), json!({"runAsUser": 0}), json!({})),
            user(0, 0, &[])
        );
        assert_eq!(
            of(
                json!({"runAsUser": 1, "runAsGroup": 2}),
                json!({"runAsUser": null}),
                json!({})
            ),
            user(1, 2, &[])
        );
    }

    #[test]
    fn unknown_without_both_ids_out_of_range_or_in_a_user_namespace() {
        for (pod_context, container_context) in [
            (json!({}), json!({})),
            (json!({"runAsUser": 1000}), json!({})),
            (json!({}), json!({"runAsGroup": 1000})),
            (json!({"runAsUser": -1, "runAsGroup": 1}), json!({})),
            (
                json!({"runAsUser": 4294967295u64, "runAsGroup": 1}),
                json!({}),
            ),
            (json!({"runAsUser": "0", "runAsGroup": 1}), json!({})),
            (
                json!({"runAsUser": 1, "runAsGroup": 1, "fsGroup": -5}),
                json!({}),
            ),
        ] {
            let found = of(pod_context.clone(), container_context.clone(), json!({}));
            assert!(
                matches!(found, RecordedUser::Unknown(_)),
                "{pod_context} {container_context}: {found:?}"
            );
        }
        let (mut pod, container) = pod(
            json!({"runAsUser": 1, "runAsGroup": 1}),
            json!({}),
            json!({}),
        );
        pod["spec"]["hostUsers"] = json!(false);
        let found = RecordedUser::of_container(&pod, &container);
        assert!(matches!(&found, RecordedUser::Unknown(why) if why.contains("hostUsers")));
    }

    #[test]
    fn the_kubelets_word_wins_for_its_container_only() {
        let status = |uid: Value| {
            json!({"containerStatuses": [
                {"name": "other", "user": {"linux": {"uid": 5, "gid": 5}}},
                {"name": "app", "user": {"linux": {"uid": uid, "gid": 3000,
                                                   "supplementalGroups": [4000, 3000]}}}]})
        };
        let spec = json!({"runAsUser": 0, "runAsGroup": 0});
        assert_eq!(
            of(spec.clone(), json!({}), status(json!(1000))),
            user(1000, 3000, &[3000, 4000])
        );
        assert!(matches!(
            of(spec.clone(), json!({}), status(json!(-1))),
            RecordedUser::Unknown(_)
        ));
        // The cleanup sidecar's status is among the init containers'.
        let init = json!({"initContainerStatuses": [
            {"name": "app", "user": {"linux": {"uid": 9, "gid": 8}}}]});
        assert_eq!(of(spec.clone(), json!({}), init), user(9, 8, &[]));
        // A status without `user` (a kubelet before 1.31): the spec.
        let old = json!({"containerStatuses": [{"name": "app"}]});
        assert_eq!(of(spec, json!({}), old), user(0, 0, &[]));
    }

    #[test]
    fn containers_of_one_pod_as_different_users_are_ambiguous() {
        let a = user(1, 1, &[]);
        assert_eq!(a.clone().merge(a.clone()), a);
        assert!(matches!(
            a.clone().merge(user(2, 1, &[])),
            RecordedUser::Ambiguous(_)
        ));
        let unknown = RecordedUser::Unknown("x".into());
        assert_eq!(a.clone().merge(unknown.clone()), unknown);
        assert_eq!(unknown.clone().merge(a), unknown);
    }

    #[test]
    fn the_state_file_form() {
        let known = user(1000, 1000, &[5]);
        assert_eq!(
            serde_json::to_value(&known).unwrap(),
            serde_json::json!({"known": {"uid": 1000, "gid": 1000, "groups": [5]}})
        );
        let back: RecordedUser =
            serde_json::from_value(serde_json::json!({"unknown": "why"})).unwrap();
        assert_eq!(back, RecordedUser::Unknown("why".into()));
        assert!(serde_json::from_value::<RecordedUser>(
            serde_json::json!({"known": {"uid": 1, "gid": 1, "caps": []}})
        )
        .is_err());
    }
}
