//! The command level of the parser: lists, pipelines, compound commands (`if`, loops,
//! `case`), function definitions and simple commands, with the checks each makes (see the
//! contract in `portable.rs`). Words below it are in `words.rs`.

use super::variables::assigned_integer;
use super::*;

impl<'a> Parser<'a> {
    pub(super) fn program(&mut self) -> R<()> {
        self.list(&[], false, true)?;
        if self.i < self.s.len() {
            return no("syntax the parser does not know");
        }
        if !self.pending.is_empty() {
            return no("a here-document without its end line");
        }
        Ok(())
    }

    /// A list of and-or lists up to EOF, one of `ends` (reserved words), `)` when
    /// `paren`, or `;;`. Returns how many and-or lists it held.
    pub(super) fn list(&mut self, ends: &[&[u8]], paren: bool, allow_empty: bool) -> R<usize> {
        let mut count = 0;
        loop {
            self.linebreak()?;
            match self.peek() {
                None => break,
                Some(b')') if paren => break,
                Some(b';') if self.peek_at(1) == Some(b';') => break,
                _ => {}
            }
            if self.at_reserved(ends) {
                break;
            }
            let mark = self.loop_exits.len();
            let events = self.events.len();
            let conditional = self.and_or()?;
            count += 1;
            self.blank();
            let background = self.peek() == Some(b'&') && self.peek_at(1) != Some(b'>');
            if background {
                self.no_loop_exit(mark, "break or continue in the background")?;
            }
            if conditional || background {
                self.events[events..].iter_mut().for_each(|e| e.top = false);
            }
            match self.peek() {
                Some(b';') if self.peek_at(1) == Some(b';') => {}
                Some(b';') if self.peek_at(1) == Some(b'&') => return no(";& in case"),
                Some(b';') => self.i += 1,
                Some(b'&') if self.peek_at(1) == Some(b'>') => return no("&>"),
                Some(b'&') => self.i += 1,
                Some(b'\n') | None => {}
                Some(b')') if paren => {}
                _ => return no("syntax the parser does not know"),
            }
        }
        if count == 0 && !allow_empty {
            return no("an empty command list");
        }
        Ok(count)
    }

    /// `true` when some of it may not run, or runs in a subshell (`&&`, `||`, `|`).
    pub(super) fn and_or(&mut self) -> R<bool> {
        let mut conditional = self.pipeline()?;
        loop {
            self.blank();
            if self.starts(b"&&") || self.starts(b"||") {
                self.i += 2;
                self.linebreak()?;
                self.pipeline()?;
                conditional = true;
            } else {
                return Ok(conditional);
            }
        }
    }

    /// `true` when it has several commands (each runs in a subshell).
    pub(super) fn pipeline(&mut self) -> R<bool> {
        self.blank();
        if self.raw_word() == b"!" {
            self.i += 1;
        }
        let mark = self.loop_exits.len();
        self.command()?;
        let mut commands = 1;
        loop {
            self.blank();
            if self.peek() == Some(b'|') && self.peek_at(1) != Some(b'|') {
                if self.peek_at(1) == Some(b'&') {
                    return no("|&");
                }
                self.i += 1;
                self.linebreak()?;
                self.command()?;
                commands += 1;
            } else {
                break;
            }
        }
        if commands > 1 {
            self.no_loop_exit(mark, "break or continue in a pipeline")?;
        }
        Ok(commands > 1)
    }

    /// Refuses a `break`/`continue` since `mark` that leaves the current loop level: it
    /// ran in a subshell.
    pub(super) fn no_loop_exit(&self, mark: usize, what: &str) -> R<()> {
        if self.loop_exits[mark..].iter().any(|&d| d <= self.in_loop) {
            return no(what);
        }
        Ok(())
    }

