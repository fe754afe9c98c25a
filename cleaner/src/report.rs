//! What one cleanup did: the [`Report`] of a target and its one-line summary.
//!
//! Names come from a hostile tree, so every path in a message is escaped: a newline or an
//! invalid UTF-8 byte in a file name can never forge or break a summary line.

use std::fmt;
use std::time::Duration;

/// How many survivors a report names; the rest are only counted.
pub const MAX_NAMED: usize = 64;
/// How many survivors the summary line names.
const NAMED_IN_SUMMARY: usize = 3;

/// The cleanup of one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The target as given.
    pub target: String,
    pub outcome: Outcome,
    /// Entries removed (files, links, directories, …), the target itself never.
    pub removed: u64,
    /// The `st_size` of the removed regular files.
    pub bytes: u64,
    /// Entries not removed: every survivor plus the directories kept because a survivor
    /// is inside them.
    pub left: u64,
    /// Why entries survived, at most [`MAX_NAMED`] of them; directories that only hold
    /// a survivor are counted in `left`, not named.
    pub survivors: Vec<Survivor>,
    /// Survivors beyond [`MAX_NAMED`].
    pub unnamed: u64,
    /// Walks over the tree: more than one when it changed under the walk (a directory
    /// moved, an entry written during the cleanup).
    pub passes: u32,
    pub elapsed: Duration,
    /// Checked by the rule without the node agent (none configured or reachable): a
    /// per-pod directory, emptied without asking who else on the node reads it. A reader
    /// of a directory above it (a node-level shipper mounting the parent) is not seen,
    /// and the summary says so (issue 38, class 9).
    pub without_agent: bool,
}

/// The result of a cleanup, in one word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Everything below the target is gone.
    Emptied,
    /// The target does not exist: nothing to clean, not an error.
    Missing,
    /// The target was not touched, for the reason given (a sentence fragment such as
    /// `/scratch/jobs is a symlink`).
    Skipped(String),
    /// Some entries survived; see [`Report::survivors`].
    Incomplete,
}

/// One entry that was left, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Survivor {
    /// The full path, as raw bytes (it need not be UTF-8).
    pub path: Vec<u8>,
    pub reason: Reason,
}

/// Directories below the target that a walk enters, one inside the other: what a frame
/// per level costs stays within a few MB (about 400 bytes a level at most), and no tree
/// but a tenant's own trick is deeper (`PATH_MAX` is 4,096 bytes). Deeper:
/// [`Reason::TooDeep`].
pub const MAX_DEPTH: usize = 16_384;

/// Why an entry survived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A mount point (any mount: tmpfs, another filesystem, a bind mount of the same
    /// one). Never entered, never removed.
    MountPoint,
    /// A directory that is the root of another mount of the container, seen inside the
    /// target through a bind mount of a directory above it (a PV whose directory lies
    /// inside a hostPath target): never entered, never removed.
    OtherMount,
    /// A directory on another device within the same mount (a btrfs subvolume): refused
    /// like a mount, as a device change is never expected inside one filesystem.
    OtherDevice,
    /// `EACCES`: no permission to open, list or remove (e.g. a mode-000 directory when
    /// not root).
    PermissionDenied,
    /// `EPERM`: an immutable or append-only file, or a sticky directory of another user.
    NotPermitted,
    /// The filesystem is mounted read-only.
    ReadOnly,
    /// The entry changed kind or was written to on every attempt (a concurrent writer).
    Changing,
    /// A directory deeper below the target than [`MAX_DEPTH`] levels:
    /// never entered, so it and what it holds stay.
    TooDeep,
    /// Any other error, as its `errno`.
    Error(i32),
}

impl Report {
    /// True when nothing below the target survived: emptied, or missing.
    pub fn is_clean(&self) -> bool {
        matches!(self.outcome, Outcome::Emptied | Outcome::Missing)
    }

