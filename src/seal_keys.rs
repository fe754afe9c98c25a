//! The keys of the seal (docs/REAPER.md#the-seal): HMAC-SHA256 keys that only the webhook
//! and the reaper hold, read from one file (`--seal-key-file`), one key a line.
//!
//! - A line of hex digits only (`openssl rand -hex 32`) is hex; any other line is base64
//!   (`openssl rand -base64 32`, Helm's `randBytes 32`). Empty lines and lines starting
//!   with `#` are skipped. Each key holds at least [`MIN_KEY_BYTES`] bytes.
//! - The webhook seals with the first key; the reaper accepts a seal made with any of
//!   them. Rotation: add the new key as a second line, restart both, move it first,
//!   restart the webhook, and drop the old line once the pods sealed with it are gone.
//! - No key text is ever printed: errors name the file and the line number, `Debug` the
//!   number of keys.

use base64::Engine as _;
use ring::hmac;
use std::fmt;
use std::path::Path;

/// The shortest key accepted: the HMAC-SHA256 output size (RFC 2104 section 3).
pub const MIN_KEY_BYTES: usize = 32;

/// The keys of one file, in order; empty when no file was given.
#[derive(Clone, Default)]
pub struct SealKeys {
    keys: Vec<hmac::Key>,
}

impl fmt::Debug for SealKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealKeys({} keys)", self.keys.len())
    }
}

impl SealKeys {
    /// The keys of a key file's text; the error names the line (never its content).
    pub fn parse(text: &str) -> Result<SealKeys, String> {
        let mut keys = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let number = index + 1;
            let bytes =
                decode(line).ok_or_else(|| format!("line {number} is neither hex nor base64"))?;
            if bytes.len() < MIN_KEY_BYTES {
                return Err(format!(
                    "line {number} holds {} bytes; a seal key needs at least {MIN_KEY_BYTES}",
                    bytes.len()
                ));
            }
            keys.push(hmac::Key::new(hmac::HMAC_SHA256, &bytes));
        }
        if keys.is_empty() {
            return Err("it holds no key".to_owned());
        }
        Ok(SealKeys { keys })
    }

    /// The keys of the file at `path`.
    pub fn load(path: &Path) -> anyhow::Result<SealKeys> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading the seal key file {}: {e}", path.display()))?;
        SealKeys::parse(&text)
            .map_err(|why| anyhow::anyhow!("the seal key file {}: {why}", path.display()))
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The tag of `message` under the first key; `None` without a key.
    pub fn sign(&self, message: &[u8]) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        Some(hmac::sign(key, message).as_ref().to_vec())
    }

    /// Whether `tag` is the tag of `message` under one of the keys (each comparison in
    /// constant time).
    pub fn verify(&self, message: &[u8], tag: &[u8]) -> bool {
        self.keys
            .iter()
            .any(|key| hmac::verify(key, message, tag).is_ok())
    }
}

fn decode(line: &str) -> Option<Vec<u8>> {
    if line.len() % 2 == 0 && line.bytes().all(|b| b.is_ascii_hexdigit()) {
        return (0..line.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&line[i..i + 2], 16).ok())
            .collect();
    }
    let engine = base64::engine::general_purpose::STANDARD;
    engine
        .decode(line)
        .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(line))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    // The same 32 bytes in base64.
    const BASE64: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

    #[test]
    fn hex_and_base64_lines_are_the_same_key() {
        let hex = SealKeys::parse(HEX).unwrap();
        let base64 = SealKeys::parse(&format!("# rotated 2026-12\n\n{BASE64}\n")).unwrap();
        let tag = hex.sign(b"m").unwrap();
        assert!(base64.verify(b"m", &tag));
        assert!(!base64.verify(b"n", &tag));
        assert_eq!(format!("{hex:?}"), "SealKeys(1 keys)");
    }

    #[test]
    fn short_empty_and_unreadable_files_are_refused_by_line() {
        for (text, problem) in [
            ("", "holds no key"),
            ("# only a comment\n", "holds no key"),
            ("00ff\n", "line 1 holds 2 bytes"),
            (
                &format!("{HEX}\nnot base64!\n"),
                "line 2 is neither hex nor base64",
            ),
        ] {
            let error = SealKeys::parse(text).expect_err(text);
            assert!(error.contains(problem), "{text:?}: {error}");
            assert!(!error.contains(HEX), "the key is never printed: {error}");
        }
    }

    #[test]
    fn the_first_key_seals_and_any_key_verifies() {
        let old = "11".repeat(32);
        let new = "22".repeat(32);
        let webhook = SealKeys::parse(&format!("{new}\n{old}\n")).unwrap();
        let before_rotation = SealKeys::parse(&old).unwrap();
        let tag = webhook.sign(b"m").unwrap();
        assert!(webhook.verify(b"m", &tag));
        assert!(
            !before_rotation.verify(b"m", &tag),
            "sealed with the first key"
        );
        assert!(webhook.verify(b"m", &before_rotation.sign(b"m").unwrap()));
        assert_eq!(SealKeys::default().sign(b"m"), None);
        assert!(!SealKeys::default().verify(b"m", &tag));
    }
}
