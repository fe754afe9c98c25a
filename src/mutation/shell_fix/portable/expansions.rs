//! Expansions after `$`: parameters (`$x`, `${x%pat}`, `${#x}`), command substitution
//! `$(…)` and arithmetic `$((…))`, and what each may yield (see the contract in
//! `portable.rs`).

use super::*;

/// bash evaluates a variable's value in `$((…))` as an expression (`a[$(cmd)]` runs
/// `cmd`, `1+1` is 2), dash and busybox want a number.
const ARITHMETIC_VALUE: &str = "an expansion in $((...))";

impl Parser<'_> {
    /// A variable in `$((…))`: the script must own it as an integer.
    fn arithmetic_variable(&mut self, name: &[u8]) {
        let why = format!("${} in $((...))", String::from_utf8_lossy(name));
        self.need_integer(name, why);
    }

    /// `$…` at the cursor.
    pub(super) fn dollar(&mut self, word: &mut Word, ctx: Ctx) -> R<()> {
        // `${a:-${a:-…}}` and `"$("$(…)")"` nest without passing through `command`.
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return no("deep nesting");
        }
        let result = self.dollar_inner(word, ctx);
        self.depth -= 1;
        result
    }

    pub(super) fn dollar_inner(&mut self, word: &mut Word, ctx: Ctx) -> R<()> {
        let next = self.peek_at(1);
        let exp = match next {
            Some(b'(') if self.peek_at(2) == Some(b'(') => {
                self.i += 3;
                self.arithmetic()?;
                Exp::Integer
            }
            Some(b'(') => {
                self.i += 2;
                let mark = self.loop_exits.len();
                // A subshell: its assignments never reach the main shell.
                self.nest += 1;
                let count = self.list(&[], true, true);
                self.nest -= 1;
                let count = count?;
                if self.peek() != Some(b')') {
                    return no("syntax the parser does not know");
                }
                self.i += 1;
                self.no_loop_exit(mark, "break or continue in $(...)")?;
                if count > 1 {
                    self.multi_subst = true;
                }
                Exp::Free
            }
            Some(b'{') => {
                self.i += 2;
                self.parameter(ctx)?
            }
            Some(b'\'') if ctx == Ctx::Unquoted => return no("$'...' strings"),
            Some(b'[') => return no("$[...] arithmetic"),
            Some(b'"') if ctx == Ctx::Unquoted => return no("$\"...\" strings"),
            Some(c) if is_name_start(c) => {
                let len = self.s[self.i + 1..]
                    .iter()
                    .take_while(|&&c| is_name_char(c))
                    .count();
                let name = &self.s[self.i + 1..self.i + 1 + len];
                builtins::check_read(name)?;
                self.record(name, None);
                self.i += 1 + len;
                Exp::Var(name.to_vec())
            }
            Some(b'0') if !self.zero_known => return no("$0"),
            Some(c)
                if c.is_ascii_digit() || matches!(c, b'?' | b'$' | b'!' | b'#' | b'@' | b'*') =>
            {
                self.reads_status |= c == b'?';
                self.i += 2;
                if matches!(c, b'?' | b'$' | b'!' | b'#') {
                    Exp::Special(c)
                } else {
                    Exp::Free
                }
            }
            Some(b'-') => return no("$-"),
            _ => {
                // A lone `$` is literal in every shell.
                word.text.push(b'$');
                self.i += 1;
                return Ok(());
            }
        };
        self.expanded(word, ctx, exp);
        Ok(())
    }

    /// After `${`: a plain parameter, `#NAME`, or NAME with a POSIX operator and word.
    /// What it yields: an integer (`${#NAME}`, `${?}` …), a plain variable, or free.
    pub(super) fn parameter(&mut self, ctx: Ctx) -> R<Exp> {
        if self.peek() == Some(b'!') {
            return no("${!var}");
        }
        let length = self.peek() == Some(b'#') && self.peek_at(1) != Some(b'}');
        if length {
            self.i += 1;
        }
        let rest = &self.s[self.i..];
        let name_len = match rest.first() {
            Some(&c) if is_name_start(c) => rest.iter().take_while(|&&c| is_name_char(c)).count(),
            Some(c) if c.is_ascii_digit() => rest.iter().take_while(|c| c.is_ascii_digit()).count(),
            Some(b'?' | b'$' | b'!' | b'#' | b'@' | b'*') => 1,
            Some(b'-') => return no("$-"),
            _ => return no("syntax the parser does not know"),
        };
        let name = &rest[..name_len];
        self.reads_status |= name == b"?";
        let special = !(is_name_start(name[0]) || name[0].is_ascii_digit());
        if special && (length || rest.get(1) != Some(&b'}')) {
            return no("operators on special parameters");
        }
        if name == b"0" && !self.zero_known {
            return no("$0");
        }
        if is_name_start(name[0]) {
            builtins::check_read(name)?;
            self.record(name, None);
        }
        self.i += name_len;
        let op = self.peek();
        match op {
            Some(b'}') => {
                self.i += 1;
                return Ok(if length {
                    Exp::Integer
                } else if matches!(name[0], b'?' | b'$' | b'!' | b'#') {
                    Exp::Special(name[0])
                } else if is_name_start(name[0]) {
                    Exp::Var(name.to_vec())
                } else {
                    Exp::Free
                });
            }
            Some(b'[') => return no("arrays"),
            _ if length => return no("syntax the parser does not know"),
            Some(b':') => match self.peek_at(1) {
                Some(b'-' | b'=' | b'+') => self.i += 2,
                Some(b'?') => return no("${var:?} (exit codes differ)"),
                _ => return no("${var:offset}"),
            },
            Some(b'-' | b'=' | b'+' | b'%' | b'#') => {
                self.i += 1;
                if matches!(op, Some(b'%' | b'#')) && self.peek() == op {
                    self.i += 1;
                }
            }
            Some(b'?') => return no("${var?} (exit codes differ)"),
            Some(b'/') => return no("${var/pat/rep}"),
            Some(b'^' | b',') => return no("${var^^}"),
            Some(b'@') => return no("${var@...}"),
            _ => return no("syntax the parser does not know"),
        }
        let assigns = self.s[..self.i].ends_with(b"=");
        if assigns {
            if !is_name_start(name[0]) {
                return no("syntax the parser does not know");
            }
            builtins::check_assigned(name)?;
            self.record(name, Some(false));
        }
        // `${x%PAT}` / `${x#PAT}`: PAT is a pattern (inside "…" too); an expansion in it
        // outside inner quotes brings an attacker-chosen pattern (`[^a]`, `[[.a.]]`, which
        // dash reads otherwise), and dash does not know `[^…]` written out either.
        let pattern = matches!(op, Some(b'%' | b'#'));
        let start = self.i;
        let mut inner = Word::default();
        loop {
            match self.peek() {
                None => return no("syntax the parser does not know"),
                Some(b'}') => {
                    if pattern {
                        self.pattern_text(start)?;
                        if inner.unquoted_free > 0 || !inner.unquoted_vars.is_empty() {
                            return no("an expansion in a ${x%pattern}");
                        }
                    }
                    self.i += 1;
                    return Ok(Exp::Free);
                }
                Some(b'{') => return no("{ inside ${...}"),
                Some(b'\\' | b'\'' | b'"') if ctx == Ctx::Quoted => {
                    return no("quotes inside \"${...}\"")
                }
                Some(b'\\') => {
                    if self.peek_at(1).is_none() {
                        return no("syntax the parser does not know");
                    }
                    self.i += 2;
                }
                Some(b'\'') => {
                    let Some(len) = self.s[self.i + 1..].iter().position(|&c| c == b'\'') else {
                        return no("an unterminated quote");
                    };
                    self.i += len + 2;
                }
                Some(b'"') => self.double_quoted(&mut inner)?,
                // Unquoted for the pattern, whatever the outer quoting.
                Some(b'$') if pattern => self.dollar(&mut inner, Ctx::Unquoted)?,
                Some(b'`') if pattern => self.backquote(&mut inner, Ctx::Unquoted)?,
                Some(b'$') => self.dollar(&mut inner, ctx)?,
                Some(b'`') => self.backquote(&mut inner, ctx)?,
                Some(b'~') => return no("~ inside ${...}"),
                Some(_) => self.i += 1,
            }
        }
    }

    /// After `$((`: integer arithmetic up to `))`.
    pub(super) fn arithmetic(&mut self) -> R<()> {
        let mut depth = 0usize;
        loop {
            let Some(c) = self.peek() else {
                return no("syntax the parser does not know");
            };
            let rest = &self.s[self.i..];
            match c {
                b' ' | b'\t' | b'\n' => self.i += 1,
                b'(' => {
                    depth += 1;
                    self.i += 1;
                }
                b')' if depth > 0 => {
                    depth -= 1;
                    self.i += 1;
                }
                b')' if rest.starts_with(b"))") => {
                    self.i += 2;
                    return Ok(());
                }
                b')' => return no("syntax the parser does not know"),
                b'0'..=b'9' => {
                    let len = rest.iter().take_while(|c| c.is_ascii_digit()).count();
                    if len > 1 && c == b'0' {
                        return no("octal numbers in $((...))");
                    }
                    if rest.get(len).is_some_and(|&c| is_name_char(c) || c == b'#') {
                        return no("based numbers in $((...))");
                    }
                    if !super::is_portable_integer(&rest[..len]) {
                        return no("numbers beyond 64 bits in $((...))");
                    }
                    self.i += len;
                }
                _ if is_name_start(c) => {
                    let len = rest.iter().take_while(|&&c| is_name_char(c)).count();
                    let name = &rest[..len];
                    builtins::check_read(name)?;
                    self.record(name, None);
                    self.arithmetic_variable(name);
                    self.i += len;
                }
                b'$' => {
                    let mut sink = Word::default();
                    match self.peek_at(1) {
                        Some(b'{') => {
                            self.i += 2;
                            match self.parameter(Ctx::Quoted)? {
                                Exp::Integer | Exp::Special(_) => {}
                                Exp::Var(name) => self.arithmetic_variable(&name),
                                Exp::Free => return no(ARITHMETIC_VALUE),
                            }
                        }
                        Some(c) if is_name_start(c) || c.is_ascii_digit() || c == b'#' => {
                            self.dollar(&mut sink, Ctx::Quoted)?;
                            if sink.has_free_expansion() && sink.vars.is_empty() {
                                return no(ARITHMETIC_VALUE);
                            }
                            for name in &sink.vars {
                                self.arithmetic_variable(name);
                            }
                        }
                        _ => return no("$(...) inside $((...))"),
                    }
                }
                _ => {
                    let two = rest.get(..2).unwrap_or(rest);
                    const REFUSED: &[&[u8]] = &[
                        b"<<=", b">>=", b"**", b"++", b"--", b"+=", b"-=", b"*=", b"/=", b"%=",
                        b"&=", b"|=", b"^=",
                    ];
                    if let Some(op) = REFUSED.iter().find(|r| rest.starts_with(r)) {
                        return no(format!("{} in $((...))", String::from_utf8_lossy(op)));
                    }
                    if matches!(
                        two,
                        b"==" | b"!=" | b"<=" | b">=" | b"<<" | b">>" | b"&&" | b"||"
                    ) {
                        self.i += 2;
                    } else if matches!(c, b'/' | b'%') {
                        self.i += 1;
                        self.nonzero_literal()?;
                    } else if matches!(
                        c,
                        b'+' | b'-'
                            | b'*'
                            | b'<'
                            | b'>'
                            | b'&'
                            | b'|'
                            | b'^'
                            | b'!'
                            | b'~'
                            | b'?'
                            | b':'
                    ) {
                        self.i += 1;
                    } else if c == b'=' {
                        return no("assignments in $((...))");
                    } else {
                        return no(format!("{} in $((...))", char::from(c)));
                    }
                }
            }
        }
    }

    /// After `/` or `%` in arithmetic: a nonzero integer, so no division by zero error
    /// (bash, dash and busybox exit with different codes).
    pub(super) fn nonzero_literal(&mut self) -> R<()> {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        let rest = &self.s[self.i..];
        let len = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 || rest[0] == b'0' {
            return no("division by a variable in $((...))");
        }
        Ok(())
    }
}
