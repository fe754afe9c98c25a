//! The one normalization of a host path, shared by the webhook (its config's
//! `allowedHostPathPrefixes`, and every hostPath it reads) and the node agent (its
//! `--allow`), so that a value one accepts is accepted, and spelled, the same by the other
//! (issue 32: the chart passed `/mnt/scratch/` as written, the webhook took it, and the
//! agent refused to start on every node).

/// `path` absolute with its empty and `.` segments dropped (`/a//b/./c/` is `/a/b/c`);
/// `None` for a relative or empty path, a `..` segment or any control character: those are
/// refused rather than guessed.
pub fn normalize(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    clean_segments(path)
}

/// The segments of `path` joined below `/`; `None` on `..` or a control character.
pub fn clean_segments(path: &str) -> Option<String> {
    if path.chars().any(char::is_control) {
        return None;
    }
    let mut cleaned = String::with_capacity(path.len() + 1);
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => return None,
            segment => {
                cleaned.push('/');
                cleaned.push_str(segment);
            }
        }
    }
    if cleaned.is_empty() {
        cleaned.push('/');
    }
    Some(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_for_every_way_of_writing_a_prefix() {
        for (path, normalized) in [
            ("/a/b", Some("/a/b")),
            ("/a//b/", Some("/a/b")),
            ("/mnt/scratch/", Some("/mnt/scratch")),
            ("/a/./b", Some("/a/b")),
            ("/", Some("/")),
            ("//", Some("/")),
            ("a/b", None),
            ("/a/../b", None),
            ("/a/\u{7}b", None),
            ("/a\nb", None),
            ("", None),
        ] {
            assert_eq!(normalize(path).as_deref(), normalized, "{path:?}");
        }
    }
}
