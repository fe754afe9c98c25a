//! The report of `prestop-clean empty` on its stdout, read back by the node reaper: a
//! small, strict, versioned line format, encoder and parser side by side so that they
//! cannot drift.
//!
//! ```text
//! prestop-clean report 1
//! progress 4096 1048576                 (any number, while the walk runs)
//! target /host/mnt/scratch/job
//! outcome incomplete                    (emptied | missing | incomplete | skipped WHY)
//! removed 1234
//! bytes 5872026
//! left 2
//! unnamed 0
//! passes 1
//! elapsed_ns 410000000
//! survivor permission_denied /host/mnt/scratch/job/other-tenant
//! end
//! ```
//!
//! Every path and the `skipped` reason are written with [`escape`] (which doubles `\`
//! and escapes control characters and invalid UTF-8), so a hostile file name stays on
//! its line and comes back byte for byte ([`unescape`]). The parser accepts exactly
//! what [`encode`] writes, in that order: anything else is an error, never a guess.
//! `progress` lines come first so that a walk killed halfway still says how far it got
//! ([`last_progress`]).

use std::time::Duration;

use crate::report::{escape, Outcome, Reason, Report, Survivor, MAX_NAMED};

/// The first line, with the format's version.
pub const HEADER: &str = "prestop-clean report 1";
/// The last line: a report without it was cut short.
pub const END: &str = "end";

/// A `progress` line: entries removed and bytes freed so far.
pub fn progress_line(removed: u64, bytes: u64) -> String {
    format!("progress {removed} {bytes}\n")
}

/// The whole report, after the header.
pub fn encode(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!("target {}\n", escape(report.target.as_bytes())));
    match &report.outcome {
        Outcome::Emptied => out.push_str("outcome emptied\n"),
        Outcome::Missing => out.push_str("outcome missing\n"),
        Outcome::Incomplete => out.push_str("outcome incomplete\n"),
        Outcome::Skipped(why) => {
            out.push_str(&format!("outcome skipped {}\n", escape(why.as_bytes())))
        }
    }
    for (key, value) in [
        ("removed", report.removed),
        ("bytes", report.bytes),
        ("left", report.left),
        ("unnamed", report.unnamed),
        ("passes", u64::from(report.passes)),
        (
            "elapsed_ns",
            u64::try_from(report.elapsed.as_nanos()).unwrap_or(u64::MAX),
        ),
    ] {
        out.push_str(&format!("{key} {value}\n"));
    }
    for survivor in &report.survivors {
        out.push_str(&format!(
            "survivor {} {}\n",
            reason_word(survivor.reason),
            escape(&survivor.path)
        ));
    }
    out.push_str(END);
    out.push('\n');
    out
}

/// The report in `text` (a whole stdout: header, progress lines, report, end).
pub fn decode(text: &str) -> Result<Report, String> {
    let mut lines = text.split('\n');
    if lines.next() != Some(HEADER) {
        return Err(format!("the report does not start with {HEADER:?}"));
    }
    let mut line = lines.next();
    while let Some(progress) = line.and_then(|l| l.strip_prefix("progress ")) {
        parse_progress(progress)?;
        line = lines.next();
    }
    let mut next = |key: &str| -> Result<&str, String> {
        let current = line.take().or_else(|| lines.next());
        current
            .and_then(|l| l.strip_prefix(key))
            .and_then(|l| l.strip_prefix(' '))
            .ok_or_else(|| format!("expected {key:?}, got {current:?}"))
    };
    let target = String::from_utf8(unescape(next("target")?)?)
        .map_err(|_| "the target is not UTF-8".to_owned())?;
    let outcome = match next("outcome")? {
        "emptied" => Outcome::Emptied,
        "missing" => Outcome::Missing,
        "incomplete" => Outcome::Incomplete,
        other => match other.strip_prefix("skipped ") {
            Some(why) => Outcome::Skipped(
                String::from_utf8(unescape(why)?).map_err(|_| "a reason is not UTF-8")?,
            ),
            None => return Err(format!("unknown outcome {other:?}")),
        },
    };
    let mut number = |key: &str| -> Result<u64, String> {
        let text = next(key)?;
        digits(text).ok_or_else(|| format!("{key} {text:?} is not a number"))
    };
    let (removed, bytes, left, unnamed) = (
        number("removed")?,
        number("bytes")?,
        number("left")?,
        number("unnamed")?,
    );
    let passes = u32::try_from(number("passes")?).map_err(|_| "passes out of range")?;
    let elapsed = Duration::from_nanos(number("elapsed_ns")?);
    let mut survivors = Vec::new();
    loop {
        let current = lines.next();
        match current {
            Some(END) => break,
            Some(l) if l.starts_with("survivor ") => {
                if survivors.len() == MAX_NAMED {
                    return Err(format!("more than {MAX_NAMED} survivors"));
                }
                let (word, path) = l["survivor ".len()..]
                    .split_once(' ')
                    .ok_or_else(|| format!("a survivor without a path: {l:?}"))?;
                survivors.push(Survivor {
                    path: unescape(path)?,
                    reason: parse_reason(word)?,
                });
            }
            other => return Err(format!("expected a survivor or {END:?}, got {other:?}")),
        }
    }
    match (lines.next(), lines.next()) {
        (Some(""), None) => {}
        _ => return Err(format!("text after {END:?}")),
    }
    Ok(Report {
        target,
        outcome,
        removed,
        bytes,
        left,
        survivors,
        unnamed,
        passes,
        elapsed,
        // The reaper's walk checks no identity of its own: it asks no agent.
        without_agent: false,
    })
}

