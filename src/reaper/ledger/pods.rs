//! The pods the ledger speaks of: a pod that recorded a directory ([`PodRef`], kept in the
//! state file), and a pod bound to the node with what its spec reaches ([`KnownPod`]).

use crate::mutation::targets::HostPath;
use crate::reaper::derive::PodFacts;
use crate::reaper::user::RecordedUser;

/// A pod that recorded a directory, for messages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct PodRef {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// The user the directory would be emptied as for this pod. Absent in the state
    /// files of older reapers: such a record is refused (`user_unknown`).
    #[serde(default, skip_serializing_if = "RecordedUser::is_not_recorded")]
    pub user: RecordedUser,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

/// A pod the ledger knows (bound to the node, in any phase): what its spec says it
/// reaches. The check before a walk resolves these on the node ([`super::users`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownPod {
    pub pod: PodRef,
    /// Its host directories as the spec spells them.
    pub uses: Vec<HostPath>,
    /// Its PersistentVolumeClaims (in its namespace): what they reach is only in the API.
    pub claims: Vec<String>,
    /// It has ended for good: it uses nothing and holds no record.
    pub ended: bool,
}

impl KnownPod {
    pub(crate) fn of(facts: &PodFacts) -> KnownPod {
        KnownPod {
            pod: PodRef {
                uid: facts.uid.clone(),
                namespace: facts.namespace.clone(),
                name: facts.name.clone(),
                // Who it would be emptied as matters only to the records, not to who uses
                // a directory.
                user: RecordedUser::default(),
            },
            uses: facts.uses.clone(),
            claims: facts.claims.clone(),
            ended: facts.ended,
        }
    }
}
