//! Who reaches a directory, decided on identities (pure: the I/O is in [`super::on_node`]
//! and [`super::claims`]; the round that joins them is [`super::users`]).
//!
//! A directory on the node is its `(st_dev, st_ino)`, and its place is its *lineage*: its
//! own identity, then its parent's, up to the node's root, as the kernel climbs `..` from
//! its descriptor (across mounts, never by spelling). A pod's use reaches the candidate
//! when its resolved directory **is** it, is **above** it (the use's identity is in the
//! candidate's lineage) or is **below** it (the candidate's identity is in the use's
//! lineage). Two spellings of one directory (a symlink, a bind mount, `a/../b`) have one
//! identity, so no spelling can hide a use.
//!
//! Fail closed: a use whose reach cannot be established ([`Reach::Unknown`]) keeps every
//! directory, unless another use already proves the candidate in use (the reason that
//! can be acted on is named first).

use super::in_use::{is_at_or_below, Busy};

/// A directory's `(st_dev, st_ino)`.
pub type Identity = (u64, u64);

/// Where a directory is inside its filesystem: the filesystem (`major:minor` of its
/// mount) and the path from that filesystem's root, as the kernel's mountinfo gives the
/// mount's root. A bind mount of a subdirectory shows its content under another name, and
/// `..` from that mount's root climbs the mount tree, not the filesystem: the place still
/// says whose child it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub fs: (u32, u32),
    pub path: Vec<u8>,
}

/// A directory, its ancestors up to the node's root (nearest first, never empty), and
/// its place in its filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    ids: Vec<Identity>,
    place: Place,
}

impl Lineage {
    /// `None` when `ids` is empty.
    pub fn new(ids: Vec<Identity>, place: Place) -> Option<Lineage> {
        (!ids.is_empty()).then_some(Lineage { ids, place })
    }

    pub fn identity(&self) -> Identity {
        self.ids[0]
    }

    /// Nearest first, the node's root last.
    pub fn ids(&self) -> &[Identity] {
        &self.ids
    }

    /// Whether `other`'s directory is one of this one's strict ancestors.
    fn is_below(&self, other: &Lineage) -> bool {
        self.ids[1..].contains(&other.identity())
    }
}

/// Where a use's directory is on the candidate's line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    Is,
    Above,
    Below,
}

impl Relation {
    fn words(self) -> &'static str {
        match self {
            Relation::Is => "the directory itself",
            Relation::Above => "a directory above it",
            Relation::Below => "a directory below it",
        }
    }
}

/// How the use's directory stands to the candidate, if it is on its line: by identity
/// along the `..` climbs, or, inside one filesystem, by place (a bind mount of a child).
pub fn relation(candidate: &Lineage, used: &Lineage) -> Option<Relation> {
    if candidate.identity() == used.identity() {
        Some(Relation::Is)
    } else if candidate.is_below(used) {
        Some(Relation::Above)
    } else if used.is_below(candidate) {
        Some(Relation::Below)
    } else if candidate.place.fs != used.place.fs {
        None
    } else if candidate.place.path == used.place.path {
        Some(Relation::Is)
    } else if is_at_or_below(&candidate.place.path, &used.place.path) {
        Some(Relation::Above)
    } else if is_at_or_below(&used.place.path, &candidate.place.path) {
        Some(Relation::Below)
    } else {
        None
    }
}

/// What one use reaches on the node now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// This directory (for an open `subPathExpr` use: the directory of its known part,
    /// anything below which it may be).
    Directory(Lineage),
    /// Nothing now, and why that is safe.
    Nothing(String),
    /// Cannot be established: the sentence says why.
    Unknown(String),
}

/// One host directory a pod reaches, for the decision and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Use {
    /// `namespace/name (uid …)`.
    pub pod: String,
    /// How the pod names it: `hostPath /data/cache`, `claim data → PersistentVolume pv-1
    /// (local /mnt/disks/ssd1)`.
    pub via: String,
    pub reach: Reach,
}

