//! The arguments the allow-listed builtins with a grammar of their own may take: `set`,
//! `printf`, `test`/`[`, `kill` and `trap` (see `builtins.rs` for the list itself).

use super::{no, Parser, Word, R};

pub(super) fn show(text: &[u8]) -> String {
    String::from_utf8_lossy(text).into_owned()
}

pub(super) fn literal_starts_dash(word: &Word) -> bool {
    word.literal && word.text.first() == Some(&b'-')
}

const SIGNALS: &[&str] = &[
    "HUP", "INT", "QUIT", "KILL", "TERM", "USR1", "USR2", "STOP", "CONT", "ALRM",
];

fn signal_number(text: &[u8]) -> bool {
    !text.is_empty()
        && text.len() <= 2
        && text.iter().all(u8::is_ascii_digit)
        && String::from_utf8_lossy(text)
            .parse::<u8>()
            .is_ok_and(|n| n <= 31)
}

fn signal_name(text: &[u8]) -> bool {
    SIGNALS.iter().any(|s| s.as_bytes() == text)
}

pub(super) fn set(parser: &mut Parser, args: &[Word]) -> R<()> {
    if args.is_empty() {
        return no("set without arguments");
    }
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        i += 1;
        if arg.is("--") {
            return Ok(());
        }
        if !arg.literal {
            return no("set with an expansion before --");
        }
        let (minus, flags) = match arg.text.first() {
            Some(b'-') => (true, &arg.text[1..]),
            Some(b'+') => (false, &arg.text[1..]),
            // `set a b`: new positional parameters, as after `--`.
            _ => return Ok(()),
        };
        if flags.is_empty() {
            return no("set - or set +");
        }
        for &flag in flags {
            match flag {
                b'e' => parser.errexit |= minus,
                b'x' | b'v' | b'f' | b'C' | b'a' => {}
                b'u' => return no("set -u (bash and sh exit with other codes)"),
                b'o' => {
                    let Some(option) = args.get(i) else {
                        return no("set -o without a name");
                    };
                    i += 1;
                    let name = set_option(option)?;
                    parser.errexit |= minus && name == "errexit";
                }
                _ => return no(format!("set -{}", char::from(flag))),
            }
        }
    }
    Ok(())
}

/// A `-o NAME` (of `set` or bash itself) that all three shells know alike.
pub(super) fn set_option(option: &Word) -> R<&'static str> {
    const ALLOWED: &[&str] = &[
        "errexit",
        "xtrace",
        "verbose",
        "noglob",
        "noclobber",
        "allexport",
    ];
    let text = show(&option.text);
    if !option.literal {
        return no("set -o with an expansion");
    }
    match ALLOWED.iter().find(|a| **a == text) {
        Some(found) => Ok(found),
        None if text == "nounset" => no("set -o nounset (bash and sh exit with other codes)"),
        None => no(format!("set -o {text}")),
    }
}

/// Checks the format; returns, per conversion, whether it is numeric.
pub(super) fn printf_format(format: &[u8]) -> R<Vec<bool>> {
    let mut conversions = Vec::new();
    let mut i = 0;
    while i < format.len() {
        match format[i] {
            b'\\' => match format.get(i + 1) {
                Some(b'n' | b't' | b'r' | b'\\') => i += 2,
                _ => return no("printf escapes other than \\n \\t \\r \\\\"),
            },
            b'%' => {
                i += 1;
                if format.get(i) == Some(&b'%') {
                    i += 1;
                    continue;
                }
                while matches!(format.get(i), Some(b'-' | b'+' | b' ' | b'#' | b'0')) {
                    i += 1;
                }
                while format.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                if format.get(i) == Some(&b'.') {
                    i += 1;
                    while format.get(i).is_some_and(u8::is_ascii_digit) {
                        i += 1;
                    }
                }
                match format.get(i) {
                    Some(b's' | b'c') => {
                        conversions.push(false);
                        i += 1;
                    }
                    Some(b'd' | b'i' | b'u' | b'o' | b'x' | b'X') => {
                        conversions.push(true);
                        i += 1;
                    }
                    Some(&c) => return no(format!("printf %{}", char::from(c))),
                    None => return no("printf with a trailing %"),
                }
            }
            _ => i += 1,
        }
    }
    Ok(conversions)
}

/// A numeric conversion fed a missing, empty or non-numeric argument prints 0 in bash
/// and fails in busybox: every numeric slot needs an argument that is always an integer.
pub(super) fn printf_arguments(parser: &mut Parser, numeric: &[bool], args: &[Word]) -> R<()> {
    if numeric.is_empty() || !numeric.contains(&true) {
        return Ok(());
    }
    let rounds = args.len().div_ceil(numeric.len()).max(1);
    for slot in 0..rounds * numeric.len() {
        if numeric[slot % numeric.len()] {
            let Some(arg) = args.get(slot) else {
                return no("printf %d of a maybe non-number");
            };
            parser.require_integer(arg, "printf %d of a maybe non-number")?;
        }
    }
    Ok(())
}