/// The last `progress` line of a report that may have been cut short (a walk killed
/// halfway): entries removed and bytes freed so far, `(0, 0)` when none was written.
pub fn last_progress(text: &str) -> (u64, u64) {
    text.lines()
        .take_while(|line| *line == HEADER || line.starts_with("progress "))
        .filter_map(|line| parse_progress(line.strip_prefix("progress ")?).ok())
        .last()
        .unwrap_or((0, 0))
}

fn parse_progress(text: &str) -> Result<(u64, u64), String> {
    text.split_once(' ')
        .and_then(|(removed, bytes)| Some((digits(removed)?, digits(bytes)?)))
        .ok_or_else(|| format!("a bad progress line: {text:?}"))
}

/// Plain ASCII digits, as `format!` writes a `u64`.
fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

fn reason_word(reason: Reason) -> String {
    match reason {
        Reason::MountPoint => "mount_point".to_owned(),
        Reason::OtherMount => "other_mount".to_owned(),
        Reason::OtherDevice => "other_device".to_owned(),
        Reason::PermissionDenied => "permission_denied".to_owned(),
        Reason::NotPermitted => "not_permitted".to_owned(),
        Reason::ReadOnly => "read_only".to_owned(),
        Reason::Changing => "changing".to_owned(),
        Reason::TooDeep => "too_deep".to_owned(),
        Reason::Error(errno) => format!("errno:{errno}"),
    }
}

fn parse_reason(word: &str) -> Result<Reason, String> {
    Ok(match word {
        "mount_point" => Reason::MountPoint,
        "other_mount" => Reason::OtherMount,
        "other_device" => Reason::OtherDevice,
        "permission_denied" => Reason::PermissionDenied,
        "not_permitted" => Reason::NotPermitted,
        "read_only" => Reason::ReadOnly,
        "changing" => Reason::Changing,
        "too_deep" => Reason::TooDeep,
        other => match other.strip_prefix("errno:").and_then(digits) {
            Some(errno) => Reason::Error(i32::try_from(errno).map_err(|_| "errno out of range")?),
            None => return Err(format!("unknown survivor reason {other:?}")),
        },
    })
}

/// The bytes [`escape`] was given: `\\`, `\n`, `\r`, `\t`, `\u{…}` and `\xHH` decoded,
/// every other character as it is; a `\` that escape never writes is an error.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("a bad escape in {text:?}");
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let decoded = match chars.next().ok_or_else(bad)? {
            '\\' => '\\',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            '0' => '\0',
            'x' => {
                let hex: String = chars.by_ref().take(2).collect();
                let byte = u8::from_str_radix(&hex, 16).map_err(|_| bad())?;
                if hex.len() != 2 || byte < 0x80 {
                    return Err(bad());
                }
                out.push(byte);
                continue;
            }
            'u' => {
                if chars.next() != Some('{') {
                    return Err(bad());
                }
                let hex: String = chars.by_ref().take_while(|c| *c != '}').collect();
                u32::from_str_radix(&hex, 16)
                    .ok()
                    .and_then(char::from_u32)
                    .filter(|c| c.is_control())
                    .ok_or_else(bad)?
            }
            _ => return Err(bad()),
        };
        let mut buf = [0; 4];
        out.extend_from_slice(decoded.encode_utf8(&mut buf).as_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