    pub(super) fn command(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return no("deep nesting");
        }
        let result = self.command_inner();
        self.depth -= 1;
        result
    }

    pub(super) fn command_inner(&mut self) -> R<()> {
        self.blank();
        let raw = self.raw_word();
        // Conditional or repeated bodies, and subshells: see [`VarEvent::top`].
        let nests = matches!(raw, b"if" | b"while" | b"until" | b"for" | b"case")
            || (self.peek() == Some(b'(') && self.peek_at(1) != Some(b'('));
        self.nest += usize::from(nests);
        let result = self.compound_or_simple(raw);
        self.nest -= usize::from(nests);
        result
    }

    pub(super) fn compound_or_simple(&mut self, raw: &'a [u8]) -> R<()> {
        let function_body = std::mem::take(&mut self.function_body);
        // How the warning names a compound whose failed redirection busybox lets pass
        // under `set -e`; `None` where busybox exits as bash and dash do: a subshell
        // (`evalsubshell`, checked in `evaltree`) and a function's body (checked at the
        // call, in `evalcommand`).
        let gap_name: Option<&str> = match raw {
            _ if function_body => None,
            b"if" => Some("if…fi"),
            b"while" => Some("while…done"),
            b"until" => Some("until…done"),
            b"for" => Some("for…done"),
            b"case" => Some("case…esac"),
            b"{" => Some("{ }"),
            _ => None,
        };
        match raw {
            b"if" => self.if_clause()?,
            b"while" | b"until" => self.loop_clause(raw.len())?,
            b"for" => self.for_clause()?,
            b"case" => self.case_clause()?,
            b"{" => {
                self.i += 1;
                self.list(&[b"}"], false, false)?;
                self.expect(b"}")?;
            }
            b"[[" | b"]]" => return no("[[ ]]"),
            b"function" => return no("the function keyword"),
            b"select" | b"coproc" | b"time" => return no(String::from_utf8_lossy(raw).into_owned()),
            _ if RESERVED.contains(&raw) => return no("syntax the parser does not know"),
            _ => {
                if self.peek() == Some(b'(') {
                    if self.peek_at(1) == Some(b'(') {
                        return no("(( ))");
                    }
                    self.i += 1;
                    let mark = self.loop_exits.len();
                    self.list(&[], true, false)?;
                    if self.peek() != Some(b')') {
                        return no("syntax the parser does not know");
                    }
                    self.i += 1;
                    self.no_loop_exit(mark, "break or continue in a subshell")?;
                } else if self.function_definition()? {
                    return Ok(());
                } else {
                    return self.simple_command();
                }
            }
        }
        self.trailing_redirections(gap_name)
    }

    /// The redirections after a compound command. `gap_name`: the compound is one whose
    /// failed redirection busybox does not exit for under `set -e` (see
    /// [`Parser::errexit_gap`]).
    pub(super) fn trailing_redirections(&mut self, gap_name: Option<&str>) -> R<()> {
        loop {
            self.blank();
            let Some(redirect) = self.redirection()? else {
                return Ok(());
            };
            if let (Some(name), true, None) = (gap_name, redirect.may_fail, &self.errexit_gap) {
                // Why first: a long warning loses its end.
                self.errexit_gap = Some(format!(
                    "busybox ignores set -e if {name} {} fails",
                    redirect.shown()
                ));
            }
        }
    }

    pub(super) fn simple_command(&mut self) -> R<()> {
        let mut name: Option<Word> = None;
        let mut args = Vec::new();
        let mut assigned: Vec<(String, bool)> = Vec::new();
        let mut assignments = 0;
        let mut redirections = 0;
        loop {
            self.blank();
            match self.peek() {
                None | Some(b'\n' | b';' | b'&' | b'|' | b')') => break,
                Some(b'(') => return no("syntax the parser does not know"),
                _ => {}
            }
            if self.redirection()?.is_some() {
                redirections += 1;
                continue;
            }
            let start = self.i;
            let word = self.word()?;
            if matches!(self.peek(), Some(b'<' | b'>')) {
                let raw = &self.s[start..self.i];
                if raw.len() > 1 && raw.iter().all(u8::is_ascii_digit) {
                    return no("fd numbers above 9");
                }
                if raw.first() == Some(&b'{') && raw.last() == Some(&b'}') {
                    return no("{fd} redirections");
                }
            }
            if name.is_none() {
                if let Some(var) = &word.assign {
                    builtins::check_assigned(var.as_bytes())?;
                    if self.peek() == Some(b'(') {
                        return no("arrays");
                    }
                    assigned.push((var.clone(), assigned_integer(&word, var.len())));
                    assignments += 1;
                    continue;
                }
                name = Some(word);
            } else {
                args.push(word);
            }
        }
        // `NAME=value cmd` sets NAME for `cmd` only: never an owned integer.
        for (var, integer) in &assigned {
            self.record(var.as_bytes(), Some(*integer && name.is_none()));
        }
        let Some(name) = name else {
            if assignments + redirections == 0 {
                return no("an empty command");
            }
            return Ok(());
        };
        if !name.literal {
            return no("a command name from an expansion");
        }
        if name.glob && name.text != b"[" {
            return no("a glob as a command name");
        }
        let kind = builtins::check_command(self, &name.text, &args)?;
        for arg in &args {
            self.pattern_word(arg)?;
        }
        match kind {
            builtins::Kind::External => {
                if assignments > 0 {
                    self.prefixed.push(name.text.clone());
                }
            }
            builtins::Kind::Regular => {}
            builtins::Kind::Special => {
                if assignments > 0 || redirections > 0 {
                    return no(format!(
                        "a redirection or assignment on {}",
                        String::from_utf8_lossy(&name.text)
                    ));
                }
            }
        }
        Ok(())
    }
}