/// Whether any use reaches `candidate` (whose host path is `directory`, for messages):
/// the first use on its line is [`Busy::InUse`]; otherwise the first use that cannot be
/// resolved is [`Busy::Unknown`].
pub fn decide(candidate: &Lineage, directory: &str, uses: &[Use]) -> Result<(), Busy> {
    let mut unknown = None;
    for one in uses {
        match &one.reach {
            Reach::Directory(used) => {
                if let Some(relation) = relation(candidate, used) {
                    return Err(Busy::InUse(format!(
                        "pod {} reaches {directory} whether it runs or not: its {} is, on the \
                         node, {}",
                        one.pod,
                        one.via,
                        relation.words()
                    )));
                }
            }
            Reach::Nothing(_) => {}
            Reach::Unknown(why) => {
                unknown.get_or_insert_with(|| {
                    Busy::Unknown(format!(
                        "cannot tell whether pod {} reaches {directory}: its {} {why}",
                        one.pod, one.via
                    ))
                });
            }
        }
    }
    unknown.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory on device 8:1 whose place is its inode numbers as a path
    /// (`/2/10/20/30`), so places agree with the climbs unless a test says otherwise.
    fn line(ids: &[u64]) -> Lineage {
        let path = ids
            .iter()
            .rev()
            .map(|ino| format!("/{ino}"))
            .collect::<String>();
        placed(ids, (8, 1), &path)
    }

    fn placed(ids: &[u64], fs: (u32, u32), path: &str) -> Lineage {
        let place = Place {
            fs,
            path: path.as_bytes().to_vec(),
        };
        Lineage::new(ids.iter().map(|&ino| (8, ino)).collect(), place).unwrap()
    }

    fn at(ids: &[u64]) -> Use {
        Use {
            pod: "batch/p (uid u)".into(),
            via: "hostPath /x".into(),
            reach: Reach::Directory(line(ids)),
        }
    }

    // The candidate: inode 30, in 20, in 10, in the node's root 2.
    const CANDIDATE: [u64; 4] = [30, 20, 10, 2];

    #[test]
    fn on_the_line_by_identity_not_by_spelling() {
        let candidate = line(&CANDIDATE);
        assert_eq!(relation(&candidate, &line(&CANDIDATE)), Some(Relation::Is));
        assert_eq!(
            relation(&candidate, &line(&[20, 10, 2])),
            Some(Relation::Above)
        );
        assert_eq!(relation(&candidate, &line(&[2])), Some(Relation::Above));
        assert_eq!(
            relation(&candidate, &line(&[40, 30, 20, 10, 2])),
            Some(Relation::Below)
        );
        // A sibling, and the sibling's child: off the line.
        assert_eq!(relation(&candidate, &line(&[31, 20, 10, 2])), None);
        assert_eq!(relation(&candidate, &line(&[41, 31, 20, 10, 2])), None);
        // The same inode number on another device is another directory.
        let place = Place {
            fs: (9, 1),
            path: b"/30".to_vec(),
        };
        let other_device = Lineage::new(vec![(9, 30), (8, 20), (8, 10), (8, 2)], place).unwrap();
        assert_eq!(relation(&candidate, &other_device), None);
    }

    #[test]
    fn a_bind_mount_of_a_child_is_below_by_its_place() {
        // /srv/child (inode 40 under 50 under the root) is a bind mount of the
        // candidate's child: its climb never meets the candidate, its place does.
        let candidate = line(&CANDIDATE);
        let child = placed(&[40, 50, 2], (8, 1), "/2/10/20/30/40");
        assert_eq!(relation(&candidate, &child), Some(Relation::Below));
        let alias = placed(&[30, 50, 2], (8, 1), "/2/10/20/30");
        assert_eq!(relation(&candidate, &alias), Some(Relation::Is));
        let parent = placed(&[20, 50, 2], (8, 1), "/2/10/20");
        assert_eq!(relation(&candidate, &parent), Some(Relation::Above));
        // The same place on another filesystem, and a sibling's place: off the line.
        let elsewhere = placed(&[41, 50, 2], (8, 2), "/2/10/20/30/40");
        assert_eq!(relation(&candidate, &elsewhere), None);
        let sibling = placed(&[41, 50, 2], (8, 1), "/2/10/20/31");
        assert_eq!(relation(&candidate, &sibling), None);
    }

    #[test]
    fn in_use_is_named_before_unknown_and_nothing_keeps_nothing() {
        let candidate = line(&CANDIDATE);
        let unknown = Use {
            reach: Reach::Unknown("cannot be resolved: EACCES".into()),
            ..at(&[2])
        };
        let nothing = Use {
            reach: Reach::Nothing("does not exist on the node".into()),
            ..at(&[2])
        };
        assert_eq!(
            decide(&candidate, "/d", std::slice::from_ref(&nothing)),
            Ok(())
        );
        assert_eq!(
            decide(&candidate, "/d", &[at(&[31, 20, 10, 2]), nothing]),
            Ok(())
        );
        let verdict = decide(&candidate, "/d", std::slice::from_ref(&unknown)).unwrap_err();
        assert_eq!(verdict.reason(), "in_use_unknown");
        assert!(verdict.why().contains("batch/p") && verdict.why().contains("hostPath /x"));
        let verdict = decide(&candidate, "/d", &[unknown, at(&[40, 30, 20, 10, 2])]).unwrap_err();
        assert_eq!(verdict.reason(), "in_use");
        assert!(
            verdict.why().contains("a directory below it"),
            "{verdict:?}"
        );
    }
}
