//! Host paths as the policy reads them: normalized absolute paths, how two of them lie
//! (one at or below the other), and [`HostPath`], a directory on the node or the set of
//! directories it may be.
//!
//! An *open* host path is one the webhook cannot know to the last segment (a mount's
//! `subPathExpr`, which only the kubelet expands): every rule treats it as every directory
//! it may be, fail closed. Where a mount's host path comes from is `mutation::targets`'
//! business; this is only what the rules need to compare one.

/// Collapses `//`, drops `.` and a trailing `/`; `None` for relative paths or `..`.
/// This is the strict form annotations and configuration use.
pub fn normalize(path: &str) -> Option<String> {
    prestop_clean::host_path::normalize(path)
}

/// Whether `path` is `base` or lies below it (both normalized).
pub fn is_at_or_below(path: &str, base: &str) -> bool {
    base == "/"
        || path == base
        || (path.starts_with(base) && path.as_bytes().get(base.len()) == Some(&b'/'))
}

/// Whether one of the two (normalized) paths is at or below the other.
pub fn on_one_line(a: &str, b: &str) -> bool {
    is_at_or_below(a, b) || is_at_or_below(b, a)
}

/// A directory on the node, or the set of directories it may be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPath {
    /// Normalized; the path itself when `open` is `None`, else an ancestor of it.
    pub known: String,
    pub open: Option<Open>,
}

/// How far below [`HostPath::known`] the real directory may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Open {
    /// Strictly below it.
    Below,
    /// It, or anything below it.
    AtOrBelow,
}

impl HostPath {
    pub(crate) fn exact(known: String) -> HostPath {
        HostPath { known, open: None }
    }

    /// Anywhere at all: what an unreadable host path may be.
    pub(crate) fn anywhere() -> HostPath {
        HostPath {
            known: "/".to_owned(),
            open: Some(Open::AtOrBelow),
        }
    }

    /// Whether some directory this may be lies at or below `tree`, or contains it.
    pub fn may_overlap(&self, tree: &str) -> bool {
        // An open path may be `tree` itself whenever `tree` is below `known`.
        on_one_line(&self.known, tree)
    }

    /// Whether some directory this may be is `entry` or contains it.
    pub fn may_contain(&self, entry: &str) -> bool {
        match self.open {
            None | Some(Open::AtOrBelow) => is_at_or_below(entry, &self.known),
            Some(Open::Below) => entry != self.known && is_at_or_below(entry, &self.known),
        }
    }

    /// Whether every directory this may be lies at or below `prefix`.
    pub fn surely_below(&self, prefix: &str) -> bool {
        is_at_or_below(&self.known, prefix)
    }

    /// Whether some directory `other` may be lies at or below some directory this may be.
    pub fn may_hold(&self, other: &HostPath) -> bool {
        match (self.open, other.open) {
            (None, None) => is_at_or_below(&other.known, &self.known),
            // An open `other` may reach down to anything below an ancestor of ours.
            (_, Some(_)) => on_one_line(&self.known, &other.known),
            (Some(Open::Below), None) => {
                other.known != self.known && is_at_or_below(&other.known, &self.known)
            }
            (Some(Open::AtOrBelow), None) => is_at_or_below(&other.known, &self.known),
        }
    }

    /// This path, `suffix` (a normalized absolute container path below the mount) deeper.
    pub fn join(&self, suffix: &str) -> HostPath {
        if suffix == "/" || suffix.is_empty() {
            return self.clone();
        }
        match self.open {
            None => HostPath::exact(join(&self.known, suffix)),
            // The suffix is at least one segment below the unknown part.
            Some(_) => HostPath {
                known: self.known.clone(),
                open: Some(Open::Below),
            },
        }
    }

    /// For messages: `/data`, or `/data/*` when the directory below is unknown.
    pub fn display(&self) -> String {
        match self.open {
            None => self.known.clone(),
            Some(_) => join(&self.known, "/*"),
        }
    }
}

/// `base` and `suffix` with one `/` between them, whether or not `suffix` starts with
/// one: `/mnt/scratch/a` and `b` are `/mnt/scratch/a/b`, never `/mnt/scratch/ab`.
fn join(base: &str, suffix: &str) -> String {
    let base = base.trim_end_matches('/');
    let suffix = suffix.strip_prefix('/').unwrap_or(suffix);
    format!("{base}/{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(path: &str) -> HostPath {
        HostPath::exact(path.to_owned())
    }

    fn open(path: &str, open: Open) -> HostPath {
        HostPath {
            known: path.to_owned(),
            open: Some(open),
        }
    }

    #[test]
    fn open_paths_are_every_directory_they_may_be() {
        let below = open("/data", Open::Below);
        assert!(below.may_overlap("/data/keep") && below.may_overlap("/"));
        assert!(below.may_contain("/data/keep") && !below.may_contain("/data"));
        assert!(open("/data", Open::AtOrBelow).may_contain("/data"));
        assert!(!below.may_contain("/other"));
        assert!(below.may_hold(&exact("/data/x")) && !below.may_hold(&exact("/data")));
        assert!(exact("/data/x").may_hold(&open("/data", Open::Below)));
        assert!(!exact("/data/x").may_hold(&exact("/data")));
        assert!(below.surely_below("/data") && !below.surely_below("/data/x"));
    }

    #[test]
    fn at_or_below_respects_segment_boundaries() {
        assert!(is_at_or_below("/data", "/data"));
        assert!(is_at_or_below("/data/x", "/data"));
        assert!(is_at_or_below("/anything", "/"));
        assert!(!is_at_or_below("/database", "/data"));
        assert!(!is_at_or_below("/dat", "/data"));
        assert!(on_one_line("/data", "/data/x") && on_one_line("/data/x", "/data"));
        assert!(!on_one_line("/data/x", "/data/y"));
    }

    #[test]
    fn joins() {
        assert_eq!(exact("/").join("/x"), exact("/x"));
        assert_eq!(exact("/mnt").join("/x/y"), exact("/mnt/x/y"));
        assert_eq!(
            open("/mnt", Open::AtOrBelow).join("/x"),
            open("/mnt", Open::Below)
        );
        assert_eq!(open("/mnt", Open::Below).display(), "/mnt/*");
        // A suffix without its `/` (a target below a mount at `/`) is still one level down.
        assert_eq!(exact("/mnt/scratch/a").join("b"), exact("/mnt/scratch/a/b"));
        assert_eq!(exact("/").join("b/c"), exact("/b/c"));
    }
}
