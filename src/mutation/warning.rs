//! Warnings as the user reads them: at most [`MAX_WARNING_CHARS`] characters each, and when
//! that is too few the names and paths a warning cites are shortened, never its reason.
//!
//! Why this limit: the API server truncates a webhook's warning past 256 characters. The
//! Kubernetes documentation's 120 is a preference (kubectl prints each warning on one
//! line), and holding to it cut what matters: a 13-character path (`/tes…ckage not
//! cleaned`) or a reason's end (`…set securityCon…`, issue 31). So nothing is cut while
//! the whole sentence fits in 256 (docs/DESIGN.md#responses). Cutting the end, as earlier
//! releases did, dropped the part that matters (`…inside the protected host directory
//! /va…`, issue 26).
//!
//! Contract:
//! - A warning's author wraps every name or path it cites in [`cited`]; the rest of the
//!   text is the reason.
//! - [`fit`] removes the marks. When the warning is too long it cuts the longest
//!   citations first (one cap for all: a short path such as `/data` stays whole while a
//!   long one is cut), keeping their start and end with `…` in the middle
//!   (`/mnt/scr…/job-7/out`), down to [`MIN_CITATION`] characters each. Only when even
//!   that is not enough (a reason near the limit, or dozens of citations) is the end cut,
//!   and then the citations keep up to [`CITATION_WHEN_CUT`] characters, so that a
//!   container's name survives the cut.
//! - A list the warning names (the allowed prefixes) is wrapped in [`cited_list`]; it is
//!   shortened before any citation, by whole items from its end (`/a, /b, … 12 more`),
//!   down to one: a user reads the container's name and the path first, the list last
//!   (issue 40).
//! - The marks are private-use characters; any in a cited value (which is untrusted) are
//!   replaced first, so a value can neither end its own citation nor start another.

/// Starts a citation inside a warning under construction.
const OPEN: char = '\u{E000}';
/// Ends a citation.
const CLOSE: char = '\u{E001}';

/// Starts a list inside a warning under construction ([`cited_list`]).
const LIST_OPEN: char = '\u{E010}';
/// Separates two items of a list; rendered `, `.
const LIST_ITEM: char = '\u{E011}';
/// Ends a list.
const LIST_CLOSE: char = '\u{E012}';
/// Every mark; each is three bytes in UTF-8, starting with [`MARK_LEAD`].
const MARKS: [char; 5] = [OPEN, CLOSE, LIST_OPEN, LIST_ITEM, LIST_CLOSE];

/// Warnings longer than this are shortened: the API server truncates past it.
pub const MAX_WARNING_CHARS: usize = 256;

/// A cited name or path is never cut below this many characters: one at each end around
/// `…`. A reason of 100 characters still leaves room for three citations of six or more.
pub const MIN_CITATION: usize = 3;

/// The citations' length when even [`MIN_CITATION`] does not make a warning fit and its
/// end is cut: a container's name stays whole, a long path keeps its start and leaf.
pub const CITATION_WHEN_CUT: usize = 16;

/// The first byte of both marks in UTF-8 (`EE 80 80`, `EE 80 81`): a text without it holds
/// no mark, which one `memchr` tells.
const MARK_LEAD: u8 = 0xEE;

/// `value` (a name or path the warning cites) marked so that [`fit`] may shorten it.
/// One allocation: a `format_args!` value is written straight in, and a value holding no
/// mark (every real one) is not copied again.
pub(crate) fn cited(value: impl std::fmt::Display) -> String {
    use std::fmt::Write;
    // Room for the marks and most names and paths: one allocation, no growth.
    let mut text = String::with_capacity(64);
    text.push(OPEN);
    let _ = write!(text, "{value}");
    if text.as_bytes()[OPEN.len_utf8()..].contains(&MARK_LEAD)
        && text[OPEN.len_utf8()..].contains(MARKS)
    {
        text = format!(
            "{OPEN}{}",
            text[OPEN.len_utf8()..].replace(MARKS, "\u{FFFD}")
        );
    }
    text.push(CLOSE);
    text
}

/// `items` (names or paths, untrusted) as a list that [`fit`] shortens first, by whole
/// items from its end; rendered `a, b, c`.
pub(crate) fn cited_list(items: &[impl std::fmt::Display]) -> String {
    let mut text = String::with_capacity(16 * items.len() + 8);
    text.push(LIST_OPEN);
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            text.push(LIST_ITEM);
        }
        let item = item.to_string();
        match item.contains(MARKS) {
            true => text.push_str(&item.replace(MARKS, "\u{FFFD}")),
            false => text.push_str(&item),
        }
    }
    text.push(LIST_CLOSE);
    text
}

/// `warning` without its marks: one pass over its bytes, eight at a time, for the lead
/// byte both marks start with (removing both marks with `str::replace` goes char by char).
fn without_marks(warning: &str) -> String {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let bytes = warning.as_bytes();
    let mut text = String::with_capacity(warning.len());
    // `bytes[kept..]` is not yet copied; no lead byte is before `at`.
    let (mut kept, mut at) = (0, 0);
    while at < bytes.len() {
        if let Some(chunk) = bytes.get(at..at + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let word = u64::from_le_bytes(word) ^ (ONES * u64::from(MARK_LEAD));
            // A byte's high bit for each byte equal to the lead byte.
            if word.wrapping_sub(ONES) & !word & HIGHS == 0 {
                at += 8;
                continue;
            }
        }
        if bytes[at] == MARK_LEAD {
            if let Some(mark) = warning[at..].chars().next().filter(|c| MARKS.contains(c)) {
                text.push_str(&warning[kept..at]);
                if mark == LIST_ITEM {
                    text.push_str(", ");
                }
                kept = at + mark.len_utf8();
                at = kept;
                continue;
            }
        }
        at += 1;
    }
    text.push_str(&warning[kept..]);
    text
}

