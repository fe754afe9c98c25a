use super::protocol::{at_or_below, is_normalized};
use super::*;

#[test]
fn requests_round_trip_and_every_prefix_is_incomplete() {
    for host in [
        &b"/mnt/scratch/job"[..],
        b"/a\nsame\n",
        b"/\xff\x00 7 /x\n",
        &[b'/'; 4000],
    ] {
        for ending in [false, true] {
            let request = if ending {
                encode_ending_request(host)
            } else {
                encode_request(host)
            };
            assert_eq!(
                parse_request(&request),
                Ok(Some(protocol::Request { host, ending }))
            );
            for end in 0..request.len() {
                assert_eq!(parse_request(&request[..end]), Ok(None), "{end}");
            }
            let mut longer = request.clone();
            longer.push(b'x');
            assert!(parse_request(&longer).is_err());
        }
    }
}

/// Issue 38, class 7: `same` changed its meaning (the node's directory, and nobody else
/// uses it), so the version word changed with it. An agent of an earlier release knows
/// only `prestop-identity 1 ` and refuses today's line as not its protocol, so its `same`,
/// which meant only "the node's directory", is never read as "nobody else uses it". Older
/// cleaners' version 1 lines are still answered (by today's stricter rule); no other
/// version is.
#[test]
fn the_version_word_changed_with_the_meaning_of_same() {
    let older_agent_accepts = |line: &[u8]| line.starts_with(b"prestop-identity 1 ");
    for request in [
        encode_request(b"/mnt/scratch/job"),
        encode_ending_request(b"/mnt/scratch/job"),
    ] {
        assert!(request.starts_with(b"prestop-identity 2 "));
        assert!(!older_agent_accepts(&request));
        let older_cleaner = [&b"prestop-identity 1 "[..], &request[19..]].concat();
        assert_eq!(
            parse_request(&older_cleaner).map(|r| r.map(|r| r.host)),
            Ok(Some(&b"/mnt/scratch/job"[..]))
        );
        for other in ["0", "3", "10", "2x"] {
            let line = [
                format!("prestop-identity {other} ").as_bytes(),
                &request[19..],
            ]
            .concat();
            assert!(parse_request(&line).is_err(), "version {other}");
        }
    }
}

/// Only the one word is a question about the pod's end; anything else after the host
/// path is not the protocol.
#[test]
fn only_ending_may_follow_the_host_path() {
    let plain = encode_request(b"/mnt/scratch/job");
    for tail in [
        &b" endinG\n"[..],
        b" ending \n",
        b"ending\n",
        b" end\n",
        b"  ending\n",
    ] {
        let mut request = plain[..plain.len() - 1].to_vec();
        request.extend_from_slice(tail);
        assert!(
            parse_request(&request).is_err(),
            "{:?}",
            String::from_utf8_lossy(tail)
        );
    }
    assert_eq!(
        parse_answer(b"not-ending: the pod runs\n"),
        Some(Verdict::NotEnding("the pod runs".into()))
    );
}

#[test]
fn answers_are_one_line_of_the_protocol() {
    assert_eq!(parse_answer(b"same\n"), Some(Verdict::Same));
    assert_eq!(
        parse_answer(b"differs: x\n"),
        Some(Verdict::Differs("x".into()))
    );
    // `busy` is not no; an earlier agent said it as a refusal.
    assert_eq!(parse_answer(b"busy\n"), Some(Verdict::Busy));
    assert_eq!(parse_answer(b"refused: busy\n"), Some(Verdict::Busy));
    assert_eq!(
        parse_answer(b"refused: busy elsewhere\n"),
        Some(Verdict::Refused("busy elsewhere".into()))
    );
    for bad in [
        &b"same"[..],
        b"",
        b"\n",
        b"same\nsame\n",
        b"Same\n",
        b"differs\n",
        // Control characters could forge or erase a line of the cleaner's output.
        b"differs: a\rb\n",
        b"refused: \x1b[2Kx\n",
        b"refused: \xff\n",
    ] {
        assert_eq!(parse_answer(bad), None, "{bad:?}");
    }
}

#[test]
fn host_paths_are_normalized_and_below_a_prefix_component_wise() {
    for good in ["/", "/mnt", "/mnt/scratch/a b"] {
        assert!(is_normalized(good.as_bytes()), "{good}");
    }
    for bad in [
        "",
        "mnt",
        "/mnt/",
        "//mnt",
        "/mnt/./x",
        "/mnt/../x",
        "/mnt/x\0",
    ] {
        assert!(!is_normalized(bad.as_bytes()), "{bad:?}");
    }
    assert!(at_or_below(b"/mnt/scratch", b"/mnt/scratch"));
    assert!(at_or_below(b"/mnt/scratch/x", b"/mnt/scratch"));
    assert!(!at_or_below(b"/mnt/scratchx", b"/mnt/scratch"));
    assert!(!at_or_below(b"/mnt", b"/mnt/scratch"));
    assert!(at_or_below(b"/etc", b"/"));
}