    /// The summary line, without the program's name, e.g.
    /// `emptied /scratch: 1,234 entries, 5.6 MiB in 0.41 s`.
    pub fn summary(&self) -> String {
        let target = escape(self.target.as_bytes());
        let done = format!(
            "{} {}, {} in {:.2} s",
            thousands(self.removed),
            if self.removed == 1 {
                "entry"
            } else {
                "entries"
            },
            size(self.bytes),
            self.elapsed.as_secs_f64()
        );
        match &self.outcome {
            Outcome::Emptied if self.without_agent => format!(
                "emptied {target}: {done} (without the node agent: a reader on the node of a \
                 directory above it was not looked for)"
            ),
            Outcome::Emptied => format!("emptied {target}: {done}"),
            Outcome::Missing => format!("{target} is missing: nothing to clean"),
            Outcome::Skipped(why) => format!("skipped {target}: {why}"),
            Outcome::Incomplete => {
                let mut line = format!(
                    "{target}: {} {} left: ",
                    thousands(self.left),
                    if self.left == 1 { "entry" } else { "entries" }
                );
                let named: Vec<String> = self
                    .survivors
                    .iter()
                    .take(NAMED_IN_SUMMARY)
                    .map(Survivor::to_string)
                    .collect();
                line.push_str(&named.join("; "));
                let more =
                    self.survivors.len().saturating_sub(NAMED_IN_SUMMARY) as u64 + self.unnamed;
                if more > 0 {
                    line.push_str(&format!(" (and {} more)", thousands(more)));
                }
                line.push_str(&format!("; removed {done}"));
                line
            }
        }
    }
}

impl fmt::Display for Survivor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            // "…/d: Too many open files (os error 24)" reads better than a bare append.
            Reason::Error(_) => write!(f, "{}: {}", escape(&self.path), self.reason),
            _ => write!(f, "{} {}", escape(&self.path), self.reason),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::MountPoint => f.write_str("is a mount point"),
            Reason::OtherMount => {
                f.write_str("is the root of another mount of the container (not entered)")
            }
            Reason::OtherDevice => f.write_str("is on another device (not entered)"),
            Reason::PermissionDenied => f.write_str("permission denied"),
            Reason::NotPermitted => f.write_str("operation not permitted"),
            Reason::ReadOnly => f.write_str("is on a read-only filesystem"),
            Reason::Changing => f.write_str("kept changing during the cleanup"),
            Reason::TooDeep => write!(
                f,
                "is more than {} levels below the target (not entered)",
                thousands(MAX_DEPTH as u64)
            ),
            Reason::Error(errno) => write!(f, "{}", std::io::Error::from_raw_os_error(*errno)),
        }
    }
}

/// A path or name made printable on one line: valid UTF-8 stays as it is, `\` and control
/// characters are escaped (`\n`, `\u{85}`), invalid bytes become `\xff`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => out.extend(c.escape_default()),
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// Bytes in binary units with one decimal: `512 B`, `5.6 MiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(size(0), "0 B");
        assert_eq!(size(1023), "1023 B");
        assert_eq!(size(5_872_026), "5.6 MiB");
        assert_eq!(size(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn hostile_names_stay_on_one_line() {
        assert_eq!(escape(b"/s/a\nb"), "/s/a\\nb");
        assert_eq!(escape(b"/s/\xff-x"), "/s/\\xff-x");
        assert_eq!(escape("/s/\u{85}é\\".as_bytes()), "/s/\\u{85}é\\\\");
    }

    fn report(outcome: Outcome) -> Report {
        Report {
            target: "/scratch".into(),
            outcome,
            removed: 1234,
            bytes: 5_872_026,
            left: 2,
            survivors: vec![],
            unnamed: 0,
            passes: 1,
            elapsed: Duration::from_millis(410),
            without_agent: false,
        }
    }

    #[test]
    fn summary_lines() {
        assert_eq!(
            report(Outcome::Emptied).summary(),
            "emptied /scratch: 1,234 entries, 5.6 MiB in 0.41 s"
        );
        // Issue 38, class 9: what the rule without the node agent gives up, said.
        let unasked = Report {
            without_agent: true,
            ..report(Outcome::Emptied)
        };
        assert_eq!(
            unasked.summary(),
            "emptied /scratch: 1,234 entries, 5.6 MiB in 0.41 s (without the node agent: a \
             reader on the node of a directory above it was not looked for)"
        );
        assert_eq!(
            report(Outcome::Skipped("/scratch/jobs is a symlink".into())).summary(),
            "skipped /scratch: /scratch/jobs is a symlink"
        );
        let mut partial = report(Outcome::Incomplete);
        partial.survivors = vec![Survivor {
            path: b"/scratch/mnt".to_vec(),
            reason: Reason::MountPoint,
        }];
        assert_eq!(
            partial.summary(),
            "/scratch: 2 entries left: /scratch/mnt is a mount point; \
             removed 1,234 entries, 5.6 MiB in 0.41 s"
        );
        assert!(!partial.is_clean());
        assert!(report(Outcome::Missing).is_clean());
    }
}
