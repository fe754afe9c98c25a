//! Bash-only syntax that busybox `sh` rejects.
//!
//! Contract: [`bash_only_syntax`] names the first construct in a script that busybox `sh`
//! (ash) cannot run: arrays (`a=(…)`, `a+=(…)`, `${a[…]}`, `declare -a`/`local -a`,
//! `readarray`/`mapfile`), here-strings `<<<`, brace ranges `{a..b}`, `$'…'` strings and
//! the `function` keyword. Constructs busybox does support are not reported: `[[ ]]`,
//! `$((…))`, `${var}`, `${var:0:2}`, `${var//a/b}`. Quotes are tracked, so text inside
//! single quotes (`echo '<<<'`) or double quotes (except `${a[…]}`, which expands there)
//! is not a finding, and neither is a `#` comment. Here-document bodies are scanned as
//! code: a rare false positive only means we warn instead of rewriting.
//!
//! [`c_script`] finds the script in bash's arguments (`-c`, `-ec`, `-o pipefail -c`, …).

/// The first bash-only construct found in `script` (e.g. "arrays", "<<<"), or `None`.
pub fn bash_only_syntax(script: &str) -> Option<&'static str> {
    let b = script.as_bytes();
    let mut quote = Quote::None;
    let mut word_start = true;
    // Where a command name may stand: `function` only means something there.
    let mut command_position = true;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match quote {
            Quote::Single => {
                if c == b'\'' {
                    quote = Quote::None;
                }
                i += 1;
                continue;
            }
            Quote::Double => {
                match c {
                    b'\\' => i += 1,
                    b'"' => quote = Quote::None,
                    b'$' if array_subscript(&b[i..]) => return Some("arrays"),
                    _ => {}
                }
                i += 1;
                continue;
            }
            Quote::None => {}
        }
        if word_start && (c.is_ascii_alphabetic() || c == b'_') {
            let end = i + b[i..].iter().take_while(|&&c| is_name(c)).count();
            let word = &b[i..end];
            if let Some(found) = word_bashism(word, &b[end..], command_position) {
                return Some(found);
            }
            word_start = false;
            command_position = matches!(
                word,
                b"if" | b"then" | b"else" | b"elif" | b"do" | b"while" | b"until" | b"time"
            );
            i = end;
            continue;
        }
        match c {
            b'\\' => i += 1,
            b'\'' => quote = Quote::Single,
            b'"' => quote = Quote::Double,
            b'#' if word_start => {
                i += b[i..].iter().take_while(|&&c| c != b'\n').count();
                continue;
            }
            b'<' if b[i..].starts_with(b"<<<") => return Some("<<<"),
            b'$' if b.get(i + 1) == Some(&b'\'') => return Some("$'...'"),
            b'$' if array_subscript(&b[i..]) => return Some("arrays"),
            b'{' if (i == 0 || b[i - 1] != b'$') && brace_range(&b[i..]) => return Some("{a..b}"),
            _ => {}
        }
        let separator = matches!(
            c,
            b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'{' | b'}' | b'`' | b'!'
        );
        let blank = matches!(c, b' ' | b'\t' | b'\r');
        word_start = separator || blank;
        command_position = separator || (blank && command_position);
        i += 1;
    }
    None
}

/// The `-c` script among a shell's arguments (after argv[0]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CScript<'a> {
    /// No `-c`: a script file or an interactive shell.
    None,
    Text(&'a str),
    /// An argument that matters is not a string (odd JSON): decide nothing.
    Unknown,
}

/// Finds the `-c` script: options come first (`-c`, combined `-ec`/`-xc`, `+e`, long
/// `--login`; `-o NAME` takes the next argument), and with `-c` the first operand is the
/// script. `None` entries stand for non-string JSON values.
pub fn c_script<'a>(args: &[Option<&'a str>]) -> CScript<'a> {
    let mut has_c = false;
    let mut i = 0;
    while let Some(&arg) = args.get(i) {
        let Some(arg) = arg else {
            return CScript::Unknown;
        };
        if arg == "--" || arg == "-" {
            i += 1;
            break;
        }
        let Some(flags) = arg.strip_prefix('-').or_else(|| arg.strip_prefix('+')) else {
            break;
        };
        i += 1;
        if arg.starts_with("--") {
            continue;
        }
        has_c |= arg.starts_with('-') && flags.contains('c');
        if flags.ends_with('o') || flags.ends_with('O') {
            i += 1; // `-o pipefail`: the option name is not the script
        }
    }
    match (has_c, args.get(i)) {
        (false, _) | (true, None) => CScript::None,
        (true, Some(Some(script))) => CScript::Text(script),
        (true, Some(None)) => CScript::Unknown,
    }
}

#[derive(Clone, Copy)]
enum Quote {
    None,
    Single,
    Double,
}

