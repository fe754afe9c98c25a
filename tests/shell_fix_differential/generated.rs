//! Issue 17, class 2: generated scripts × generated environment values. Every builtin
//! operand position (and every pattern position) gets an expansion of `$X` in several
//! spellings; every script the shell fix would rewrite runs under bash, dash and busybox
//! `sh` once per value of X, and all three must agree.
//!
//! To keep the cost at a few sandbox runs, one run per shell and chunk of scripts starts
//! a driver (busybox `sh`, the same in every run) that calls the shell under test once per
//! (script, value) and prints each result between markers.

use super::sandbox::{Outcome, Sandbox};

/// Values an attacker (or a careless `env:`) puts in X: options, `-` (OLDPWD), integers
/// with trailing whitespace, globs and bracket expressions dash reads otherwise, test
/// operators, backslashes, a newline, arithmetic injection, and a long one.
pub fn values() -> Vec<String> {
    let mut values: Vec<String> = [
        "-",
        "-e",
        "-n",
        "-P",
        "1\r",
        "1\n",
        "",
        " ",
        "*",
        "?",
        "[a]",
        "[^a]*",
        "[[.a.]]*",
        "!",
        "(",
        ")",
        "-eq",
        "=",
        "\\",
        "\n",
        "a\\b",
        "%s",
        "1",
        "-1",
        "256",
        " 1",
        "+1",
        "010",
        "--",
        "1+1",
        "a[$(echo pwned >&2)]",
        "/work",
        "a b",
        "data",
    ]
    .iter()
    .map(|v| (*v).to_owned())
    .collect();
    values.push("x".repeat(5000));
    values
}

/// `E` marks the operand position.
const TEMPLATES: &[&str] = &[
    "cd E && pwd || printf 'no\\n'",
    "cd E; pwd",
    "cd /work/E && pwd || printf 'no\\n'",
    "[ E -eq 1 ] && printf 'y\\n' || printf 'n\\n'",
    "[ 1 -lt E ] && printf 'y\\n' || printf 'n\\n'",
    "test E -ge 0 && printf 'y\\n'",
    "[ E ] && printf 'y\\n' || printf 'n\\n'",
    "[ E = a ] && printf 'y\\n' || printf 'n\\n'",
    "[ a != E ] && printf 'y\\n' || printf 'n\\n'",
    "[ -n E ] && printf 'y\\n' || printf 'n\\n'",
    "[ -z E ] && printf 'y\\n' || printf 'n\\n'",
    "[ ! E ] && printf 'y\\n' || printf 'n\\n'",
    "test E && printf 'y\\n' || printf 'n\\n'",
    "[ -e E ] && printf 'y\\n' || printf 'n\\n'",
    "[ ! E = a ] && printf 'y\\n' || printf 'n\\n'",
    "[ E a ] && printf 'y\\n' || printf 'n\\n'",
    "[ a E b ] && printf 'y\\n' || printf 'n\\n'",
    "printf '%s|\\n' E",
    "printf '%d\\n' E",
    "printf '%c|\\n' E",
    "case abc in E) printf 'm\\n' ;; *) printf 'n\\n' ;; esac",
    "case E in a*) printf 'm\\n' ;; *) printf 'n\\n' ;; esac",
    "for f in E; do printf '[%s]' \"$f\"; done; printf '\\n'",
    "set -- E; printf '%s\\n' \"$#\"",
    "exit E",
    "f() { return E; }; f; printf '%s\\n' \"$?\"",
    "A=E; printf '%s\\n' \"$A\"",
    "export A=E; printf '%s\\n' \"$A\"",
    "kill -s 0 E 2>/dev/null && printf 'y\\n' || printf 'n\\n'",
    "sleep 0 & wait E; printf 'waited\\n'",
    "ls -d /work/E 2>/dev/null | sort",
    "printf '%s\\n' /data/E",
    "n=0; n=$((n + 1)); [ \"$n\" -lt E ] && printf 'y\\n' || printf 'n\\n'",
    "i=0; while [ \"$i\" -lt 2 ]; do i=$((i + 1)); done; printf '%s %s\\n' \"$i\" E",
];

/// How E is spelled.
const FORMS: &[&str] = &["\"$X\"", "$X", "\"${X:-d}\"", "\"x$X\""];

/// Positions that do not fit a template: patterns inside `${…}`, arithmetic, here-docs.
const WHOLE: &[&str] = &[
    "Y=abc; printf '%s\\n' \"${Y%$X}\"",
    "Y=abc; printf '%s\\n' \"${Y#$X}\"",
    "Y=abc; printf '%s\\n' \"${Y##$X}\"",
    "Y=abc; printf '%s\\n' ${Y%\"$X\"}",
    "Y=abc; printf '%s\\n' \"${Y%[^c]}\"",
    "printf '%s\\n' \"${X%/*}\" \"${X#-}\" \"${#X}\"",
    "printf '%d\\n' $((X + 1))",
    "printf '%d\\n' $(($X + 1))",
    "printf '%d\\n' $((${X} * 2))",
    "read -r a b <<EOF\n$X\nEOF\nprintf '[%s][%s]\\n' \"$a\" \"$b\"",
    "read a b <<EOF\n$X\nEOF\nprintf '[%s][%s]\\n' \"$a\" \"$b\"",
    "cat <<EOF\n<$X>\nEOF",
    "printf '%s\\n' \"$X\" | wc -c",
    "cd \"/$X\" 2>/dev/null && pwd || printf 'no\\n'",
    "cd \"./$X\" 2>/dev/null && pwd || printf 'no\\n'",
];

