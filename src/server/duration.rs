//! Durations for flags and for the API server's `?timeout=` query: Go's `time.Duration`
//! text (`10s`, `1m30s`, `500ms`, `1.5s`) because that is what the API server sends, plus a
//! bare number meaning seconds, as the annotations accept.

use std::time::Duration;

/// Parses `10s`, `5m`, `1h2m3s`, `250ms`, `1.5s`, `30` (seconds). `None` for anything else.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok().map(Duration::from_secs);
    }
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let nanos_per_unit = match &rest[..unit_end] {
            "ns" => 1e0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * nanos_per_unit;
    }
    // Beyond a year is surely a typo; also keeps the float conversion exact enough.
    if !total.is_finite() || total > 365.0 * 86400e9 {
        return None;
    }
    Some(Duration::from_nanos(total as u64))
}

/// clap value parser for duration flags.
pub fn parse_flag(text: &str) -> Result<Duration, String> {
    parse_duration(text).ok_or_else(|| {
        format!("{text:?} is not a duration; use forms like 30s, 5m, 1m30s, 200ms or 10 (seconds)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_go_durations_and_bare_seconds() {
        for (text, ms) in [
            ("10s", 10_000),
            ("5m", 300_000),
            ("1m30s", 90_000),
            ("1h", 3_600_000),
            ("250ms", 250),
            ("1.5s", 1_500),
            ("30", 30_000),
            ("0s", 0),
            ("1m0s", 60_000),
        ] {
            assert_eq!(
                parse_duration(text),
                Some(Duration::from_millis(ms)),
                "{text}"
            );
        }
        assert_eq!(parse_duration("500us"), Some(Duration::from_micros(500)));
    }

    #[test]
    fn rejects_garbage() {
        for text in [
            "", "s", "-1s", "1d", "abc", "1 s", "1..5s", "10x", "9999999h",
        ] {
            assert_eq!(parse_duration(text), None, "{text:?}");
        }
    }
}
