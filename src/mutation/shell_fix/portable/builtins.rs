//! The allow-list of builtins (with the arguments each may take) and the variables the
//! shells set themselves. Everything here was checked against bash 5.2, dash 0.5.12 and
//! busybox 1.36 `ash`; the differential test (`tests/shell_fix_differential.rs`) keeps
//! checking it.

use super::builtin_args::*;
use super::{no, Parser, Word, R};

/// How a command name runs.
pub(super) enum Kind {
    /// Not a builtin of any of the three shells: the image's program.
    External,
    /// An allowed regular builtin: `NAME=value` before it and redirections are fine.
    Regular,
    /// An allowed special builtin: dash exits when its redirection fails and keeps
    /// `NAME=value` assignments, bash does neither, so both are refused.
    Special,
}

/// Builtins and keywords of bash, dash and busybox `ash`: a name here that
/// [`check_command`] does not allow is a blocker, not an external program.
const ALL_BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "[[",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "cd",
    "chdir",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
];

pub(super) fn is_builtin(name: &[u8]) -> bool {
    ALL_BUILTINS.iter().any(|b| b.as_bytes() == name)
}

/// Variables bash (or only one of the shells) sets or treats specially: reading them
/// gives different values (`$UID` is empty in dash), assigning them differs too.
const SHELL_VARIABLES: &[&str] = &[
    "UID",
    "EUID",
    "RANDOM",
    "SRANDOM",
    "SECONDS",
    "LINENO",
    "PIPESTATUS",
    "FUNCNAME",
    "GROUPS",
    "HOSTNAME",
    "HOSTTYPE",
    "OSTYPE",
    "MACHTYPE",
    "SHLVL",
    "SHELLOPTS",
    "DIRSTACK",
    "EPOCHSECONDS",
    "EPOCHREALTIME",
    "REPLY",
    "OLDPWD",
    "OPTERR",
    "TMOUT",
    "TIMEFORMAT",
    "SHELL",
    "ENV",
    "MAIL",
    "MAILPATH",
    "MAILCHECK",
    "FCEDIT",
    "INPUTRC",
    "POSIXLY_CORRECT",
    "IGNOREEOF",
    "PROMPT_COMMAND",
    "GLOBIGNORE",
    "GLOBSORT",
    "EXECIGNORE",
    "FIGNORE",
    "COLUMNS",
    "LINES",
    "_",
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "CHILD_MAX",
    "OPTIND",
    "OPTARG",
];

const SHELL_PREFIXES: &[&str] = &["BASH", "COMP_", "READLINE_", "HIST"];

/// Set by every shell alike and fine to read, but assigning them means something else.
const ASSIGN_ONLY: &[&str] = &["PPID", "PWD", "CDPATH", "LANG", "LC_ALL", "LC_COLLATE"];

