//! A YAML emitter for JSON values whose output means the same to kubectl as to us.
//!
//! Why not `serde_yaml::to_string`: it writes YAML 1.2, so the strings `off`, `on`, `yes`,
//! `no`, `y` and `n` come out unquoted, and kubectl (YAML 1.1) reads them back as booleans:
//! `prestop-injector.io/cleanup: off` or an env value `"on"` would then be rejected by the
//! API server. Here a string is written plain only when no YAML 1.1 or 1.2 reader can take
//! it for anything but a string; otherwise it is quoted. Multi-line strings (scripts) are
//! literal blocks so they stay readable. Layout follows kubectl: two-space indentation and
//! sequences at the same indentation as their key.

use serde_json::{Map, Value};

/// One YAML document (without the `---` separator), ending in a newline.
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => emit_map(&mut out, map, 0, false),
        Value::Array(items) if !items.is_empty() => emit_seq(&mut out, items, 0, false),
        scalar => {
            out.push_str(&scalar_text(scalar, 2));
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, width: usize) {
    out.extend(std::iter::repeat_n(' ', width));
}

/// `inline_first`: the caller already wrote `- ` and the first entry continues that line.
fn emit_map(out: &mut String, map: &Map<String, Value>, width: usize, inline_first: bool) {
    for (position, (key, value)) in map.iter().enumerate() {
        if position > 0 || !inline_first {
            indent(out, width);
        }
        out.push_str(&key_text(key));
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                emit_map(out, inner, width + 2, false);
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                emit_seq(out, items, width, false);
            }
            scalar => {
                out.push(' ');
                out.push_str(&scalar_text(scalar, width + 2));
                out.push('\n');
            }
        }
    }
}

fn emit_seq(out: &mut String, items: &[Value], width: usize, inline_first: bool) {
    for (position, item) in items.iter().enumerate() {
        if position > 0 || !inline_first {
            indent(out, width);
        }
        out.push_str("- ");
        match item {
            Value::Object(inner) if !inner.is_empty() => emit_map(out, inner, width + 2, true),
            Value::Array(inner) if !inner.is_empty() => emit_seq(out, inner, width + 2, true),
            scalar => {
                out.push_str(&scalar_text(scalar, width + 2));
                out.push('\n');
            }
        }
    }
}

/// A scalar (or empty collection); block scalar lines are indented by `content_width`.
fn scalar_text(value: &Value, content_width: usize) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => string_text(text, content_width),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

fn key_text(key: &str) -> String {
    if is_plain_safe(key) {
        key.to_owned()
    } else if is_single_quotable(key) {
        single_quoted(key)
    } else {
        double_quoted(key)
    }
}

fn string_text(text: &str, content_width: usize) -> String {
    if is_plain_safe(text) {
        text.to_owned()
    } else if text.contains('\n') && is_literal_block_safe(text) {
        literal_block(text, content_width)
    } else if is_single_quotable(text) {
        single_quoted(text)
    } else {
        double_quoted(text)
    }
}

/// Words YAML 1.1 (kubectl) or 1.2 read as booleans or null, compared case-insensitively.
const RESERVED: &[&str] = &[
    "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", "=", "<<",
];

fn is_plain_safe(text: &str) -> bool {
    let Some(first) = text.chars().next() else {
        return false;
    };
    // Anything that starts like a number, a date or an indicator is quoted: cheap and safe.
    // Flags like `-c` are common in commands and unambiguous: `-` then a letter.
    let flag = first == '-' && text[1..].starts_with(|c: char| c.is_ascii_alphabetic());
    if !flag && (first.is_ascii_digit() || "-+.?:,[]{}#&*!|>'\"%@`".contains(first)) {
        return false;
    }
    if text.ends_with(':') || text.contains(": ") || text.contains(" #") {
        return false;
    }
    if text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace) {
        return false;
    }
    if text.chars().any(|c| c == '\t' || needs_escape(c)) {
        return false;
    }
    !RESERVED.iter().any(|word| word.eq_ignore_ascii_case(text))
}

/// Characters a YAML reader may treat as line breaks or drop: only safe as `\` escapes.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
}

fn is_single_quotable(text: &str) -> bool {
    !text.chars().any(needs_escape)
}

fn single_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A literal block keeps every character when: no other control characters, and the
/// first non-empty line does not start with whitespace (it would set the indentation).
fn is_literal_block_safe(text: &str) -> bool {
    if text.trim_matches('\n').is_empty() {
        return false;
    }
    if text
        .chars()
        .any(|c| c != '\n' && c != '\t' && needs_escape(c))
    {
        return false;
    }
    text.split('\n')
        .find(|line| !line.is_empty())
        .is_some_and(|line| !line.starts_with([' ', '\t']))
}

fn literal_block(text: &str, content_width: usize) -> String {
    let trailing = text.len() - text.trim_end_matches('\n').len();
    let chomping = match trailing {
        0 => "-",
        1 => "",
        _ => "+",
    };
    let mut out = format!("|{chomping}");
    let mut lines: Vec<&str> = text.split('\n').collect();
    if trailing > 0 {
        lines.pop();
    }
    for line in lines {
        out.push('\n');
        if !line.is_empty() {
            indent(&mut out, content_width);
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(value: &Value) -> String {
        let text = to_yaml(value);
        let back: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(&back, value, "YAML was:\n{text}");
        text
    }

    #[test]
    fn yaml_1_1_booleans_and_numbers_stay_strings() {
        let value = json!({
            "a": "off", "b": "On", "c": "y", "d": "NO", "e": "0644", "f": "1_000",
            "g": "12:30", "h": "", "i": "~", "j": "10s", "k": ".inf", "l": "-x", "m": "-1", "o": "-.5", "on": 1,
        });
        let text = round_trip(&value);
        assert!(text.contains("a: 'off'\n"), "{text}");
        assert!(text.contains("'on': 1\n"), "{text}");
        assert!(text.contains("j: '10s'\n"), "{text}");
        assert!(text.contains("l: -x\nm: '-1'\no: '-.5'\n"), "{text}");
    }

    #[test]
    fn scripts_are_literal_blocks() {
        let value = json!({"command": ["bash", "-c", "set -x\necho 'hi' # x\nsleep 1\n"],
            "b": "no newline\nat end", "c": "two\n\n", "d": "  indented\nfirst"});
        let text = round_trip(&value);
        assert!(
            text.contains("- |\n  set -x\n  echo 'hi' # x\n  sleep 1\n"),
            "{text}"
        );
        assert!(text.contains("b: |-\n  no newline\n  at end\n"), "{text}");
    }

    #[test]
    fn odd_strings_survive() {
        let value = json!({
            "quote": "it's", "colon": "a: b", "hash": "a #b", "tab": "a\tb", "cr": "a\r\nb",
            "ls": "a\u{2028}b", "ctl": "\u{7}", "unicode": "héllo", "key with: colon": true,
            "nested": [[1, 2], [], {}, {"x": null}, [{"y": [3]}]], "float": 1.5,
        });
        round_trip(&value);
    }

    #[test]
    fn key_order_is_kept() {
        let text = round_trip(&json!({"z": 1, "a": {"x": 2, "b": 3}}));
        assert_eq!(text, "z: 1\na:\n  x: 2\n  b: 3\n");
    }

    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let text = "[ a-z0-9\\n\\t'\"#:|>\\-~.é\u{2028}\r]{0,8}";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            text.prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((text, inner), 0..4)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn every_value_reads_back_unchanged(value in any_value()) {
            round_trip(&value);
        }
    }
}