/// Every generated script, bounded: templates × forms + the whole ones.
pub fn scripts() -> Vec<String> {
    let mut scripts: Vec<String> = TEMPLATES
        .iter()
        .flat_map(|t| FORMS.iter().map(move |f| t.replace('E', f)))
        .collect();
    scripts.extend(WHOLE.iter().map(|s| (*s).to_owned()));
    scripts
}

const MARK: &str = "\x1e";

/// Runs under busybox `sh` in the sandbox: `SHELL COUNT VALUE… SCRIPT…`; for each script
/// and value, the shell under test runs it with X set, cwd `/work` (the driver never
/// `cd`s: OLDPWD stays unset, as in a container), stdin closed.
const DRIVER: &str = r#"shell=$1; n=$2; shift 2
s=0
for script do
  s=$((s + 1))
  [ "$s" -gt "$n" ] || continue
  v=0
  for value do
    v=$((v + 1)); [ "$v" -le "$n" ] || break
    out=$(X=$value "$shell" -c "$script" 2>/tmp/.err </dev/null; printf '\036%s' "$?")
    printf '\036case %s %s\036%s\036' "$((s - n))" "$v" "$out"
    cat /tmp/.err; rm -f /tmp/.err
  done
done
"#;

/// One result per (script index, value index) for `shell`, or why the run failed.
pub fn run_chunk(
    sandbox: &Sandbox,
    id: u32,
    shell: &str,
    scripts: &[&str],
    values: &[String],
) -> Vec<Vec<Outcome>> {
    let mut args: Vec<&str> = vec!["-c", DRIVER, "driver", shell];
    let count = values.len().to_string();
    args.push(&count);
    args.extend(values.iter().map(String::as_str));
    args.extend(scripts.iter().copied());
    let run = sandbox.run(id, "/bb/sh", &args, |_| {});
    assert_eq!(run.status, Some(0), "driver under {shell}: {run:?}");
    records(&run.stdout, shell, scripts, values.len())
}

/// A driver's output, one result per (script, value).
fn records(stdout: &str, shell: &str, scripts: &[&str], values: usize) -> Vec<Vec<Outcome>> {
    let mut results = vec![Vec::new(); scripts.len()];
    // Records: "", "case S V", "STDOUT", "STATUS", "STDERR", "case …", …
    let fields: Vec<&str> = stdout.split(MARK).collect();
    let mut k = 1;
    while k < fields.len() {
        let head: Vec<&str> = fields[k].split(' ').collect();
        assert_eq!(head.first(), Some(&"case"), "driver output under {shell}");
        let script: usize = head[1].parse().expect("script index");
        let stdout = fields[k + 1].to_owned();
        let status = fields[k + 2].parse().ok();
        let stderr = fields.get(k + 3).copied().unwrap_or("").to_owned();
        results[script - 1].push(Outcome {
            status,
            stdout,
            stderr,
            tree: Vec::new(),
        });
        k += 4;
    }
    for (i, per_script) in results.iter().enumerate() {
        assert_eq!(
            per_script.len(),
            values,
            "under {shell}, script {:?} did not run for every value",
            scripts[i]
        );
    }
    results
}

/// Issue 27: busybox `sh` does not apply `set -e` when the redirection of a compound
/// command fails (`evaltree()`'s `NREDIR` case); bash and dash exit. Every compound kind
/// (and the contexts around one, and simple commands for contrast) × redirections onto
/// failing targets (the read-only `/usr`, a missing directory or file, a directory, a
/// closed fd) and succeeding ones × errexit off, or on by flag, `set -e`,
/// `set -o errexit`, later in the script or from a function.
pub struct ErrexitCase {
    /// bash's options before the script (`-c` last).
    pub options: &'static str,
    pub script: String,
    /// errexit is on somewhere, the compound is one whose redirection busybox does not
    /// check (`{ }`, `if`, `for`, `while`, `until`, `case`, wherever it sits) and the
    /// redirection may fail: the fix must refuse it.
    pub must_refuse: bool,
}