/// Exactly the special parameter `$c` (`$!`, `$$`).
pub(super) fn is_special(word: &Word, c: u8) -> bool {
    word.text.is_empty() && word.expansions == 1 && word.special == Some(c)
}

pub(super) fn test(parser: &mut Parser, name: &[u8], args: &[Word]) -> R<()> {
    let mut args = args;
    if name == b"[" {
        match args.split_last() {
            Some((last, rest)) if last.is("]") => args = rest,
            _ => return no("[ without ]"),
        }
    }
    if args.len() > 4 {
        return no("test with more than 4 arguments");
    }
    // A glob can expand to any number of words, some looking like operators.
    if args.iter().any(|a| a.glob) {
        return no("a glob in test");
    }
    const UNARY: &[&str] = &[
        "-b", "-c", "-d", "-e", "-f", "-h", "-L", "-n", "-p", "-r", "-s", "-S", "-t", "-w", "-x",
        "-z",
    ];
    const BINARY: &[&str] = &["=", "!=", "-eq", "-ne", "-gt", "-ge", "-lt", "-le"];
    for arg in args.iter().filter(|a| a.literal) {
        let text = show(&arg.text);
        let operator_like = text.starts_with('-') && text.len() == 2
            || text.starts_with('-') && text[1..].chars().all(|c| c.is_ascii_lowercase())
            || matches!(
                text.as_str(),
                "==" | "<" | ">" | "(" | ")" | "=~" | "-a" | "-o"
            );
        if operator_like && !UNARY.contains(&text.as_str()) && !BINARY.contains(&text.as_str()) {
            return no(format!("test {text}"));
        }
    }
    // The value of an expansion is the attacker's. Where test reads an operator (the
    // first of two words, the middle of three) it must be written out; with four words
    // the grouping itself depends on the values (`!`, `(`, `-a`). An integer operand
    // must be one: `1\r` is 1 to dash and busybox and an error to bash.
    let operator_at: &[usize] = match args.len() {
        2 => &[0],
        3 => &[1],
        _ => &[],
    };
    for (i, arg) in args.iter().enumerate() {
        if arg.has_free_expansion() && (args.len() == 4 || operator_at.contains(&i)) {
            return no("test with an operator from an expansion");
        }
    }
    const INTEGER_OPERATORS: &[&str] = &["-eq", "-ne", "-gt", "-ge", "-lt", "-le"];
    for (i, arg) in args.iter().enumerate() {
        if arg.literal && INTEGER_OPERATORS.contains(&show(&arg.text).as_str()) {
            for operand in [i.checked_sub(1), Some(i + 1)].into_iter().flatten() {
                if let Some(operand) = args.get(operand) {
                    parser.require_integer(operand, "a test integer operand")?;
                }
            }
        }
    }
    Ok(())
}

pub(super) fn kill(args: &[Word]) -> R<()> {
    let mut rest = args;
    match rest.first() {
        Some(flag) if flag.is("-s") => {
            match rest.get(1) {
                Some(sig) if sig.literal && signal_name(&sig.text) => {}
                _ => return no("kill -s with this signal"),
            }
            rest = &rest[2..];
        }
        Some(flag) if literal_starts_dash(flag) => {
            let sig = &flag.text[1..];
            if !(signal_name(sig) || signal_number(sig)) {
                return no(format!("kill {}", show(&flag.text)));
            }
            rest = &rest[1..];
        }
        _ => {}
    }
    if rest.is_empty() {
        return no("kill without a process");
    }
    if rest
        .iter()
        .any(|a| a.literal && matches!(a.text.first(), Some(b'-' | b'%')))
    {
        return no("kill with job specs or options");
    }
    // A variable may hold `-1` (every process), `%1`, `` or `1\r`, read differently by
    // each shell: only `$!` and `$$` are always one pid.
    if rest
        .iter()
        .any(|a| !a.literal && !is_special(a, b'!') && !is_special(a, b'$'))
    {
        return no("kill of an expansion other than $! or $$");
    }
    Ok(())
}

pub(super) fn trap(parser: &mut Parser, args: &[Word]) -> R<()> {
    let Some((action, signals)) = args.split_first() else {
        return no("trap without arguments");
    };
    if signals.is_empty() {
        return no("trap without a signal");
    }
    if !action.literal {
        return no("a trap action with an expansion");
    }
    if action.text != b"-" && !action.text.is_empty() {
        let outer = (parser.in_function, parser.in_loop);
        parser.in_function = 0;
        parser.in_loop = 0;
        let checked = parser.nested(&action.text);
        (parser.in_function, parser.in_loop) = outer;
        checked?;
    }
    for signal in signals {
        let text = &signal.text[..];
        if !signal.literal {
            return no("a trap signal from an expansion");
        }
        if text == b"EXIT" || text == b"0" {
            return no("trap on EXIT (bash also runs it when killed)");
        }
        let allowed = [&b"HUP"[..], b"INT", b"QUIT", b"TERM", b"USR1", b"USR2"].contains(&text)
            || [&b"1"[..], b"2", b"3", b"15"].contains(&text);
        if !allowed {
            return no(format!("trap on {}", show(text)));
        }
    }
    Ok(())
}
