//! busybox's errexit: a failed redirection of a compound command under `set -e` keeps
//! bash; without errexit, or where busybox does check, the fix still applies.

use super::*;

/// busybox `sh` does not exit under `set -e` when the redirection of `{ }`, `if`, `for`,
/// `while`, `until` or `case` fails (`evaltree()`'s `NREDIR` case); bash and dash do. Every
/// such compound, each fallible redirection, and every way errexit may be on anywhere in
/// the script (before, after, in a function, a trap, `` `…` ``) keeps bash.
#[test]
fn compound_redirection_under_errexit_is_refused_by_the_proof() {
    let compounds = [
        ("{ cp -r /data/results /archive/ && sync; } R", "{ }"),
        ("if true; then printf 'in\\n'; fi R", "if…fi"),
        ("for i in 1; do printf 'in\\n'; done R", "for…done"),
        (
            "while read -r k; do printf '%s\\n' \"$k\"; done R",
            "while…done",
        ),
        ("until true; do :; done R", "until…done"),
        ("case a in a) printf 'in\\n' ;; esac R", "case…esac"),
        // Nested in what busybox itself checks: the inner compound still passes.
        ("( { printf 'in\\n'; } R; printf 'mid\\n' )", "{ }"),
        (
            "f() { if true; then :; fi R; printf 'mid\\n'; }; f",
            "if…fi",
        ),
        ("x=$({ printf 'in\\n'; } R)", "{ }"),
        ("true && { printf 'in\\n'; } R", "{ }"),
        ("{ printf 'in\\n'; } R || printf 'or\\n'", "{ }"),
        ("! { printf 'in\\n'; } R", "{ }"),
    ];
    let redirections = [
        ("> /archive/copy.log", ">file"),
        (">> /archive/copy.log", ">>file"),
        ("2> /archive/err.log", "2>file"),
        ("< /config/keep-list", "<file"),
        (">| /archive/copy.log", ">|file"),
        (">&5", ">&5"),
        ("3<&4", "3<&4"),
        ("> \"$LOG\"", ">file"),
    ];
    let errexit_on = [
        "set -e; S",
        "set -o errexit; S",
        "set -ex\nS",
        "set -e -x; S",
        "printf 'start\\n'; set -e; S",
        "S; set -e",
        "on() { set -e; }; on; S",
        "if [ -n \"$E\" ]; then set -e; fi; S",
        "trap 'set -e' TERM; S",
        "x=`set -e`; S",
    ];
    let mut cases = Vec::new();
    for (compound, name) in compounds {
        for (redirection, shown) in redirections {
            let script = compound.replace('R', redirection);
            for on in errexit_on {
                let want = format!("busybox ignores set -e if {name} {shown} fails");
                cases.push((on.replace('S', &script), want));
            }
            // Started with `bash -e` / `-o errexit`: `check` is told so.
            let found = check(&script, false, true).err();
            assert!(
                found.as_deref().is_some_and(|f| f.contains(name)),
                "-e {script:?}: {found:?}"
            );
        }
    }
    let cases: Vec<(&str, &str)> = cases.iter().map(|(s, w)| (&s[..], &w[..])).collect();
    assert_blocked_by(&cases);
}

/// The same compounds and redirections without errexit: all three shells go on after
/// the failure, so the fix still applies. Under errexit, what busybox does check stays
/// portable too: a subshell's redirection (`evalsubshell`), a function body's (at the
/// call), a simple command's, here-documents, copies of fds 0-2, and `/dev/null`.
#[test]
fn compound_redirection_without_errexit_is_proven_portable() {
    for script in [
        "{ cp -r /data/results /archive/ && sync; } > /archive/copy.log; rm -rf /data/*",
        "while read -r k; do printf '%s\\n' \"$k\"; done < /config/keep-list; rm -rf /data/*",
        "if true; then :; fi 2> /x; for i in 1; do :; done >> /x; until true; do :; done < /x",
        "case a in a) : ;; esac >&5; set +e; { :; } > /x",
    ] {
        assert_eq!(check(script, false, false), Ok(()), "{script:?}");
    }
    for script in [
        "set -e; ( printf 'in\\n' ) > /archive/copy.log; rm -rf /data/*",
        "set -e; f() { printf 'in\\n'; } > /archive/copy.log; f; rm -rf /data/*",
        "set -e; f() ( printf 'in\\n' ) < /config/list; f; rm -rf /data/*",
        "set -e; printf 'in\\n' > /archive/copy.log; true > /x; cat < /x",
        "set -e; { printf 'in\\n'; } > /dev/null 2>&1; rm -rf /data/*",
        "set -e; while read -r k; do :; done < /dev/null",
        "set -e; { cat; } <<EOF\nx\nEOF\nfor i in 1; do printf '%s\\n' \"$i\"; done 2>&1 >&2 1<&0",
    ] {
        assert_eq!(check(script, false, false), Ok(()), "{script:?}");
        assert_eq!(check(script, false, true), Ok(()), "-e {script:?}");
    }
}
