//! The patch as it travels: RFC 6902 operations as compact JSON, base64-encoded into the
//! response body.
//!
//! Written by hand rather than through serde, because this is most of the bytes a review
//! sends back: strings are copied whole unless a byte needs escaping (serde_json looks
//! each byte up in a table), and base64 turns three bytes into four with one lookup of
//! each 12-bit half. The output is byte for byte `serde_json::to_vec` of the operations
//! and the standard padded base64 alphabet; the tests below hold both to that.

use crate::json::patch::PatchOperation;
use crate::json::Value;

/// Appends `operations` as the JSON array `serde_json::to_vec` would write.
pub fn write_patch(out: &mut Vec<u8>, operations: &[PatchOperation]) {
    out.push(b'[');
    for (index, operation) in operations.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        let (op, path, value) = operation.parts();
        out.extend_from_slice(br#"{"op":""#);
        out.extend_from_slice(op.as_bytes());
        out.extend_from_slice(br#"","path":"#);
        write_str(out, path);
        if let Some(value) = value {
            out.extend_from_slice(br#","value":"#);
            write_value(out, value);
        }
        out.push(b'}');
    }
    out.push(b']');
}

/// Appends `value` as compact JSON, members in their order.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        // Rare in a patch (a grace period): serde_json's own number formatting.
        Value::Number(number) => {
            let _ = serde_json::to_writer(&mut *out, number);
        }
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            for (index, (key, member)) in members.iter().enumerate() {
                if index > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, member);
            }
            out.push(b'}');
        }
    }
}

/// Whether serde_json escapes this byte in a string: `"`, `\` and control characters.
const fn escaped(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// Whether any of the eight bytes of `word` must be escaped: below 0x20 (a byte with its
/// high bit set is not), `"` or `\\`.
fn any_escaped(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // A byte's high bit, for each byte of `word` that is zero.
    let zero = |word: u64| word.wrapping_sub(ONES) & !word & HIGHS;
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    control | zero(word ^ (ONES * u64::from(b'"'))) | zero(word ^ (ONES * u64::from(b'\\'))) != 0
}

/// The index of the first byte of `bytes` that must be escaped, eight bytes at a time.
fn first_escaped(bytes: &[u8]) -> Option<usize> {
    let mut chunks = bytes.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        if any_escaped(u64::from_le_bytes(word)) {
            break;
        }
        offset += 8;
    }
    // The last few bytes (most of a key or a short value) in one word too: the last eight
    // of the text, overlapping bytes already found clean, or for a text of four to seven
    // bytes its first and last four; looked at one by one only when one of them is.
    let rest = &bytes[offset..];
    let len = bytes.len();
    let load = |at: usize, width: usize| {
        let mut word = [0u8; 8];
        word[..width].copy_from_slice(&bytes[at..at + width]);
        u64::from_le_bytes(word)
    };
    let tail = match len {
        // A word's escape stopped the loop: found below, byte by byte.
        _ if rest.len() >= 8 => None,
        8.. => Some(load(len - 8, 8)),
        4..=7 => Some(load(0, 4) | load(len - 4, 4) << 32),
        // Three bytes or fewer: byte by byte.
        _ => None,
    };
    if tail.is_some_and(|word| !any_escaped(word)) {
        return None;
    }
    rest.iter()
        .position(|&byte| escaped(byte))
        .map(|index| offset + index)
}

