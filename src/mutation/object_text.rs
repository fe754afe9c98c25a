//! The injector's own annotations that hold a JSON object (the status and the settings
//! record), written straight into their text.
//!
//! Both are written on every patched review. A map built only to be printed allocates
//! every member and is then walked again to print it (about 10 k instructions of a seed
//! review for two strings of a hundred bytes, with serde_json's map). The bytes are the
//! ones `Value::to_string` gives for the same members in the same order (the tests below
//! hold that), so readers of either annotation see no change.

/// A JSON object written member by member. Keys are the injector's own constants, written
/// as they are; values go through `serde_json`'s own string escaping.
pub struct ObjectText {
    text: Vec<u8>,
}

impl ObjectText {
    pub fn new() -> Self {
        let mut text = Vec::with_capacity(160);
        text.push(b'{');
        ObjectText { text }
    }

    fn key(&mut self, key: &str) {
        debug_assert!(
            !key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20),
            "keys are constants that need no escaping: {key:?}"
        );
        if self.text.len() > 1 {
            self.text.push(b',');
        }
        self.text.push(b'"');
        self.text.extend_from_slice(key.as_bytes());
        self.text.extend_from_slice(b"\":");
    }

    fn write_str(&mut self, value: &str) {
        serde_json::to_writer(&mut self.text, value).expect("writing into a Vec cannot fail");
    }

    pub fn string(&mut self, key: &str, value: &str) -> &mut Self {
        self.key(key);
        self.write_str(value);
        self
    }

    pub fn number(&mut self, key: &str, value: u64) -> &mut Self {
        self.key(key);
        self.text
            .extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
        self
    }

    pub fn strings(&mut self, key: &str, values: &[String]) -> &mut Self {
        self.key(key);
        self.text.push(b'[');
        for (index, value) in values.iter().enumerate() {
            if index > 0 {
                self.text.push(b',');
            }
            self.write_str(value);
        }
        self.text.push(b']');
        self
    }

    pub fn finish(&mut self) -> String {
        self.text.push(b'}');
        String::from_utf8(std::mem::take(&mut self.text))
            .expect("constant keys and serde_json's strings are UTF-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    /// Byte for byte what `serde_json` prints for the same object, whatever the values
    /// hold: quotes, backslashes, control characters, non-ASCII, empty lists.
    #[test]
    fn writes_what_serde_json_prints() {
        let odd = [
            "",
            "plain",
            "q\"uote",
            "back\\slash",
            "tab\t\u{1}\u{7f}",
            "é \u{E000} 😀",
        ];
        for value in odd {
            for list in [
                vec![],
                vec![value.to_owned()],
                vec![value.to_owned(), "b".into()],
            ] {
                let written = ObjectText::new()
                    .number("version", 1)
                    .string("cleanup", value)
                    .strings("containers", &list)
                    .number("grace", u64::MAX)
                    .finish();
                let printed =
                    json!({"version": 1, "cleanup": value, "containers": list, "grace": u64::MAX})
                        .to_string();
                assert_eq!(written, printed);
            }
        }
        assert_eq!(ObjectText::new().finish(), "{}");
    }
}
