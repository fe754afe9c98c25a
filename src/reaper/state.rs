//! The state file: which host directories injected pods of this node were allowed to
//! clean, and by which pods. It is what lets a restarted reaper (or a rebooted node)
//! empty the directories of pods that went while it was not watching.
//!
//! Written atomically (a temp file in the same directory, fsync, rename, fsync of the
//! directory), so a crash leaves the old file or the new one, never half of one. A file
//! that cannot be read is moved aside (`state.json.corrupt.<time>`) and the reaper starts
//! with no records: it then empties nothing it has not seen recorded again (fail
//! closed), and says so.
//!
//! Before each walk the file also names the directory being walked ([`Walking`]), so a
//! reaper that dies during a walk (out of memory, killed) knows it at the next start: that
//! directory goes last, and after [`MAX_WALK_ATTEMPTS`] walks that never finished it is
//! given up, so one directory can never stop the others.

use super::ledger::PodRef;
use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

const VERSION: u32 = 1;

/// Walks of one directory that may start without one finishing before it is given up.
pub const MAX_WALK_ATTEMPTS: u32 = 3;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    node: String,
    directories: Vec<Entry>,
    /// Absent when no walk is under way, so files without it stay version 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    walking: Option<Walking>,
}

/// The directory a walk started on, and how many walks of it have started without the
/// reaper seeing one finish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Walking {
    pub path: String,
    pub attempts: u32,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    path: String,
    pods: Vec<PodRef>,
}

/// What [`load`] found.
#[derive(Debug, Default)]
pub struct Loaded {
    pub records: BTreeMap<String, Vec<PodRef>>,
    /// A walk that was under way when the file was last written: it did not finish.
    pub walking: Option<Walking>,
    /// (uid, directory): dealt with while that pod had ended and was still listed
    /// ([`save_dealt_with`]), so that a restart's first list records it no more.
    pub dealt_with: Vec<(String, String)>,
    /// Problems, each a sentence for the log (the file moved aside, an entry dropped).
    pub problems: Vec<String>,
}

/// The side file of what was dealt with: a file of its own beside the state file, so
/// that a reaper of an earlier release (whose state file admits no unknown field) still
/// reads its records after a rollback, and only forgets these.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DealtWithFile {
    version: u32,
    node: String,
    /// (pod uid, directory) pairs.
    pairs: Vec<(String, String)>,
}

/// `state.json` → `state.json.dealt-with`, beside it.
pub fn dealt_with_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".dealt-with");
    path.with_file_name(name)
}

/// Reads the side file of `node`; a missing one is empty, a bad one is a problem and
/// empty (what it held is walked once more: directories already emptied).
fn load_dealt_with(path: &Path, node: &str, problems: &mut Vec<String>) -> Vec<(String, String)> {
    let path = dealt_with_path(path);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => {
            problems.push(format!("cannot read {}: {error}", path.display()));
            return Vec::new();
        }
    };
    match serde_json::from_slice::<DealtWithFile>(&text) {
        Ok(file) if file.version == VERSION && file.node == node => file
            .pairs
            .into_iter()
            .filter(|(_, directory)| prestop_clean::check_target(directory).is_ok())
            .collect(),
        Ok(file) => {
            problems.push(format!(
                "{} is version {} of node {:?}, not version {VERSION} of {node:?}; ignored",
                path.display(),
                file.version,
                file.node
            ));
            Vec::new()
        }
        Err(error) => {
            problems.push(format!(
                "{} is not valid ({error}); ignored",
                path.display()
            ));
            Vec::new()
        }
    }
}

/// Writes what was dealt with for `node` beside the state file `path`, atomically.
pub fn save_dealt_with(path: &Path, node: &str, pairs: &[(String, String)]) -> anyhow::Result<()> {
    let file = DealtWithFile {
        version: VERSION,
        node: node.to_owned(),
        pairs: pairs.to_vec(),
    };
    write_atomically(&dealt_with_path(path), &file)
}

/// Reads the state file of `node`. A missing file is an empty state.
pub fn load(path: &Path, node: &str) -> Loaded {
    let mut loaded = Loaded::default();
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return loaded,
        Err(error) => {
            loaded.problems.push(format!(
                "cannot read the state file {}: {error}; starting without records",
                path.display()
            ));
            return loaded;
        }
    };
    let file: StateFile = match serde_json::from_slice(&text) {
        Ok(file) => file,
        Err(error) => {
            let aside = aside(path);
            let moved = std::fs::rename(path, &aside);
            loaded.problems.push(format!(
                "the state file {} is not valid ({error}); {}; starting without records",
                path.display(),
                match moved {
                    Ok(()) => format!("moved it to {}", aside.display()),
                    Err(error) => format!("could not move it aside: {error}"),
                }
            ));
            return loaded;
        }
    };
    if file.version != VERSION || file.node != node {
        loaded.problems.push(format!(
            "the state file {} is version {} of node {:?}, not version {VERSION} of {node:?}; \
             starting without records",
            path.display(),
            file.version,
            file.node
        ));
        return loaded;
    }
    loaded.walking = file.walking;
    loaded.dealt_with = load_dealt_with(path, node, &mut loaded.problems);
    for entry in file.directories {
        match prestop_clean::check_target(&entry.path) {
            Ok(()) if !entry.pods.is_empty() => {
                loaded.records.insert(entry.path, entry.pods);
            }
            Ok(()) => loaded
                .problems
                .push(format!("dropped {:?}: no pod", entry.path)),
            Err(why) => loaded
                .problems
                .push(format!("dropped {:?}: {why}", entry.path)),
        }
    }
    loaded
}

