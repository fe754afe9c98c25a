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
///
/// Byte by byte: the webhook normalizes the hostPaths of every review, and `str::split`'s
/// and `chars`' general searchers cost some 9 k instructions a review there. `/` is ASCII,
/// so no byte of another character is taken for it.
pub fn clean_segments(path: &str) -> Option<String> {
    let bytes = path.as_bytes();
    if may_hold_control(bytes) && path.chars().any(char::is_control) {
        return None;
    }
    let mut cleaned = String::with_capacity(path.len() + 1);
    let mut start = 0;
    for end in 0..=bytes.len() {
        if end < bytes.len() && bytes[end] != b'/' {
            continue;
        }
        match &bytes[start..end] {
            b"" | b"." => {}
            b".." => return None,
            _ => {
                cleaned.push('/');
                // Both ends are at a `/` or the string's ends: character boundaries.
                cleaned.push_str(&path[start..end]);
            }
        }
        start = end + 1;
    }
    if cleaned.is_empty() {
        cleaned.push('/');
    }
    Some(cleaned)
}

/// Whether the UTF-8 `bytes` may hold a character of `char::is_control`: a C0 byte, DEL,
/// or `0xC2`, the first byte of U+0080 to U+00BF (C1 among them). Without an early exit,
/// so that it runs over many bytes at once; `chars` then decides.
fn may_hold_control(bytes: &[u8]) -> bool {
    bytes.iter().fold(false, |seen, &b| {
        seen | (b < 0x20) | (b == 0x7f) | (b == 0xc2)
    })
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

    /// The segments as `str::split` and `char::is_control` read them, the way this was
    /// written before it went byte by byte.
    fn by_chars(path: &str) -> Option<String> {
        if path.chars().any(char::is_control) {
            return None;
        }
        let mut cleaned = String::new();
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

    /// Every string of up to six characters from an alphabet of the separator, the dot,
    /// C0 (BEL), DEL, C1 (U+0085, U+009F), the first character after C1 that also begins
    /// with `0xC2` (U+00A0), and two more characters of several bytes (U+0100, U+2F00):
    /// the same answer as `str::split` and `char::is_control` give.
    #[test]
    fn byte_by_byte_reads_as_the_chars_do() {
        let alphabet = [
            "/", ".", "a", "\u{7}", "\u{7f}", "\u{85}", "\u{9f}", "\u{a0}", "\u{100}", "\u{2f00}",
        ];
        let mut strings = vec![String::new()];
        let mut compared = 0;
        for _ in 0..6 {
            strings = strings
                .iter()
                .flat_map(|shorter| alphabet.iter().map(move |c| format!("{shorter}{c}")))
                .collect();
            for path in &strings {
                assert_eq!(clean_segments(path), by_chars(path), "{path:?}");
            }
            compared += strings.len();
        }
        assert_eq!(compared, 1_111_110);
    }
}