fn shell_variable(name: &[u8]) -> bool {
    let name = String::from_utf8_lossy(name);
    SHELL_VARIABLES.contains(&name.as_ref()) || SHELL_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A variable read as `$NAME`, `${NAME…}` or in `$((…))`.
pub(super) fn check_read(name: &[u8]) -> R<()> {
    if shell_variable(name) {
        return no(format!("${}", String::from_utf8_lossy(name)));
    }
    Ok(())
}

/// A variable assigned (`NAME=`, `read NAME`, `for NAME`, `export`, `unset`, `${NAME=}`).
pub(super) fn check_assigned(name: &[u8]) -> R<()> {
    let text = String::from_utf8_lossy(name);
    if shell_variable(name) || ASSIGN_ONLY.contains(&text.as_ref()) || text.starts_with("LC_") {
        return no(format!("assigning {text}"));
    }
    Ok(())
}

/// `exit`/`return`: a literal 0-255 or exactly `$?`. Any other value is the attacker's:
/// `-1`, `256`, `+1`, ` 1`, `1\r`, `--` each end differently in bash, dash and busybox.
pub(super) fn exit_code(args: &[Word]) -> R<()> {
    match args {
        [] => Ok(()),
        [code] if code.is_status() => Ok(()),
        [code] if !code.literal => no("exit with an expansion other than $?"),
        [code] => {
            let ok = !code.text.is_empty()
                && code.text.len() <= 3
                && code.text.iter().all(u8::is_ascii_digit)
                && show(&code.text).parse::<u16>().is_ok_and(|n| n <= 255);
            if ok {
                Ok(())
            } else {
                no("an exit status outside 0-255")
            }
        }
        _ => no("exit with several arguments"),
    }
}

/// Checks one simple command's name and arguments.
pub(super) fn check_command(parser: &mut Parser, name: &[u8], args: &[Word]) -> R<Kind> {
    let regular = Ok(Kind::Regular);
    let special = Ok(Kind::Special);
    match name {
        b"true" | b"false" => regular,
        b":" => special,
        b"echo" => {
            if args.first().is_some_and(literal_starts_dash) {
                return no("echo options");
            }
            // A glob or `~` expands to names that may hold a backslash or start with `-e`.
            if args
                .iter()
                .any(|a| !a.literal || a.glob || a.text.first() == Some(&b'~'))
            {
                return no("echo with an expansion (printf is portable)");
            }
            if args.iter().any(|a| a.text.contains(&b'\\')) {
                return no("echo with a backslash");
            }
            regular
        }
        b"printf" => {
            let Some(format) = args.first() else {
                return no("printf without a format");
            };
            if !format.literal || format.glob {
                return no("printf with a non-literal format");
            }
            if literal_starts_dash(format) {
                return no("printf options");
            }
            let numeric = printf_format(&format.text)?;
            printf_arguments(parser, &numeric, &args[1..])?;
            regular
        }
        b"cd" => {
            parser.fallible = true;
            match args {
                [] => no("cd without a directory"),
                // Several words: bash fails, dash and busybox take the first or swap.
                [dir] if dir.glob || dir.unquoted_expansion => no("cd with an unquoted $ or glob"),
                // Its value may be `-` (bash fails without OLDPWD, sh stays and prints
                // it), `-P`, `-e`…; `--` does not help (`cd -- -` is still OLDPWD).
                [dir] if dir.leads_with_expansion => no("cd to an expansion (may be -)"),
                [dir] if !dir.text.starts_with(b"-") => regular,
                _ => no("cd options"),
            }
        }
        b"pwd" if args.is_empty() => regular,
        b"pwd" => no("pwd options"),
        b"exit" => exit_code(args).and(special),
        b"return" => {
            if parser.in_function == 0 {
                return no("return outside a function");
            }
            exit_code(args).and(special)
        }
        b"break" | b"continue" => {
            if parser.in_loop == 0 {
                return no(format!("{} outside a loop", show(name)));
            }
            if !args.is_empty() {
                return no(format!("{} with a count", show(name)));
            }
            parser.loop_exits.push(parser.in_loop);
            special
        }
        b"set" => set(parser, args).and(special),
        b"export" | b"unset" => {
            if args.is_empty() {
                return no(format!("{} without names", show(name)));
            }
            for arg in args {
                let var = match &arg.assign {
                    Some(var) if name == b"export" => var.as_bytes(),
                    _ if arg.literal && super::is_identifier(&arg.text) => &arg.text[..],
                    _ => return no(format!("{} with this argument", show(name))),
                };
                check_assigned(var)?;
                parser.record(var, Some(false));
            }
            special
        }
        b"read" => {
            let mut names = args;
            if names.first().is_some_and(|a| a.is("-r")) {
                names = &names[1..];
            }
            if names.is_empty() {
                return no("read without a variable name");
            }
            for arg in names {
                if literal_starts_dash(arg) {
                    return no(format!("read {}", show(&arg.text)));
                }
                if !(arg.literal && super::is_identifier(&arg.text)) {
                    return no("read into a computed name");
                }
                check_assigned(&arg.text)?;
                parser.record(&arg.text, Some(false));
            }
            regular
        }
        b"test" | b"[" => test(parser, name, args).and(regular),
        b"wait" => {
            if args
                .iter()
                .any(|a| a.literal && matches!(a.text.first(), Some(b'-' | b'%')))
            {
                return no("wait options or job specs");
            }
            // bash warns about a pid that is not its child, sh says nothing: only `$!`
            // is always a child. A variable may hold `-n`, `%1`, ``, `1\r`.
            if args.iter().any(|a| !is_special(a, b'!')) {
                return no("wait for anything but $!");
            }
            regular
        }
        b"kill" => kill(args).and(regular),
        b"trap" => trap(parser, args).and(special),
        b"umask" => match args {
            [mode]
                if mode.literal
                    && (3..=4).contains(&mode.text.len())
                    && mode.text.iter().all(|c| (b'0'..=b'7').contains(c)) =>
            {
                regular
            }
            _ => no("umask without an octal mode"),
        },
        b"exec" => match args.first() {
            None => special,
            Some(program) if program.literal && !is_builtin(&program.text) => {
                if literal_starts_dash(program) {
                    return no("exec options");
                }
                special
            }
            Some(_) => no("exec of a builtin or an expansion"),
        },
        _ if is_builtin(name) => no(show(name)),
        _ => {
            // bash puts SHLVL and `_` in its children's environment, dash does not.
            let program = name.rsplit(|&c| c == b'/').next().unwrap_or(name);
            let runs_command = |a: &Word| {
                !(a.literal && (a.text.first() == Some(&b'-') || a.text.contains(&b'=')))
            };
            let lists = match program {
                b"env" => !args.iter().any(runs_command),
                b"printenv" => args.is_empty(),
                _ => false,
            };
            if lists {
                return no("an env listing (bash adds SHLVL, _)");
            }
            Ok(Kind::External)
        }
    }
}