/// Writes the records of `node`, and the walk under way if any, atomically.
pub fn save(
    path: &Path,
    node: &str,
    records: &BTreeMap<String, Vec<PodRef>>,
    walking: Option<&Walking>,
) -> anyhow::Result<()> {
    let file = StateFile {
        version: VERSION,
        node: node.to_owned(),
        directories: records
            .iter()
            .map(|(path, pods)| Entry {
                path: path.clone(),
                pods: pods.clone(),
            })
            .collect(),
        walking: walking.cloned(),
    };
    write_atomically(path, &file)
}

/// Writes `value` as JSON to `path` through a temporary file beside it, synced.
fn write_atomically(path: &Path, value: &impl Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_vec_pretty(value)?;
    text.push(b'\n');
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let temp = path.with_extension(format!("tmp.{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut out = std::fs::File::create(&temp)?;
        out.write_all(&text)?;
        out.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    };
    write()
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })
        .with_context(|| format!("writing {}", path.display()))
}

/// `state.json` → `state.json.corrupt.<seconds since the epoch>`, beside it. The whole
/// name is kept (not `with_extension`, which would replace `.json`).
fn aside(path: &Path) -> PathBuf {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".corrupt.{stamp}"));
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(uid: &str) -> PodRef {
        PodRef {
            uid: uid.into(),
            namespace: "batch".into(),
            name: format!("job-{uid}"),
            user: Default::default(),
        }
    }

    #[test]
    fn round_trip_and_refusals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        assert!(load(&path, "node-a").records.is_empty());
        let mut records = BTreeMap::new();
        let known = PodRef {
            user: crate::reaper::user::RecordedUser::Known(crate::reaper::user::PodUser {
                uid: 1000,
                gid: 1000,
                groups: vec![5],
            }),
            ..pod("2")
        };
        records.insert("/mnt/scratch/a".to_owned(), vec![pod("1"), known]);
        save(&path, "node-a", &records, None).unwrap();
        let loaded = load(&path, "node-a");
        assert_eq!(loaded.records, records);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        // Only the file itself is left: no temp file.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        // Another node's file is not ours.
        let other = load(&path, "node-b");
        assert!(other.records.is_empty() && other.problems.len() == 1);

        // A hand-edited entry that is not a normalized absolute path is dropped.
        let text = std::fs::read_to_string(&path)
            .unwrap()
            .replace("/mnt/scratch/a", "/mnt/../etc");
        std::fs::write(&path, text).unwrap();
        let edited = load(&path, "node-a");
        assert!(edited.records.is_empty());
        assert!(
            edited.problems[0].contains("not normalized"),
            "{:?}",
            edited.problems
        );
    }

    /// The side file of what was dealt with: read back as written; a bad one, another
    /// node's, or an entry that is not a normalized path loses only itself, never the
    /// records; a state file without one (an earlier release's) reads as before.
    #[test]
    fn what_was_dealt_with_is_a_side_file_that_loses_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let mut records = BTreeMap::new();
        records.insert("/mnt/scratch/a".to_owned(), vec![pod("1")]);
        save(&path, "node-a", &records, None).unwrap();
        assert!(load(&path, "node-a").dealt_with.is_empty());
        let pairs = vec![
            ("2".to_owned(), "/mnt/scratch/b".to_owned()),
            ("3".to_owned(), "/mnt/../etc".to_owned()),
        ];
        save_dealt_with(&path, "node-a", &pairs).unwrap();
        assert!(dealt_with_path(&path).ends_with("state.json.dealt-with"));
        let loaded = load(&path, "node-a");
        assert_eq!(loaded.records, records);
        assert_eq!(loaded.dealt_with, pairs[..1]);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        // The state file itself stays what an earlier release reads.
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("dealt"), "{text}");

        save_dealt_with(&path, "node-b", &pairs).unwrap();
        let other = load(&path, "node-a");
        assert!(other.dealt_with.is_empty() && other.problems.len() == 1);
        assert_eq!(other.records, records);

        std::fs::write(dealt_with_path(&path), b"{\"version\": 1, \"pai").unwrap();
        let bad = load(&path, "node-a");
        assert!(bad.dealt_with.is_empty());
        assert!(bad.problems[0].contains("not valid"), "{:?}", bad.problems);
        assert_eq!(bad.records, records);
    }

    #[test]
    fn a_corrupt_file_is_moved_aside_and_nothing_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(
            &path,
            b"{\"version\":1,\"node\":\"node-a\",\"directories\":[{\"pa",
        )
        .unwrap();
        let loaded = load(&path, "node-a");
        assert!(loaded.records.is_empty());
        assert!(
            loaded.problems[0].contains("moved it to"),
            "{:?}",
            loaded.problems
        );
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
