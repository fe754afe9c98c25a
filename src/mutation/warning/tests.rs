//! How warnings are fitted to the API server's limit: marks removed, citations cut in the
//! middle longest first, lists shortened before names, the end cut only as a last resort.

use super::*;

#[test]
fn short_warnings_only_lose_their_marks() {
    let warning = format!(
        "container {}: {} not cleaned",
        cited("\"app\""),
        cited("/x")
    );
    assert_eq!(fit(&warning, 120), "container \"app\": /x not cleaned");
}

#[test]
fn the_longest_citation_is_cut_first_in_the_middle() {
    let long = format!("/mnt/scratch/{}/out", "a".repeat(200));
    let warning = format!("{} is in {}: keep", cited(&long), cited("/var/lib/kubelet"));
    let short = fit(&warning, 60);
    assert_eq!(short.chars().count(), 60, "{short}");
    assert!(short.starts_with("/mnt/scr"), "{short}");
    assert!(
        short.ends_with("aaa/out is in /var/lib/kubelet: keep"),
        "{short}"
    );
}

#[test]
fn marks_go_whatever_the_length() {
    assert_eq!(
        MARKS.map(|mark| (mark.to_string().as_bytes()[0], mark.len_utf8())),
        [(MARK_LEAD, 3); 5]
    );
    let long = "x".repeat(300);
    for text in ["", "/x", "\u{E0FF}é", long.as_str()] {
        let warning = format!("{}: {} {}", cited(text), cited(text), "é".repeat(10));
        let fitted = fit(&warning, 1000);
        assert_eq!(fitted, format!("{text}: {text} {}", "é".repeat(10)));
    }
    // Bytes above `max`, characters within it: still whole.
    let accented = format!("{} {}", cited("/données"), "é".repeat(100));
    assert_eq!(fit(&accented, 120), format!("/données {}", "é".repeat(100)));
}

#[test]
fn without_marks_removes_exactly_the_marks() {
    // Other characters whose UTF-8 starts with the lead byte, marks at every offset
    // of an eight-byte chunk, at the start and the end.
    let (open, close) = (OPEN.to_string(), CLOSE.to_string());
    let pieces = [
        "a", "é", "\u{E0FF}", "\u{E002}", "î", &open, &close, "xyzxyzxy",
    ];
    for prefix in 0..9 {
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    for d in pieces {
                        let text = format!("{}{a}{b}{c}{d}", "p".repeat(prefix));
                        assert_eq!(
                            without_marks(&text),
                            text.replace([OPEN, CLOSE], ""),
                            "{text:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_value_cannot_forge_marks() {
    let forged = format!("x{CLOSE} reason that is long enough to be cut {OPEN}y");
    let warning = format!("{}: kept reason", cited(forged));
    let short = fit(&warning, 20);
    assert!(short.ends_with(": kept reason"), "{short}");
    assert!(!short.contains([OPEN, CLOSE]), "{short}");
}

#[test]
fn the_end_is_cut_only_as_a_last_resort() {
    let warning = format!("{} {}", cited("a".repeat(50)), "reason ".repeat(30));
    let short = fit(&warning, 120);
    assert_eq!(short.chars().count(), 120);
    // The citation keeps CITATION_WHEN_CUT characters: the end is cut anyway.
    let cited = format!("{}…{} reason", "a".repeat(7), "a".repeat(8));
    assert!(short.starts_with(&cited), "{short}");
    assert!(short.ends_with('…'));
}

/// Issue 40: rook's floating mon, 21 characters of container name, and 14 allowed
/// prefixes. The list loses whole items from its end before any name is cut.
#[test]
fn a_list_is_shortened_before_the_names() {
    let prefixes: Vec<String> = [
        "/tmp/mongodb",
        "/tmp/quiz-data",
        "/data",
        "/var/lib/scratch",
        "/mnt/disks",
        "/srv/cache",
        "/opt/work",
        "/scratch",
        "/mnt/fast-ssd/jobs",
        "/var/tmp/builds",
        "/home/ci",
        "/mnt/nfs-cache",
        "/tmp/models",
        "/var/lib/etl",
    ]
    .map(str::to_owned)
    .to_vec();
    let warning = format!(
        "container {}: {} not cleaned: it is host path {}, outside allowedHostPathPrefixes ({})",
        cited("\"floating-mon-shutdown\""),
        cited("/var/lib/drbd"),
        cited("/var/lib/drbd"),
        cited_list(&prefixes)
    );
    let short = fit(&warning, MAX_WARNING_CHARS);
    assert!(short.chars().count() <= MAX_WARNING_CHARS, "{short}");
    assert!(
        short.starts_with(
            "container \"floating-mon-shutdown\": /var/lib/drbd not cleaned: it is host \
             path /var/lib/drbd, outside allowedHostPathPrefixes (/tmp/mongodb, "
        ),
        "{short}"
    );
    assert!(short.ends_with(" more)"), "{short}");
    // Whole items only, in order, and as many as fit.
    let listed = short.split_once('(').unwrap().1;
    assert!(
        listed.starts_with("/tmp/mongodb, /tmp/quiz-data, /data"),
        "{short}"
    );
    // Short enough: the whole list, and no mark left.
    let whole = fit(&warning, 1000);
    assert!(whole.ends_with("/tmp/models, /var/lib/etl)"), "{whole}");
    assert!(!whole.contains(MARKS) && !short.contains(MARKS));
    // One item is kept however long the rest: then the names are cut as before.
    let tight = fit(&warning, 150);
    assert!(tight.contains("(/tmp/mongodb, … 13 more)"), "{tight}");
}

#[test]
fn a_list_item_cannot_forge_marks() {
    let items = [format!("/a{LIST_CLOSE} forged {OPEN}"), "/b".to_owned()];
    let warning = format!("outside ({})", cited_list(&items));
    let whole = fit(&warning, 1000);
    assert_eq!(whole, "outside (/a\u{FFFD} forged \u{FFFD}, /b)");
}

#[test]
fn a_short_name_survives_when_the_end_is_cut() {
    let warning = format!("container {}: {}", cited("\"etl\""), "reason ".repeat(30));
    let short = fit(&warning, 120);
    assert!(short.starts_with("container \"etl\": reason"), "{short}");
    assert_eq!(short.chars().count(), 120);
}
