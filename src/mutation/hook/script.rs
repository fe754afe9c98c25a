//! Shell text of the generated hooks: the only place where script text is written.
//!
//! Contract:
//! - Every script runs as `[shell, "-c", SCRIPT, "prestop-injector", args…]`. Paths, the
//!   user's argv and a custom script travel as positional parameters; the text only ever
//!   contains integers we produce (sleep seconds, argument counts). A file name can
//!   therefore never be parsed as shell code, whatever bytes it holds.
//! - The text is POSIX `sh` and needs only `find` (`-xdev -mindepth -depth -type
//!   -exec {} +`), `rm -f`, `rmdir`, `sleep`, `kill`, `printf` and `[`, all busybox
//!   applets, so it runs the same in busybox `sh`, `dash` and `bash`.
//! - The first line is a header naming the shape (what runs before, what the action is,
//!   how many leading arguments belong to the action). [`parse_header`] reads it back so a
//!   later pass can recognise our own hook; callers must still compare the re-rendered
//!   argv with the one they found, so only text we render exactly is ever recognised.

/// `$0` of every generated script; also how we recognise our own argv.
pub const ARG0: &str = "prestop-injector";

const HOOK_HEADER: &str = "# prestop-injector hook v1";
const SIDECAR_HEADER: &str = "# prestop-injector sidecar v1";