/// One piece of a warning.
enum Piece {
    /// Reason text: never shortened but as a last resort.
    Plain(Vec<char>),
    /// A cited name or path.
    Cited(Vec<char>),
    /// A list, of which the first `kept` items are shown.
    List { items: Vec<Vec<char>>, kept: usize },
}

impl Piece {
    /// Its characters as shown, each citation capped at `cap`.
    fn shown(&self, cap: usize) -> Vec<char> {
        match self {
            Piece::Plain(text) => text.clone(),
            Piece::Cited(text) => cut_middle(text, cap),
            Piece::List { items, kept } => {
                let mut shown: Vec<char> = Vec::new();
                for (index, item) in items.iter().take(*kept).enumerate() {
                    if index > 0 {
                        shown.extend([',', ' ']);
                    }
                    shown.extend_from_slice(item);
                }
                if *kept < items.len() {
                    shown.extend(format!(", … {} more", items.len() - kept).chars());
                }
                shown
            }
        }
    }

    /// How many characters it shows, each citation capped at `cap`.
    fn length(&self, cap: usize) -> usize {
        match self {
            Piece::Plain(text) => text.len(),
            Piece::Cited(text) => text.len().min(cap),
            Piece::List { .. } => self.shown(cap).len(),
        }
    }
}

fn pieces(warning: &str) -> Vec<Piece> {
    let mut pieces = vec![Piece::Plain(Vec::new())];
    for c in warning.chars() {
        match (c, pieces.last_mut()) {
            (OPEN, _) => pieces.push(Piece::Cited(Vec::new())),
            (LIST_OPEN, _) => pieces.push(Piece::List {
                items: vec![Vec::new()],
                kept: usize::MAX,
            }),
            (CLOSE | LIST_CLOSE, _) => pieces.push(Piece::Plain(Vec::new())),
            (LIST_ITEM, Some(Piece::List { items, .. })) => items.push(Vec::new()),
            (LIST_ITEM, _) => {}
            (c, Some(Piece::Plain(text) | Piece::Cited(text))) => text.push(c),
            (c, Some(Piece::List { items, .. })) => {
                items.last_mut().into_iter().for_each(|item| item.push(c))
            }
            (_, None) => {}
        }
    }
    for piece in &mut pieces {
        if let Piece::List { items, kept } = piece {
            *kept = items.len();
        }
    }
    pieces
}

/// The characters `warning` shows without its marks (a list's separator is two).
fn shown_length(warning: &str) -> usize {
    warning
        .chars()
        .map(|c| match c {
            LIST_ITEM => 2,
            c if MARKS.contains(&c) => 0,
            _ => 1,
        })
        .sum()
}

/// `warning` without its marks, in at most `max` characters (see the module contract).
pub(crate) fn fit(warning: &str, max: usize) -> String {
    // Most warnings fit, and most of those have no more bytes than `max`: at least as
    // many bytes as characters shown, marks included (each is three bytes, and shows at
    // most two), so they fit without counting any.
    if warning.len() <= max || shown_length(warning) <= max {
        return without_marks(warning);
    }
    let mut pieces = pieces(warning);
    let length = |pieces: &[Piece], cap: usize| -> usize {
        pieces.iter().map(|piece| piece.length(cap)).sum()
    };
    // Lists first, by whole items from the end of the longest, down to one item each.
    while length(&pieces, usize::MAX) > max {
        let longest = pieces
            .iter_mut()
            .filter(|piece| matches!(piece, Piece::List { kept, .. } if *kept > 1))
            .max_by_key(|piece| piece.length(usize::MAX));
        match longest {
            Some(Piece::List { kept, .. }) => *kept -= 1,
            _ => break,
        }
    }
    let longest = pieces
        .iter()
        .filter_map(|piece| match piece {
            Piece::Cited(text) => Some(text.len()),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    // The largest cap on every citation that fits; at least the floor.
    let cap = (MIN_CITATION..=longest.max(MIN_CITATION))
        .rev()
        .find(|&cap| length(&pieces, cap) <= max)
        // Nothing fits (the reason alone is near the limit): the end is cut anyway, so
        // shortening a name to `…` would only lose it too. Keep each recognisable.
        .unwrap_or(CITATION_WHEN_CUT);
    let joined: String = pieces.iter().flat_map(|piece| piece.shown(cap)).collect();
    if joined.chars().count() <= max {
        return joined;
    }
    let mut short: String = joined.chars().take(max.saturating_sub(1)).collect();
    short.push('…');
    short
}

/// `text` in at most `cap` characters: its start and its end (one more character of the
/// end, where the leaf of a path is) around `…`.
fn cut_middle(text: &[char], cap: usize) -> Vec<char> {
    if text.len() <= cap {
        return text.to_vec();
    }
    let kept = cap.saturating_sub(1);
    let head = kept / 2;
    let tail = kept - head;
    let mut short = text[..head].to_vec();
    short.push('…');
    short.extend_from_slice(&text[text.len() - tail..]);
    short
}

#[cfg(test)]
mod tests;
