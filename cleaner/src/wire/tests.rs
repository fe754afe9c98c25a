use super::*;

/// Names a tenant can create, chosen to break a line format: newlines, a forged `end`
/// and `survivor` line, backslashes that look like escapes, invalid UTF-8, every control
/// character, spaces at both ends.
fn hostile_names() -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = vec![
        b"/t/a\nend\nsurvivor mount_point /etc".to_vec(),
        b"/t/\\x41\\n\\\\\\u{85}".to_vec(),
        b"/t/\xff\xfe\xc3(\xe2\x82".to_vec(),
        " /t/ leading and trailing ".as_bytes().to_vec(),
        "/t/é€𝄞\u{85}\u{2028}".as_bytes().to_vec(),
        b"/t/progress 1 2".to_vec(),
        b"/t/\\".to_vec(),
    ];
    names.push((0u8..=0x7f).chain([0x80, 0xc0, 0xff]).collect());
    names
}

fn report(outcome: Outcome, survivors: Vec<Survivor>) -> Report {
    Report {
        target: "/host/mnt/scratch/a\nb \\x00".into(),
        outcome,
        removed: u64::MAX,
        bytes: 5_872_026,
        left: 2,
        unnamed: 7,
        passes: 3,
        elapsed: Duration::from_nanos(410_000_123),
        survivors,
        without_agent: false,
    }
}

fn stdout(report: &Report, progress: &[(u64, u64)]) -> String {
    let mut text = format!("{HEADER}\n");
    for (removed, bytes) in progress {
        text.push_str(&progress_line(*removed, *bytes));
    }
    text.push_str(&encode(report));
    text
}

#[test]
fn report_round_trip_with_hostile_names() {
    let reasons = [
        Reason::MountPoint,
        Reason::OtherMount,
        Reason::OtherDevice,
        Reason::PermissionDenied,
        Reason::NotPermitted,
        Reason::ReadOnly,
        Reason::Changing,
        Reason::Error(24),
    ];
    let survivors: Vec<Survivor> = hostile_names()
        .into_iter()
        .zip(reasons.iter().cycle())
        .map(|(path, reason)| Survivor {
            path,
            reason: *reason,
        })
        .collect();
    let why = "refused: /a\nb is a symlink \\ \u{1b}[31m".to_owned();
    for outcome in [
        Outcome::Emptied,
        Outcome::Missing,
        Outcome::Incomplete,
        Outcome::Skipped(why),
    ] {
        let original = report(outcome, survivors.clone());
        let text = stdout(&original, &[(4096, 10), (8192, 20)]);
        assert_eq!(decode(&text), Ok(original.clone()), "{text}");
        assert_eq!(last_progress(&text), (8192, 20));
        // One line per field: every hostile name stayed on its own line.
        assert_eq!(
            text.lines().count(),
            1 + 2 + 8 + survivors.len() + 1,
            "{text}"
        );
    }
}

#[test]
fn every_byte_string_escapes_and_comes_back() {
    for a in 0..=255u8 {
        for b in [0u8, b'\\', b'n', b'x', b'{', 0x85, 0xc2, 0xff] {
            let bytes = vec![b'/', a, b, a];
            assert_eq!(unescape(&escape(&bytes)), Ok(bytes.clone()), "{bytes:?}");
        }
    }
}

#[test]
fn anything_else_is_refused() {
    let good = stdout(&report(Outcome::Emptied, vec![]), &[]);
    assert!(decode(&good).is_ok());
    let refused = [
        String::new(),
        good.replace(HEADER, "prestop-clean report 2"),
        good.replace("\nend\n", "\n"),
        good.replace("\nend\n", "\nend\nsurvivor changing /x\n"),
        good.replace("removed ", "removed -"),
        good.replace("removed ", "removed +"),
        good.replace("bytes 5872026\n", ""),
        good.replace("passes 3", "passes 4294967296"),
        good.replace("outcome emptied", "outcome gone"),
        good.replace("\nend\n", "\nsurvivor immutable /x\nend\n"),
        good.replace("\nend\n", "\nsurvivor changing\nend\n"),
        good.replace("\nend\n", "\nsurvivor changing /\\q\nend\n"),
        good.replace("\nend\n", "\nsurvivor changing /\\x41\nend\n"),
        good.replace("\nend\n", "\nsurvivor changing /\\u{41}\nend\n"),
        good.replace("target ", "target  ")
            .replace("target  ", "targets "),
        stdout(&report(Outcome::Emptied, vec![]), &[(1, 2)]).replace("progress", "progres"),
        format!(
            "{HEADER}\nprogress 1\n{}",
            encode(&report(Outcome::Emptied, vec![]))
        ),
    ];
    for text in refused {
        assert!(decode(&text).is_err(), "accepted: {text:?}");
    }
    let many = (0..=MAX_NAMED)
        .map(|i| Survivor {
            path: format!("/t/{i}").into_bytes(),
            reason: Reason::Changing,
        })
        .collect();
    assert!(decode(&stdout(&report(Outcome::Incomplete, many), &[])).is_err());
}

#[test]
fn a_killed_walk_still_says_how_far_it_got() {
    let text = format!(
        "{HEADER}\n{}{}",
        progress_line(4096, 1),
        progress_line(8192, 2)
    );
    assert!(decode(&text).is_err());
    assert_eq!(last_progress(&text), (8192, 2));
    assert_eq!(last_progress(&format!("{HEADER}\nprogr")), (0, 0));
    assert_eq!(last_progress(""), (0, 0));
}