/// `clean COUNT ARG…` empties the first COUNT arguments (absolute directory paths) and
/// returns 1 when something could not be deleted.
///
/// Why each step:
/// - The webhook only sends normalized absolute paths other than `/`; the `case` checks
///   repeat that here so a bug upstream cannot turn into emptying `/`.
/// - A target that is itself a symlink is skipped: following it could empty a directory
///   outside the volume.
/// - Two `find` passes, because busybox `find` has no `-delete` (Debian's build lacks it)
///   and `rm -r` crosses mounts: first every non-directory is unlinked (`rm -f` removes a
///   symlink itself, never what it points to), then the now empty directories are removed
///   deepest first (`-depth`; batches of `-exec … +` run in traversal order). `-mindepth 1`
///   keeps the directory itself; dot-files are found like any other name. `-xdev` keeps
///   both passes out of nested mounts: GNU find lists a mount point but does not descend
///   (its `rmdir` fails and is reported), busybox find skips it; either way the mount's
///   contents survive. Names reach `rm`/`rmdir` as separate argv entries, never as shell
///   words, and always start with the absolute target, so a leading `-` is no option.
/// - `find`'s exit status is not trusted alone (busybox's differs from GNU's on failed
///   `-exec`), so what is left is checked with globs (the three patterns together match every name
///   but `.` and `..`).
const CLEAN_FN: &str = r#"clean() {
  n=$1; shift; rc=0
  for t do
    [ "$n" -gt 0 ] || break
    n=$((n - 1))
    case $t in
      /*[!/]*) ;;
      *) printf '%s: skipping %s: not an absolute path below /\n' "$0" "$t" >&2; continue ;;
    esac
    case $t in
      */./*|*/../*|*/.|*/..) printf '%s: skipping %s: not normalized\n' "$0" "$t" >&2; continue ;;
    esac
    if [ -L "$t" ]; then
      printf '%s: skipping %s: it is a symlink\n' "$0" "$t" >&2; continue
    fi
    [ -e "$t" ] || continue
    if [ ! -d "$t" ]; then
      printf '%s: skipping %s: not a directory\n' "$0" "$t" >&2; continue
    fi
    find "$t" -xdev -mindepth 1 ! -type d -exec rm -f -- {} + || rc=1
    find "$t" -xdev -mindepth 1 -depth -type d -exec rmdir -- {} + || rc=1
    for e in "$t"/* "$t"/.[!.]* "$t"/..?*; do
      if [ -e "$e" ] || [ -L "$e" ]; then
        printf '%s: could not empty %s\n' "$0" "$t" >&2; rc=1; break
      fi
    done
  done
  return "$rc"
}
"#;

/// The user's own preStop, with its exact argv: everything after our `{lead}` arguments.
/// `exec` in a subshell resolves argv[0] on PATH like the kubelet would (no builtins, no
/// functions) and keeps the user's command away from our variables.
const RUN_USER: &str = "( shift {lead}; exec \"$@\" )\nstatus=$?\n";

/// Follows the action of a composed hook: `$?` is the action's status.
const EXIT_COMPOSED: &str = "rc=$?\n[ \"$status\" -eq 0 ] || exit \"$status\"\nexit \"$rc\"\n";

/// The `prestop-injector.io/command` script: passed as `$1`, run by `eval` in a subshell
/// with no positional parameters, so its text is parsed once, as the user wrote it.
const RUN_CUSTOM: &str = "( c=$1; set --; eval \"$c\" )\n";

/// Idle until SIGTERM, then clean. A foreground `sleep` would hold the trap back until it
/// ends, so the sleep runs in the background and `wait` returns as soon as a trapped
/// signal arrives. The trap also kills the current sleep, so a signal landing between the
/// check and `wait` cannot leave us waiting for a whole hour. As PID 1 a signal without a
/// handler is ignored; the trap is what makes SIGTERM reach us at all.
const SIDECAR_IDLE: &str = r#"term=; pid=
trap 'term=1; [ -z "$pid" ] || kill "$pid" 2>/dev/null' TERM INT
while [ -z "$term" ]; do
  sleep 3600 & pid=$!
  [ -n "$term" ] || wait "$pid"
done
kill "$pid" 2>/dev/null
"#;

/// What runs before the action inside one hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeforeShape {
    Nothing,
    /// `sleep N` first.
    Sleep(u64),
    /// The user's argv, after the action's arguments; the hook exits with its status.
    Exec,
}

/// What the hook does after [`BeforeShape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionShape {
    /// The first `lead` arguments are directories to empty.
    Cleanup,
    /// The first argument is the user's script.
    Custom,
}

/// Everything the text of a hook depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub before: BeforeShape,
    pub action: ActionShape,
    /// How many positional parameters (after `$0`) belong to the action.
    pub lead: usize,
}

/// The `-c` script of a preStop hook of this shape.
pub fn hook_script(shape: Shape) -> String {
    let Shape {
        before,
        action,
        lead,
    } = shape;
    let mut text = String::with_capacity(1024);
    text.push_str(HOOK_HEADER);
    text.push_str(&match before {
        BeforeShape::Nothing => " before=nothing".to_owned(),
        BeforeShape::Sleep(n) => format!(" before=sleep:{n}"),
        BeforeShape::Exec => " before=exec".to_owned(),
    });
    text.push_str(match action {
        ActionShape::Cleanup => " action=cleanup",
        ActionShape::Custom => " action=custom",
    });
    text.push_str(&format!(" lead={lead}\n"));
    if action == ActionShape::Cleanup {
        text.push_str(CLEAN_FN);
    }
    match before {
        BeforeShape::Nothing => {}
        BeforeShape::Sleep(n) => text.push_str(&format!("sleep {n}\n")),
        BeforeShape::Exec => text.push_str(&RUN_USER.replace("{lead}", &lead.to_string())),
    }
    match action {
        ActionShape::Cleanup => text.push_str(&format!("clean {lead} \"$@\"\n")),
        ActionShape::Custom => text.push_str(RUN_CUSTOM),
    }
    if before == BeforeShape::Exec {
        // docs/DESIGN.md#the-hook-and-the-cleaner-program: the user's status when non-zero, else
        // ours, so a failed cleanup after a successful user hook still reaches the kubelet
        // (FailedPreStopHook event).
        text.push_str(EXIT_COMPOSED);
    }
    text
}

/// The text releases before the composed exit status
/// (docs/DESIGN.md#the-hook-and-the-cleaner-program) rendered for `shape`: a composed hook exited
/// with the user's status even when the cleanup failed. Only composed hooks differ. Recognised as
/// ours so that an upgrade replaces such a hook instead of wrapping it (and its old targets) as if
/// it were the user's.
pub fn legacy_hook_script(shape: Shape) -> Option<String> {
    (shape.before == BeforeShape::Exec)
        .then(|| hook_script(shape).replace(EXIT_COMPOSED, "exit \"$status\"\n"))
}

/// The shape a hook script declares in its header; `None` when it is not ours.
pub fn parse_header(script: &str) -> Option<Shape> {
    let rest = script.lines().next()?.strip_prefix(HOOK_HEADER)?;
    let mut words = rest.split(' ');
    if !words.next()?.is_empty() {
        return None;
    }
    let before = match words.next()?.strip_prefix("before=")? {
        "nothing" => BeforeShape::Nothing,
        "exec" => BeforeShape::Exec,
        other => BeforeShape::Sleep(parse_digits(other.strip_prefix("sleep:")?)?),
    };
    let action = match words.next()? {
        "action=cleanup" => ActionShape::Cleanup,
        "action=custom" => ActionShape::Custom,
        _ => return None,
    };
    let lead = usize::try_from(parse_digits(words.next()?.strip_prefix("lead=")?)?).ok()?;
    if words.next().is_some() {
        return None;
    }
    Some(Shape {
        before,
        action,
        lead,
    })
}

/// The `-c` script of the cleanup sidecar for `count` targets.
pub fn sidecar_script(count: usize) -> String {
    format!("{SIDECAR_HEADER} lead={count}\n{CLEAN_FN}{SIDECAR_IDLE}clean {count} \"$@\"\nexit 0\n")
}

/// The target count a sidecar script declares; `None` when it is not ours.
pub fn parse_sidecar_header(script: &str) -> Option<usize> {
    let rest = script.lines().next()?.strip_prefix(SIDECAR_HEADER)?;
    usize::try_from(parse_digits(rest.strip_prefix(" lead=")?)?).ok()
}

/// Plain ASCII digits only (`u64::from_str` would also take `+5`, which we never render).
fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Sum of the literal `sleep N` (N, Ns, Nm, Nh; fractions round up) commands in a script
/// or in argv joined with spaces. `sleep` must start a word or a path's last segment
/// (after the start, whitespace, `;`, `&`, `|`, `(`, `{`, a backtick, a quote or `/`, so
/// `sh -c 'sleep 5'` and an exec'd `/bin/sleep 60` count) and its
/// number must end the word; `sleep $X` and `mysleep 5` are ignored. Overcounting only
/// lengthens the grace period, undercounting would cut the hook short.
pub fn literal_sleep_seconds(text: &str) -> u64 {
    const STARTS: &[u8] = b" \t\n\r;&|({`'\"/";
    const ENDS: &[u8] = b" \t\n\r;&|)}`'\"";
    let bytes = text.as_bytes();
    let mut total: u64 = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("sleep") {
        let at = from + found;
        from = at + "sleep".len();
        if at > 0 && !STARTS.contains(&bytes[at - 1]) {
            continue;
        }
        let mut i = from;
        while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        if i == from {
            continue;
        }
        let end = bytes[i..]
            .iter()
            .position(|b| ENDS.contains(b))
            .map_or(bytes.len(), |p| i + p);
        if let Some(seconds) = duration_word(&text[i..end]) {
            total = total.saturating_add(seconds);
        }
    }
    total
}

/// `5`, `1.5`, `30s`, `2m`, `0.5h` as whole seconds, rounded up.
fn duration_word(word: &str) -> Option<u64> {
    let (number, unit) = match word.as_bytes().last()? {
        b's' => (&word[..word.len() - 1], 1),
        b'm' => (&word[..word.len() - 1], 60),
        b'h' => (&word[..word.len() - 1], 3600),
        _ => (word, 1),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let whole = if whole.is_empty() {
        0
    } else if whole.bytes().all(|b| b.is_ascii_digit()) {
        // An absurdly long sleep must not count as none at all.
        parse_digits(whole).unwrap_or(u64::MAX)
    } else {
        return None;
    };
    let mut seconds = whole.saturating_mul(unit);
    if !fraction.is_empty() {
        // Nine digits are plenty for sleeps; more could overflow the numerator.
        let digits = &fraction[..fraction.len().min(9)];
        if !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let numerator = parse_digits(digits)?.saturating_mul(unit);
        let denominator = 10u64.pow(u32::try_from(digits.len()).ok()?);
        seconds = seconds.saturating_add(numerator.div_ceil(denominator));
    }
    Some(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_table() {
        let cases: &[(&str, u64)] = &[
            ("sleep 5", 5),
            ("sleep 5s", 5),
            ("sleep 2m", 120),
            ("sleep 1h", 3600),
            ("sleep 1.5", 2),
            ("sleep 0.1s", 1),
            ("sleep 0.5m", 30),
            ("sleep .5", 1),
            ("sleep 5; sleep 10", 15),
            ("echo a&&sleep 3|cat", 3),
            ("(sleep 4)", 4),
            ("{ sleep 4; }", 4),
            ("x=`sleep 2`", 2),
            ("a\nsleep 7\n", 7),
            ("sh -c 'sleep 6'", 6),
            ("sleep\t8", 8),
            ("/bin/sleep 60", 60),
            ("/usr/bin/sleep 1m", 60),
            ("env /bin/sleep 3", 3),
            ("/bin/mysleep 5", 0),
            ("sleep $X", 0),
            ("sleep ${X}", 0),
            ("mysleep 5", 0),
            ("sleeps 5", 0),
            ("sleep5", 0),
            ("sleep 5x", 0),
            ("sleep 5.", 5),
            ("sleep .", 0),
            ("sleep 1.2.3", 0),
            ("sleep -5", 0),
            ("sleep", 0),
            ("", 0),
            ("sleep 99999999999999999999h", u64::MAX),
            ("sleep 18446744073709551615h", u64::MAX),
        ];
        for (text, want) in cases {
            assert_eq!(literal_sleep_seconds(text), *want, "{text:?}");
        }
    }

    #[test]
    fn headers_round_trip() {
        for before in [
            BeforeShape::Nothing,
            BeforeShape::Exec,
            BeforeShape::Sleep(0),
            BeforeShape::Sleep(u64::MAX),
        ] {
            for action in [ActionShape::Cleanup, ActionShape::Custom] {
                for lead in [0, 1, 7] {
                    let shape = Shape {
                        before,
                        action,
                        lead,
                    };
                    assert_eq!(parse_header(&hook_script(shape)), Some(shape));
                }
            }
        }
        assert_eq!(parse_sidecar_header(&sidecar_script(3)), Some(3));
    }

    #[test]
    fn foreign_headers_are_rejected() {
        for text in [
            "",
            "echo hi",
            "# prestop-injector hook v1",
            "# prestop-injector hook v1 before=exec action=cleanup lead=+1",
            "# prestop-injector hook v1 before=exec action=cleanup lead=1 x",
            "# prestop-injector hook v1 before=sleep:-1 action=cleanup lead=1",
            "# prestop-injector hook v2 before=exec action=cleanup lead=1",
            "# prestop-injector hook v1  before=exec action=cleanup lead=1",
        ] {
            assert_eq!(parse_header(text), None, "{text:?}");
        }
        assert_eq!(
            parse_sidecar_header("# prestop-injector sidecar v1 lead="),
            None
        );
    }

    #[test]
    fn text_holds_only_our_integers() {
        let script = hook_script(Shape {
            before: BeforeShape::Sleep(42),
            action: ActionShape::Cleanup,
            lead: 3,
        });
        assert!(script.contains("sleep 42\n"));
        assert!(script.contains("clean 3 \"$@\"\n"));
        assert!(!script.contains('{') || script.contains("clean() {"));
        assert!(!script.contains("{lead}"));
    }
}