#[test]
fn agent_arguments_are_checked() {
    let args = |items: &[&str]| {
        AgentArgs::parse(&items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
    };
    assert_eq!(
        args(&[
            "--socket",
            "/s",
            "--host-root",
            "/host",
            "--allow",
            "/a",
            "--allow",
            "/b/",
            "--metrics-listen",
            "0.0.0.0:9103"
        ]),
        Ok(AgentArgs {
            host_root: "/host".into(),
            socket: "/s".into(),
            allow: vec!["/a".into(), "/b".into()],
            metrics_listen: Some("0.0.0.0:9103".into()),
        })
    );
    for bad in [
        &["--socket", "/s"][..],
        &["--host-root", "/h"],
        &["--host-root", "/h", "--socket", "/s", "--allow", "a/b"],
        &["--host-root", "/h", "--socket", "/s", "--allow", "/a/../b"],
        &["--host-root", "/h", "--socket", "/s", "--allow", "/a\nb"],
        &["--host-root", "/h", "--socket", "/s", "--socket", "/t"],
        &["--host-root", "/h", "--socket", "/s", "--bogus", "x"],
        &["--host-root", "/h", "--socket", "/s", "--allow"],
    ] {
        assert!(args(bad).is_err(), "{bad:?}");
    }
}

/// Issue 39: a cleanup's report is a request of the same family, with no descriptor.
#[test]
fn reports_round_trip_and_every_prefix_is_incomplete() {
    let long = "é".repeat(2000);
    for outcome in reporting::Outcome::ALL {
        for line in [
            "emptied /scratch: 3 entries, 12 B in 0.01 s",
            "ü",
            &long[..],
        ] {
            let request = encode_report(outcome, line);
            assert!(request.len() <= MAX_REQUEST);
            let parsed = parse_report(&request).expect("a report").expect("whole");
            assert_eq!(parsed.outcome, outcome);
            if line.len() <= reporting::MAX_REPORT_LINE {
                assert_eq!(parsed.line, line);
            } else {
                // Cut at a character, and says so.
                assert!(parsed.line.len() <= reporting::MAX_REPORT_LINE);
                assert!(parsed.line.ends_with("é…"), "{}", parsed.line);
            }
            for end in 0..request.len() {
                assert_eq!(parse_report(&request[..end]), Ok(None), "{end}");
                assert_ne!(reporting::is_report(&request[..end]), Some(false), "{end}");
            }
            assert_eq!(reporting::is_report(&request), Some(true));
            let mut longer = request.clone();
            longer.push(b'x');
            assert!(parse_report(&longer).is_err());
        }
    }
    // A control character never reaches the agent's line, nor the Event.
    let request = encode_report(reporting::Outcome::Skipped, "a\nb\u{85}c");
    assert_eq!(parse_report(&request).unwrap().unwrap().line, "a b c");
}

/// What is not a report is refused, not waited for; a question is never read as one.
#[test]
fn malformed_reports_are_refused() {
    for bad in [
        &b"prestop-report 1 emptied 2 ok\n"[..],
        b"prestop-report 2 gone 2 ok\n",
        b"prestop-report 2 emptied 02 ok\n",
        b"prestop-report 2 emptied 0 \n",
        b"prestop-report 2 emptied 99999 ",
        b"prestop-report 2 emptied 3000 ",
        b"prestop-report 2 emptied 2 okk\n",
        b"prestop-report 2 emptied 2 o\x07\n",
        b"prestop-report 2 emptied 2 \xff\xfe\n",
        b"prestop-report 2 emptiedemptied",
    ] {
        assert!(parse_report(bad).is_err(), "{}", crate::escape(bad));
    }
    assert_eq!(
        reporting::is_report(&encode_request(b"/mnt/scratch/job")),
        Some(false)
    );
    assert_eq!(reporting::is_report(b"prestop-"), None);
    assert_eq!(reporting::is_report(b"GET / HTTP/1.1"), Some(false));
}

/// An agent that predates reports refuses the line as not its protocol (and the cleaner
/// ignores that): its request parser is today's `parse_request`, which knows only
/// `prestop-identity`.
#[test]
fn an_agent_that_predates_reports_refuses_them() {
    for outcome in reporting::Outcome::ALL {
        let request = encode_report(outcome, "emptied /scratch");
        assert!(parse_request(&request).is_err());
        // It refuses at the first bytes that differ, not at its timeout.
        assert!(parse_request(&request[..10]).is_err());
    }
}

/// The reason of a cleanup's Event follows from its sentences; several targets say the
/// gravest.
#[test]
fn outcome_of_each_sentence() {
    use crate::{Outcome as Done, Report};
    use reporting::{outcome_of, Outcome};
    let report = |outcome| Report {
        target: "/scratch".to_owned(),
        outcome,
        removed: 0,
        bytes: 0,
        left: 0,
        survivors: Vec::new(),
        unnamed: 0,
        passes: 1,
        elapsed: std::time::Duration::ZERO,
        without_agent: false,
    };
    for (done, expected) in [
        (Done::Emptied, Outcome::Emptied),
        (Done::Missing, Outcome::Emptied),
        (Done::Incomplete, Outcome::Incomplete),
        (
            Done::Skipped("/scratch is a symlink".to_owned()),
            Outcome::Skipped,
        ),
        (
            Done::Skipped("the node agent was not reachable: cannot connect".to_owned()),
            Outcome::Skipped,
        ),
        (
            Done::Skipped("the node agent says: another pod uses /mnt/s".to_owned()),
            Outcome::Refused,
        ),
        (
            Done::Skipped(
                "the node agent says the opened target is not the node's /mnt/s: refused: x"
                    .to_owned(),
            ),
            Outcome::Refused,
        ),
        (
            Done::Skipped(
                "stopped during the walk after removing 3 entries, 1 B: the node \
                 agent refused: busy; the rest is left for the node reaper"
                    .to_owned(),
            ),
            Outcome::Refused,
        ),
        (
            Done::Skipped("the node agent was busy and did not judge the node's /mnt/s".to_owned()),
            Outcome::Refused,
        ),
    ] {
        assert_eq!(outcome_of(&report(done.clone())), expected, "{done:?}");
    }
    assert_eq!(Outcome::Emptied.worse(Outcome::Skipped), Outcome::Skipped);
    assert_eq!(Outcome::CutOff.worse(Outcome::Refused), Outcome::CutOff);
    assert_eq!(
        Outcome::Refused.worse(Outcome::Incomplete),
        Outcome::Refused
    );
}