/// `R` marks the redirection; `true`: busybox skips `set -e` when it fails there.
const ERREXIT_COMMANDS: &[(&str, bool)] = &[
    ("{ printf 'in\\n'; } R", true),
    ("if true; then printf 'in\\n'; fi R", true),
    ("for i in 1; do printf 'in %s\\n' \"$i\"; done R", true),
    ("while read -r l; do printf 'in %s\\n' \"$l\"; done R", true),
    ("until false; do printf 'in\\n'; break; done R", true),
    ("case a in a) printf 'in\\n' ;; esac R", true),
    ("{ { printf 'in\\n'; } R; printf 'mid\\n'; }", true),
    (
        "f() { for i in 1; do printf 'in\\n'; done R; printf 'mid\\n'; }; f",
        true,
    ),
    ("true && { printf 'in\\n'; } R", true),
    ("{ printf 'in\\n'; } R || printf 'or\\n'", true),
    ("! { printf 'in\\n'; } R", true),
    ("x=$({ printf 'in\\n'; } R); printf '%s\\n' \"$x\"", true),
    // busybox checks these itself: a subshell (`evalsubshell`), a function body (at
    // the call, in `evalcommand`), a function call, builtins and programs.
    ("( printf 'in\\n' ) R", false),
    ("f() { printf 'in\\n'; } R; f", false),
    ("f() { printf 'in\\n'; }; f R", false),
    ("true R", false),
    ("printf 'in\\n' R", false),
    ("cat R", false),
];

/// Redirections and whether they may fail by their kind (any file but `/dev/null`, a
/// copy of an fd above 2). Not `<` from a directory: `read` then fails, bash says so on
/// stderr and dash and busybox do not (the loop ends alike).
const ERREXIT_REDIRECTIONS: &[(&str, bool)] = &[
    ("> /usr/out", true),
    ("> /work/nodir/out", true),
    ("> /work/empty", true),
    ("> /tmp/out", true),
    ("> /dev/null", false),
    (">> /usr/out", true),
    (">> /tmp/out", true),
    ("2> /work/nodir/err", true),
    ("2> /tmp/err", true),
    ("< /work/missing", true),
    ("< /work/in.txt", true),
    (">&5", true),
    ("2>&1", false),
];

/// bash's options and a script prefix: errexit off, then each way to turn it on.
const ERREXIT_MODES: &[(&str, &str, bool)] = &[
    ("-c", "", false),
    ("-e -c", "", true),
    ("-ec", "", true),
    // Not `-x`: each shell words its traces, and `2>&1` sends them to stdout.
    ("-aec", "", true),
    ("-o errexit -c", "", true),
    ("-c", "set -e; ", true),
    ("-c", "set -o errexit; ", true),
    ("-c", "printf 'start\\n'; set -e\n", true),
    ("-c", "on() { set -e; }; on; ", true),
];

pub fn errexit_cases() -> Vec<ErrexitCase> {
    let mut cases = Vec::new();
    for &(command, busybox_skips) in ERREXIT_COMMANDS {
        for &(redirection, may_fail) in ERREXIT_REDIRECTIONS {
            for &(options, prefix, errexit) in ERREXIT_MODES {
                cases.push(ErrexitCase {
                    options,
                    script: format!(
                        "{prefix}{}; printf 'after\\n'",
                        command.replace('R', redirection)
                    ),
                    must_refuse: errexit && busybox_skips && may_fail,
                });
            }
        }
    }
    cases
}

/// The files the errexit cases read: a list, a directory; `/usr` is read-only.
pub fn fill_errexit(dir: &std::path::Path) {
    std::fs::write(dir.join("work/in.txt"), "alpha\nbeta\n").expect("write");
    std::fs::create_dir_all(dir.join("work/empty")).expect("mkdir");
}

/// Like [`DRIVER`], for `SHELL OPTIONS SCRIPT OPTIONS SCRIPT …`: `OPTIONS` is split into
/// bash's words. A case's records read `case N 1`.
const OPTIONS_DRIVER: &str = r#"set -f; shell=$1; shift
c=0
while [ "$#" -ge 2 ]; do
  c=$((c + 1)); options=$1; script=$2; shift 2
  out=$("$shell" $options "$script" 2>/tmp/.err </dev/null; printf '\036%s' "$?")
  printf '\036case %s 1\036%s\036' "$c" "$out"
  cat /tmp/.err; rm -f /tmp/.err
done
"#;

/// One result per case for `shell`.
pub fn run_errexit_chunk(
    sandbox: &Sandbox,
    id: u32,
    shell: &str,
    cases: &[&ErrexitCase],
) -> Vec<Outcome> {
    let mut args: Vec<&str> = vec!["-c", OPTIONS_DRIVER, "driver", shell];
    for case in cases {
        args.push(case.options);
        args.push(&case.script);
    }
    let run = sandbox.run(id, "/bb/sh", &args, fill_errexit);
    assert_eq!(run.status, Some(0), "driver under {shell}: {run:?}");
    let scripts: Vec<&str> = cases.iter().map(|c| c.script.as_str()).collect();
    records(&run.stdout, shell, &scripts, 1)
        .into_iter()
        .map(|mut per_case| per_case.remove(0))
        .collect()
}