fn is_name(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A word that starts after a blank or separator: `name=(`, `function f` (at command
/// position), `declare -a`, `mapfile`.
fn word_bashism(word: &[u8], rest: &[u8], command_position: bool) -> Option<&'static str> {
    if rest.starts_with(b"=(") || rest.starts_with(b"+=(") {
        return Some("arrays");
    }
    let blank = rest
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    let next = &rest[blank..];
    let ends_word = rest.is_empty() || blank > 0 || matches!(rest[0], b';' | b'\n' | b'&' | b'|');
    match word {
        b"function"
            if command_position && blank > 0 && next.first().is_some_and(|&c| is_name(c)) =>
        {
            Some("function")
        }
        b"readarray" | b"mapfile" if ends_word => Some("arrays"),
        b"declare" | b"typeset" | b"local" if blank > 0 => {
            let option = &next[..next
                .iter()
                .take_while(|&&c| !c.is_ascii_whitespace())
                .count()];
            let array = option.first() == Some(&b'-')
                && option[1..].iter().any(|&c| c == b'a' || c == b'A');
            array.then_some("arrays")
        }
        _ => None,
    }
}

/// `${name[` at the start of `text`.
fn array_subscript(text: &[u8]) -> bool {
    let Some(rest) = text.strip_prefix(b"${") else {
        return false;
    };
    let rest = rest.strip_prefix(b"!").unwrap_or(rest);
    let name = rest.iter().take_while(|&&c| is_name(c)).count();
    name > 0 && rest.get(name) == Some(&b'[')
}

/// `{a..b}` or `{1..10..2}` at the start of `text`.
fn brace_range(text: &[u8]) -> bool {
    let Some(end) = text.iter().position(|&c| c == b'}') else {
        return false;
    };
    let inner = &text[1..end];
    let mut parts = inner.split(|&c| c == b'.');
    // `a..b` splits into ["a", "", "b"]; a step adds ["", "n"].
    let word = |p: &[u8]| {
        let digits = p.strip_prefix(b"-").unwrap_or(p);
        !digits.is_empty() && digits.iter().all(|&c| c.is_ascii_alphanumeric())
    };
    let (Some(a), Some(gap), Some(z)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if !(word(a) && gap.is_empty() && word(z)) {
        return false;
    }
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => true,
        (Some(gap), Some(step), None) => gap.is_empty() && word(step),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let cases: &[(&str, Option<&str>)] = &[
            ("a=(1 2 3)", Some("arrays")),
            ("x=1; list+=(x)", Some("arrays")),
            ("echo ${a[0]}", Some("arrays")),
            ("echo \"${a[@]}\"", Some("arrays")),
            ("echo ${!a[@]}", Some("arrays")),
            ("declare -a xs", Some("arrays")),
            ("declare -rA map", Some("arrays")),
            ("f() { local -a xs; }", Some("arrays")),
            ("mapfile lines < f", Some("arrays")),
            ("cat <<< \"$x\"", Some("<<<")),
            ("for i in {1..5}; do :; done", Some("{a..b}")),
            ("echo {a..z}", Some("{a..b}")),
            ("echo {0..10..2}", Some("{a..b}")),
            ("echo $'a\\tb'", Some("$'...'")),
            ("function cleanup { :; }", Some("function")),
            ("true\nfunction f() { :; }", Some("function")),
            // Fine in busybox sh.
            ("[[ -f x ]] && echo ok", None),
            ("echo $((1 + 2))", None),
            ("echo ${var} ${var:-x} ${v:0:2} ${v//a/b}", None),
            ("f() { local x=1; declare y; }", None),
            ("echo {a,b} {} {.} {a.b} {..} ${x..y}", None),
            ("x=$(echo hi)", None),
            // Quoted or commented: not code.
            ("echo '<<<' 'a=(1)' '${a[0]}' \"<<<\" \"{1..3}\"", None),
            ("echo \"$'x'\"", None),
            ("echo \\$'x'", None),
            ("echo hi # a=(1) <<< {1..2}", None),
            ("echo function f", None),
            ("myfunction f", None),
            ("if true; then function f { :; }; fi", Some("function")),
            ("echo a#<<<", Some("<<<")),
            ("", None),
        ];
        for (script, want) in cases {
            assert_eq!(bash_only_syntax(script), *want, "{script:?}");
        }
    }

    #[test]
    fn finds_c_script() {
        let cases: &[(&[Option<&str>], CScript)] = &[
            (&[Some("-c"), Some("s")], CScript::Text("s")),
            (&[Some("-ec"), Some("s"), Some("x")], CScript::Text("s")),
            (&[Some("-x"), Some("-c"), Some("s")], CScript::Text("s")),
            (
                &[Some("-o"), Some("pipefail"), Some("-c"), Some("s")],
                CScript::Text("s"),
            ),
            (
                &[Some("--login"), Some("-c"), Some("s")],
                CScript::Text("s"),
            ),
            (&[Some("+e"), Some("-c"), Some("s")], CScript::Text("s")),
            (&[Some("run.sh"), Some("-c")], CScript::None),
            (&[Some("-e"), Some("run.sh")], CScript::None),
            (&[Some("-c")], CScript::None),
            (&[], CScript::None),
            (&[Some("-c"), None], CScript::Unknown),
            (&[None, Some("-c"), Some("s")], CScript::Unknown),
        ];
        for (args, want) in cases {
            assert_eq!(c_script(args), *want, "{args:?}");
        }
    }
}
