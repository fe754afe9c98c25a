//! kubectl reads manifests as YAML 1.1, serde_yaml as YAML 1.2. Two kinds of plain
//! scalar mean different things, and both are common in real manifests:
//! - `0644` is the octal number 420 for kubectl but the string `"0644"` for serde_yaml
//!   (`defaultMode: 0644` would come out as a string the API server rejects). We rewrite it
//!   to `0o644` before parsing, so the value is the one the API server receives.
//! - `y`, `yes`, `on`, `n`, `no`, `off` are booleans for kubectl. We keep the string (our
//!   `cleanup: off` is meant as one) and warn: with kubectl the API server would refuse a
//!   boolean annotation or env value.
//!
//! A light line scanner, not a YAML parser: it looks only at `key: value` and `- value`
//! lines and skips block scalars (`|`, `>`) and multi-line quoted strings, whose text must
//! stay exactly as written.

use std::borrow::Cow;

const BOOLEANS: &[(&str, bool)] = &[
    ("y", true),
    ("Y", true),
    ("yes", true),
    ("Yes", true),
    ("YES", true),
    ("on", true),
    ("On", true),
    ("ON", true),
    ("n", false),
    ("N", false),
    ("no", false),
    ("No", false),
    ("NO", false),
    ("off", false),
    ("Off", false),
    ("OFF", false),
];

/// The piece with YAML 1.1 octals rewritten, and one warning per YAML 1.1 boolean
/// (`line N: ...`, numbered from `first_line`).
pub fn adapt(piece: &str, first_line: usize) -> (Cow<'_, str>, Vec<String>) {
    let mut out = String::new();
    let mut changed = false;
    let mut warnings = Vec::new();
    let mut skip = Skip::None;
    for (index, line) in piece.split_inclusive('\n').enumerate() {
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        let copy_as_is = match skip {
            Skip::Block(column) if body.trim().is_empty() || indent > column => true,
            Skip::Quote(quote) => {
                if body.contains(quote) {
                    skip = Skip::None;
                }
                true
            }
            _ => false,
        };
        if copy_as_is {
            out.push_str(line);
            continue;
        }
        skip = Skip::None;
        let Some((value_at, column)) = scalar_position(body, indent) else {
            out.push_str(line);
            continue;
        };
        let rest = &body[value_at..];
        let value = strip_comment(rest);
        if let Some(quote) = value.chars().next().filter(|c| *c == '"' || *c == '\'') {
            if !closes(value, quote) {
                skip = Skip::Quote(quote);
            }
        } else if value.starts_with(['|', '>']) {
            skip = Skip::Block(column);
        } else if is_octal(value) {
            let digits = value.trim_start_matches('0');
            let digits = if digits.is_empty() { "0" } else { digits };
            out.push_str(&body[..value_at]);
            out.push_str("0o");
            out.push_str(digits);
            out.push_str(&line[value_at + value.len()..]);
            changed = true;
            continue;
        } else if let Some((_, meaning)) = BOOLEANS.iter().find(|(word, _)| *word == value) {
            warnings.push(format!(
                "line {}: `{}` is the boolean {meaning} for kubectl (YAML 1.1), the string {value:?} here; quote it (\"{value}\") to mean the string",
                first_line + index,
                body.trim()
            ));
        }
        out.push_str(line);
    }
    let text = if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(piece)
    };
    (text, warnings)
}

#[derive(Clone, Copy)]
enum Skip {
    None,
    /// Inside a block scalar whose parent node starts at this column.
    Block(usize),
    /// Inside a quoted string that continues on the next lines.
    Quote(char),
}

/// Byte offset of the value in a `key: value` or `- value` line, and the column of the
/// node that owns it (a block scalar's lines are indented further than that).
fn scalar_position(body: &str, indent: usize) -> Option<(usize, usize)> {
    let mut at = indent;
    let mut dashed = false;
    while body[at..].starts_with("- ") {
        at += 2;
        at += body[at..].len() - body[at..].trim_start_matches(' ').len();
        dashed = true;
    }
    let rest = &body[at..];
    if rest.is_empty() || rest.starts_with(['#', '%']) || rest.starts_with("---") {
        return None;
    }
    let key_end = if rest.starts_with(['"', '\'']) {
        let quote = rest.chars().next()?;
        let close = rest[1..].find(quote)? + 1;
        rest[close + 1..].starts_with(':').then_some(close + 1)
    } else {
        rest.find(": ")
            .or_else(|| rest.ends_with(':').then(|| rest.len() - 1))
    };
    match key_end {
        Some(end) => {
            let after = &rest[end + 1..];
            let value_at = at + end + 1 + (after.len() - after.trim_start().len());
            Some((value_at, at))
        }
        None if dashed => Some((at, at.saturating_sub(2))),
        None => None,
    }
}

fn strip_comment(value: &str) -> &str {
    if value.starts_with('#') {
        return "";
    }
    let value = match value.find(" #") {
        Some(at) if !value.starts_with(['"', '\'']) => &value[..at],
        _ => value,
    };
    value.trim_end()
}

fn closes(value: &str, quote: char) -> bool {
    let inner = &value[1..];
    match quote {
        '\'' => inner.replace("''", "").contains('\''),
        _ => {
            let mut escaped = false;
            inner.chars().any(|c| {
                let closing = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                closing
            })
        }
    }
}

fn is_octal(value: &str) -> bool {
    value.len() > 1 && value.starts_with('0') && value.bytes().all(|b| (b'0'..=b'7').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_modes_become_numbers_kubectl_would_send() {
        let text = "volumes:\n- name: cfg\n  configMap:\n    defaultMode: 0644 # rw-r--r--\n    items:\n    - - 0755\n      - '0644'\n";
        let (adapted, warnings) = adapt(text, 1);
        assert!(warnings.is_empty());
        assert!(
            adapted.contains("defaultMode: 0o644 # rw-r--r--\n"),
            "{adapted}"
        );
        assert!(adapted.contains("- - 0o755\n"), "{adapted}");
        assert!(adapted.contains("- '0644'\n"), "{adapted}");
        let value: serde_json::Value = serde_yaml::from_str(&adapted).unwrap();
        assert_eq!(value["volumes"][0]["configMap"]["defaultMode"], 420);
    }

    #[test]
    fn block_scalars_and_quoted_lines_are_left_alone() {
        let text = "data:\n  a: |\n    mode: 0644\n    x: off\n  b: \"first\n    mode: 0644\"\n  c: >-\n\n    - 0600\n  d: 0600\n";
        let (adapted, warnings) = adapt(text, 1);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(adapted, text.replace("d: 0600", "d: 0o600"));
    }

    #[test]
    fn yaml_1_1_booleans_are_reported_with_their_line() {
        let text = "metadata:\n  annotations:\n    prestop-injector.io/cleanup: off\n    b: 'off'\nenv:\n- value: yes\n";
        let (adapted, warnings) = adapt(text, 10);
        assert_eq!(adapted, text);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0]
                .starts_with("line 12: `prestop-injector.io/cleanup: off` is the boolean false"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[1].starts_with("line 15: `- value: yes` is the boolean true"),
            "{}",
            warnings[1]
        );
    }
}