/// Appends `text` as a JSON string with serde_json's escapes.
pub fn write_str(out: &mut Vec<u8>, text: &str) {
    let mut rest = text.as_bytes();
    out.reserve(rest.len() + 2);
    out.push(b'"');
    while let Some(index) = first_escaped(rest) {
        out.extend_from_slice(&rest[..index]);
        match rest[index] {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            control => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(control >> 4)]);
                out.push(HEX[usize::from(control & 0xf)]);
            }
        }
        rest = &rest[index + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Two base64 characters for every 12-bit value.
static PAIRS: [[u8; 2]; 4096] = {
    let mut pairs = [[0u8; 2]; 4096];
    let mut value = 0;
    while value < 4096 {
        pairs[value] = [ALPHABET[value >> 6], ALPHABET[value & 63]];
        value += 1;
    }
    pairs
};

/// Appends `input` in standard base64 with `=` padding.
pub fn write_base64(out: &mut Vec<u8>, input: &[u8]) {
    out.reserve(input.len().div_ceil(3) * 4);
    // Six bytes at a time: eight characters from four 12-bit halves of one word.
    let mut sixes = input.chunks_exact(6);
    for six in &mut sixes {
        let bits = u64::from_be_bytes([six[0], six[1], six[2], six[3], six[4], six[5], 0, 0]);
        let pair = |shift: u32| PAIRS[((bits >> shift) & 0xfff) as usize];
        let ([a, b], [c, d], [e, f], [g, h]) = (pair(52), pair(40), pair(28), pair(16));
        out.extend_from_slice(&[a, b, c, d, e, f, g, h]);
    }
    let mut threes = sixes.remainder().chunks_exact(3);
    for three in &mut threes {
        let bits =
            (usize::from(three[0]) << 16) | (usize::from(three[1]) << 8) | usize::from(three[2]);
        let ([a, b], [c, d]) = (PAIRS[bits >> 12], PAIRS[bits & 0xfff]);
        out.extend_from_slice(&[a, b, c, d]);
    }
    match *threes.remainder() {
        [a] => {
            let [a, b] = PAIRS[usize::from(a) << 4];
            out.extend_from_slice(&[a, b, b'=', b'=']);
        }
        [a, b] => {
            let bits = (usize::from(a) << 10) | (usize::from(b) << 2);
            let [a, b] = PAIRS[bits >> 6];
            out.extend_from_slice(&[a, b, ALPHABET[bits & 63], b'=']);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;
    use crate::json::patch::{AddOperation, Patch, RemoveOperation, ReplaceOperation};
    use base64::Engine as _;
    use proptest::prelude::*;

    fn pointer(text: &str) -> String {
        text.to_owned()
    }

    /// Every kind of operation the core emits, and values with every kind of member and
    /// escape: the bytes json_patch's own operations serialize to.
    #[test]
    fn the_same_bytes_as_serde_json() {
        let value = json!({
            "s": "quote \" backslash \\ newline \n tab \t cr \r bs \u{8} ff \u{c} nul \u{0} us \u{1f} del \u{7f} é 😀 </script>",
            "n": [0, -1, 40, 1.5, 1e300, u64::MAX, i64::MIN],
            "b": [true, false, null],
            "o": {"": {}, "a/b~c": []},
        });
        let operations = vec![
            PatchOperation::Add(AddOperation {
                path: pointer("/a~1b/0"),
                value: value.clone(),
            }),
            PatchOperation::Remove(RemoveOperation {
                path: pointer("/x\"y"),
            }),
            PatchOperation::Replace(ReplaceOperation {
                path: pointer(""),
                value: json!("r"),
            }),
        ];
        let mut ours = Vec::new();
        write_patch(&mut ours, &operations);
        let patch = Patch(operations);
        let theirs = serde_json::to_vec(&patch.to_json_patch()).unwrap();
        assert_eq!(
            String::from_utf8(ours.clone()).unwrap(),
            String::from_utf8(theirs).unwrap()
        );
        assert_eq!(
            ours,
            serde_json::to_vec(&patch).unwrap(),
            "and what serde writes of ours"
        );
        let mut empty = Vec::new();
        write_patch(&mut empty, &[]);
        assert_eq!(empty, b"[]");
    }

    /// Every length across two words and the tail, with each byte serde_json escapes at
    /// each place, and a neighbour that it does not: the word checks and the tail's
    /// overlapping word (and its two halves under eight bytes) against the byte-by-byte
    /// rule.
    #[test]
    fn each_escape_at_each_place_is_found() {
        let mut checked = 0;
        for len in 0..=17 {
            let plain = "x".repeat(len);
            assert_eq!(first_escaped(plain.as_bytes()), None, "{len}");
            for at in 0..len {
                for byte in [
                    0x00, 0x1f, b'"', b'\\', b'\n', 0x20, b'!', b'#', b'[', b']', 0x7f,
                ] {
                    let mut text = plain.clone().into_bytes();
                    text[at] = byte;
                    let expected = escaped(byte).then_some(at);
                    assert_eq!(first_escaped(&text), expected, "{len} {at} {byte:#x}");
                    let mut ours = Vec::new();
                    write_str(&mut ours, std::str::from_utf8(&text).unwrap());
                    assert_eq!(
                        ours,
                        serde_json::to_vec(std::str::from_utf8(&text).unwrap()).unwrap()
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 11 * (0..=17).sum::<usize>());
    }

    proptest! {
        /// Any text, control characters and multi-byte characters included.
        #[test]
        fn strings_escape_as_serde_json_does(text in any::<String>()) {
            let mut ours = Vec::new();
            write_str(&mut ours, &text);
            prop_assert_eq!(ours, serde_json::to_vec(&text).unwrap());
        }

        /// Every length (all three remainders) and every byte value.
        #[test]
        fn base64_as_the_base64_crate(input in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut ours = b"kept".to_vec();
            write_base64(&mut ours, &input);
            let expected = base64::engine::general_purpose::STANDARD.encode(&input);
            prop_assert_eq!(&ours[..4], b"kept");
            prop_assert_eq!(std::str::from_utf8(&ours[4..]).unwrap(), expected);
        }
    }
}
