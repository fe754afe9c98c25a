//! Durations as users write them in annotations: `70`, `70s`, `2m`, `1m30s`, `1h`.

/// The forms a duration annotation accepts, for denial messages.
pub const ACCEPTED_FORMS: &str = "a whole number of seconds such as 70, 70s, 2m, 1m30s or 1h";

/// Parses a duration into whole seconds.
///
/// A bare number is seconds; otherwise a sequence of `<number><unit>` with the units
/// `h`, `m`, `s` each at most once and in that order. Anything else is `None`.
pub fn parse_seconds(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    let mut last_unit = 0usize; // index into UNITS + 1 of the last unit seen, keeps h > m > s order
    const UNITS: [(u8, u64); 3] = [(b'h', 3600), (b'm', 60), (b's', 1)];
    for b in text.bytes() {
        if b.is_ascii_digit() {
            let digit = u64::from(b - b'0');
            number = Some(number.unwrap_or(0).checked_mul(10)?.checked_add(digit)?);
            continue;
        }
        let position = UNITS.iter().position(|(unit, _)| *unit == b)?;
        if position < last_unit {
            return None;
        }
        last_unit = position + 1;
        total = total.checked_add(number.take()?.checked_mul(UNITS[position].1)?)?;
    }
    if number.is_some() {
        return None; // trailing digits without a unit after a unit: "1m30"
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::parse_seconds;

    #[test]
    fn accepts_the_documented_forms() {
        for (text, seconds) in [
            ("70", 70),
            ("70s", 70),
            ("2m", 120),
            ("1m30s", 90),
            ("1h", 3600),
            ("1h2m3s", 3723),
            ("0", 0),
            (" 45s ", 45),
        ] {
            assert_eq!(parse_seconds(text), Some(seconds), "{text}");
        }
    }

    #[test]
    fn rejects_everything_else() {
        for text in [
            "",
            "s",
            "-1",
            "1.5s",
            "1m30",
            "30s1m",
            "1s1s",
            "1d",
            "abc",
            "1 m",
            "99999999999999999999",
        ] {
            assert_eq!(parse_seconds(text), None, "{text:?}");
        }
    }
}
