//! kubectl reads manifests as YAML 1.1 (sigs.k8s.io/yaml on go-yaml v2), serde_yaml as
//! YAML 1.2. Some plain scalars mean different things, and they are common in real
//! manifests; the preview must read them as kubectl does, or it shows a different object
//! from the one the webhook will see:
//! - `0644` is the octal number 420 for kubectl but the string `"0644"` for serde_yaml
//!   (`defaultMode: 0644`); `1_000` and `0b101` are numbers too. We rewrite them to the
//!   form serde_yaml reads as the same number.
//! - `y`, `Y`, `yes`, `on`, `n`, `no`, `off` (and their capitalised forms) are booleans for
//!   kubectl: `readOnly: yes` is a read-only mount. We rewrite them to `true` / `false` and
//!   warn, because a quoted string was perhaps meant (`cleanup: off` reaches the API
//!   server as a boolean, which it refuses in an annotation).
//!
//! A light line scanner, not a YAML parser: it looks only at `key: value` and `- value`
//! lines and skips block scalars (`|`, `>`) and multi-line quoted strings, whose text must
//! stay exactly as written. Keys are left alone.

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

/// The piece with YAML 1.1 numbers and booleans rewritten, and one warning per boolean
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
        let replacement = if let Some(quote) =
            value.chars().next().filter(|c| *c == '"' || *c == '\'')
        {
            if !closes(value, quote) {
                skip = Skip::Quote(quote);
            }
            None
        } else if value.starts_with(['|', '>']) {
            skip = Skip::Block(column);
            None
        } else if let Some(number) = yaml11_int(value) {
            Some(number)
        } else if let Some((_, meaning)) = BOOLEANS.iter().find(|(word, _)| *word == value) {
            warnings.push(format!(
                "line {}: `{}` is the boolean {meaning} for kubectl (YAML 1.1), and here; quote it (\"{value}\") to mean the string",
                first_line + index,
                body.trim()
            ));
            Some(meaning.to_string())
        } else {
            None
        };
        if let Some(replacement) = replacement {
            out.push_str(&body[..value_at]);
            out.push_str(&replacement);
            out.push_str(&line[value_at + value.len()..]);
            changed = true;
            continue;
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

/// go-yaml v2 reads a plain scalar as an integer when, with every `_` removed, Go's
/// `strconv.ParseInt(s, 0, 64)` takes it: `0644` (octal), `0b101`, `0o17`, `0x1f`,
/// `1_000`. Returns the decimal text when serde_yaml (YAML 1.2) would read the scalar
/// differently, `None` when both agree or it is no integer.
fn yaml11_int(value: &str) -> Option<String> {
    let plain = value.replace('_', "");
    let (negative, digits) = match plain.as_bytes().first()? {
        b'-' => (true, &plain[1..]),
        b'+' => (false, &plain[1..]),
        _ => (false, plain.as_str()),
    };
    let (radix, body) = if let Some(rest) = digits.strip_prefix("0b").or(digits.strip_prefix("0B"))
    {
        (2, rest)
    } else if let Some(rest) = digits.strip_prefix("0o").or(digits.strip_prefix("0O")) {
        (8, rest)
    } else if let Some(rest) = digits.strip_prefix("0x").or(digits.strip_prefix("0X")) {
        (16, rest)
    } else if digits.len() > 1 && digits.starts_with('0') {
        // Not octal (`08`): ParseInt fails and go-yaml v2 falls back to the float 8.
        let octal = digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
        if octal {
            (8, &digits[1..])
        } else {
            (10, digits)
        }
    } else {
        (10, digits)
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(body, radix).ok()?;
    let number = if negative { -magnitude } else { magnitude };
    // Out of int64 range go-yaml v2 tries uint64, then float: leave those to serde_yaml.
    if i64::try_from(number).is_err() {
        return None;
    }
    // serde_yaml already reads these as the same number.
    let same = !value.contains('_')
        && match radix {
            10 => !digits.starts_with('0') || digits == "0",
            16 | 8 => digits.starts_with("0x") || digits.starts_with("0o"),
            _ => false,
        };
    (!same).then(|| number.to_string())
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
            adapted.contains("defaultMode: 420 # rw-r--r--\n"),
            "{adapted}"
        );
        assert!(adapted.contains("- - 493\n"), "{adapted}");
        assert!(adapted.contains("- '0644'\n"), "{adapted}");
        let value: serde_json::Value = serde_yaml::from_str(&adapted).unwrap();
        assert_eq!(value["volumes"][0]["configMap"]["defaultMode"], 420);
    }

    #[test]
    fn block_scalars_and_quoted_lines_are_left_alone() {
        let text = "data:\n  a: |\n    mode: 0644\n    x: off\n  b: \"first\n    mode: 0644\"\n  c: >-\n\n    - 0600\n  d: 0600\n";
        let (adapted, warnings) = adapt(text, 1);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(adapted, text.replace("d: 0600", "d: 384"));
    }

    #[test]
    fn yaml_1_1_booleans_are_reported_with_their_line() {
        let text = "metadata:\n  annotations:\n    prestop-injector.io/cleanup: off\n    b: 'off'\nenv:\n- value: yes\n";
        let (adapted, warnings) = adapt(text, 10);
        assert_eq!(
            adapted,
            text.replace("cleanup: off", "cleanup: false")
                .replace("value: yes", "value: true")
        );
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

    #[test]
    fn scalars_read_as_go_yaml_v2_reads_them() {
        let text = "a: yes\nb: Off\nc: Y\nd: 1_000\ne: 0b101\nf: -0755\ng: 0x1F\nh: 10\ni: 0o17\nj: yesterday\nk: 08\nl: '0644'\n";
        let (adapted, warnings) = adapt(text, 1);
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        let value: serde_json::Value = serde_yaml::from_str(&adapted).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"a": true, "b": false, "c": true, "d": 1000, "e": 5, "f": -493,
                "g": 31, "h": 10, "i": 15, "j": "yesterday", "k": 8, "l": "0644"})
        );
    }
}
