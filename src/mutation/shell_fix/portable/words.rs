//! Words, expansions, redirections and here-documents: the part of the parser below
//! the command level (see the contract in `portable.rs`).

use super::{is_meta, is_name_char, is_name_start, no, show, Ctx, Exp, Heredoc, Parser, Word, R};

/// One redirection the parser accepted.
pub(super) struct Redirect<'a> {
    /// Opening it may fail: a file (other than `/dev/null`), or a copy of a descriptor
    /// above 2 (which may be closed). Here-documents and copies of 0-2 (open in every
    /// container, and nothing allowed can close them) do not fail.
    pub(super) may_fail: bool,
    /// The fd digit and operator as written (`2>>`), and the copied fd of `>&N`/`<&N`.
    written: &'a [u8],
    copied: Option<u8>,
}

impl Redirect<'_> {
    /// How a warning shows it: `>file`, `2>>file`, `<file`, `>&5`.
    pub(super) fn shown(&self) -> String {
        match self.copied {
            Some(fd) => format!("{}{}", show(self.written), char::from(fd)),
            None => format!("{}file", show(self.written)),
        }
    }
}

impl<'a> Parser<'a> {
    /// A redirection at the cursor, consumed; `None` when there is none.
    pub(super) fn redirection(&mut self) -> R<Option<Redirect<'a>>> {
        let start = self.i;
        let mut j = self.i;
        if self.peek().is_some_and(|c| c.is_ascii_digit())
            && matches!(self.peek_at(1), Some(b'<' | b'>'))
        {
            j += 1;
        }
        let rest = &self.s[j..];
        let (op, len): (&[u8], usize) = if rest.starts_with(b"<<<") {
            return no("<<< here-strings");
        } else if rest.starts_with(b"<(") || rest.starts_with(b">(") {
            return no("process substitution");
        } else if rest.starts_with(b"<>") {
            return no("<>");
        } else if rest.starts_with(b">&") && j == self.i && !self.fd_follows(j + 2) {
            return no(">&file");
        } else if rest.starts_with(b"<<-") {
            (b"<<-", 3)
        } else {
            match rest {
                [b'<', b'<', ..] => (b"<<", 2),
                [b'>', b'>', ..] => (b">>", 2),
                [b'>', b'|', ..] => (b">|", 2),
                [b'<', b'&', ..] => (b"<&", 2),
                [b'>', b'&', ..] => (b">&", 2),
                [b'<', ..] => (b"<", 1),
                [b'>', ..] => (b">", 1),
                _ => return Ok(None),
            }
        };
        let written = &self.s[start..j + len];
        self.i = j + len;
        self.blank();
        if self.peek().is_none_or(is_meta) {
            return no("syntax the parser does not know");
        }
        let target = self.word()?;
        let mut redirect = Redirect {
            may_fail: false,
            written,
            copied: None,
        };
        match op {
            b"<<" | b"<<-" => {
                if !target.literal || target.text.is_empty() {
                    return no("a here-document delimiter with $");
                }
                if self.in_heredoc {
                    return no("a here-document inside a here-document");
                }
                self.pending.push(Heredoc {
                    delimiter: target.text,
                    strip_tabs: op == b"<<-",
                    expand: !target.quoted,
                });
            }
            b"<&" | b">&" => {
                if target.is("-") {
                    // bash fails a read from a closed fd and leaves the variable unset, sh
                    // sets it empty.
                    return no("closing a file descriptor");
                }
                let ok =
                    target.literal && target.text.len() == 1 && target.text[0].is_ascii_digit();
                if !ok {
                    return no(">&file");
                }
                redirect.may_fail = target.text[0] > b'2';
                redirect.copied = Some(target.text[0]);
            }
            _ => {
                if target.unquoted_expansion {
                    return no("an unquoted $ in a redirection target");
                }
                if target.glob {
                    return no("a glob in a redirection target");
                }
                if target.text.starts_with(b"/dev/tcp/") || target.text.starts_with(b"/dev/udp/") {
                    return no("/dev/tcp redirections");
                }
                if !target.is("/dev/null") {
                    self.fallible = true;
                    redirect.may_fail = true;
                }
            }
        }
        Ok(Some(redirect))
    }

    /// `>&` followed by a single digit or `-` and then a word end: fd duplication.
    pub(super) fn fd_follows(&self, at: usize) -> bool {
        let mut k = at;
        while matches!(self.s.get(k), Some(b' ' | b'\t')) {
            k += 1;
        }
        match self.s.get(k) {
            Some(c) if c.is_ascii_digit() || *c == b'-' => {
                self.s.get(k + 1).is_none_or(|&c| is_meta(c))
            }
            _ => false,
        }
    }

    pub(super) fn heredoc_body(&mut self, heredoc: &Heredoc) -> R<()> {
        self.in_heredoc = true;
        let result = self.heredoc_lines(heredoc);
        self.in_heredoc = false;
        result
    }

    pub(super) fn heredoc_lines(&mut self, heredoc: &Heredoc) -> R<()> {
        loop {
            if self.i >= self.s.len() {
                return no("a here-document without its end line");
            }
            let mut start = self.i;
            if heredoc.strip_tabs {
                while self.s.get(start) == Some(&b'\t') {
                    start += 1;
                }
            }
            let end = self.s[start..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(self.s.len(), |p| start + p);
            if self.s[start..end] == heredoc.delimiter[..] {
                self.i = (end + 1).min(self.s.len());
                return Ok(());
            }
            if !heredoc.expand {
                self.i = end + 1;
                continue;
            }
            self.i = start;
            let mut sink = Word::default();
            loop {
                match self.peek() {
                    None => break,
                    Some(b'\n') => {
                        self.i += 1;
                        break;
                    }
                    Some(b'\\') => match self.peek_at(1) {
                        Some(b'\n') | None => return no("a backslash at a here-document line end"),
                        _ => self.i += 2,
                    },
                    Some(b'$') => self.dollar(&mut sink, Ctx::Quoted)?,
                    Some(b'`') => self.backquote(&mut sink, Ctx::Quoted)?,
                    Some(_) => self.i += 1,
                }
            }
        }
    }

    /// One shell word at the cursor (up to an unquoted metacharacter).
    pub(super) fn word(&mut self) -> R<Word> {
        let start = self.i;
        let mut word = Word {
            literal: true,
            ..Word::default()
        };
        let mut braces = 0usize;
        // A path segment that starts with `.`: a glob in it matches `.`/`..` in dash only.
        let mut segment_dot = false;
        let mut segment_start = true;
        while let Some(c) = self.peek() {
            if is_meta(c) {
                break;
            }
            let at_segment_start = segment_start;
            segment_start = false;
            match c {
                b'\\' => match self.peek_at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(next) => {
                        word.text.push(next);
                        word.quoted = true;
                        self.i += 2;
                    }
                    None => return no("a backslash at the end"),
                },
                b'\'' => {
                    let Some(len) = self.s[self.i + 1..].iter().position(|&c| c == b'\'') else {
                        return no("an unterminated quote");
                    };
                    word.text
                        .extend_from_slice(&self.s[self.i + 1..self.i + 1 + len]);
                    word.quoted = true;
                    self.i += len + 2;
                }
                b'"' => self.double_quoted(&mut word)?,
                b'$' => self.dollar(&mut word, Ctx::Unquoted)?,
                b'`' => self.backquote(&mut word, Ctx::Unquoted)?,
                b'{' => {
                    braces += 1;
                    word.text.push(c);
                    self.i += 1;
                }
                b'}' => {
                    braces = braces.saturating_sub(1);
                    word.text.push(c);
                    self.i += 1;
                }
                b',' if braces > 0 => return no("brace expansion {a,b}"),
                b'.' if braces > 0 && self.peek_at(1) == Some(b'.') => {
                    return no("brace expansion {a..b}")
                }
                b'~' if self.i != start => return no("~ inside a word"),
                b'~' if matches!(self.peek_at(1), Some(b'+' | b'-')) => return no("~+ and ~-"),
                b'~' if self.peek_at(1).is_some_and(|c| c != b'/' && !is_meta(c)) => {
                    return no("~user (busybox drops what follows an unknown user)")
                }
                b'*' | b'?' | b'[' => {
                    if c == b'[' && matches!(self.peek_at(1), Some(b'^')) {
                        return no("[^...] globs");
                    }
                    if c == b'['
                        && self.peek_at(1) == Some(b'[')
                        && matches!(self.peek_at(2), Some(b'.' | b'='))
                    {
                        return no("[[.x.]] or [[=x=]] in a pattern");
                    }
                    if segment_dot {
                        return no("globs on a leading . (dash matches . and ..)");
                    }
                    word.glob = true;
                    word.text.push(c);
                    self.i += 1;
                }
                _ => {
                    if c == b'/' {
                        segment_start = true;
                        segment_dot = false;
                    } else if at_segment_start && c == b'.' {
                        segment_dot = true;
                    }
                    word.text.push(c);
                    self.i += 1;
                }
            }
        }
        let raw = &self.s[start..self.i];
        let name_len = raw.iter().take_while(|&&c| is_name_char(c)).count();
        if name_len > 0 && is_name_start(raw[0]) {
            match raw.get(name_len) {
                Some(b'=') => {
                    word.assign = Some(String::from_utf8_lossy(&raw[..name_len]).into_owned())
                }
                Some(b'+') if raw.get(name_len + 1) == Some(&b'=') => return no("+= assignments"),
                Some(b'[') if raw.contains(&b'=') => return no("arrays"),
                _ => {}
            }
        }
        Ok(word)
    }

    pub(super) fn double_quoted(&mut self, word: &mut Word) -> R<()> {
        word.quoted = true;
        self.i += 1;
        loop {
            match self.peek() {
                None => return no("an unterminated quote"),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(b'\\') => match self.peek_at(1) {
                    Some(b'\n') => self.i += 2,
                    Some(next @ (b'$' | b'`' | b'"' | b'\\')) => {
                        word.text.push(next);
                        self.i += 2;
                    }
                    Some(next) => {
                        word.text.extend_from_slice(&[b'\\', next]);
                        self.i += 2;
                    }
                    None => return no("an unterminated quote"),
                },
                Some(b'$') => self.dollar(word, Ctx::Quoted)?,
                Some(b'`') => self.backquote(word, Ctx::Quoted)?,
                Some(c) => {
                    word.text.push(c);
                    self.i += 1;
                }
            }
        }
    }

    pub(super) fn expanded(&self, word: &mut Word, ctx: Ctx, exp: Exp) {
        if word.text.is_empty() && word.expansions == 0 {
            word.leads_with_expansion = true;
        }
        word.literal = false;
        word.expansions += 1;
        match &exp {
            Exp::Integer => word.integer_expansions += 1,
            Exp::Special(c) => {
                word.integer_expansions += 1;
                word.special = Some(*c);
            }
            Exp::Var(name) => word.vars.push(name.clone()),
            Exp::Free => {}
        }
        if ctx == Ctx::Unquoted {
            word.unquoted_expansion = true;
            match exp {
                Exp::Free => word.unquoted_free += 1,
                Exp::Var(name) => word.unquoted_vars.push(name),
                Exp::Integer | Exp::Special(_) => {}
            }
        }
    }

    /// `` `…` `` at the cursor: its body has no backslashes (their rules differ) and is
    /// parsed as a script.
    pub(super) fn backquote(&mut self, word: &mut Word, ctx: Ctx) -> R<()> {
        let rest = &self.s[self.i + 1..];
        let Some(len) = rest.iter().position(|&c| c == b'`') else {
            return no("an unterminated `");
        };
        let body = &rest[..len];
        if body.contains(&b'\\') {
            return no("backslashes inside `...`");
        }
        if self.nested(body)? > 1 {
            self.multi_subst = true;
        }
        self.i += len + 2;
        self.expanded(word, ctx, Exp::Free);
        Ok(())
    }

    /// The text of a `${x%PAT}` pattern from `start` to the cursor: no bracket expression
    /// that dash reads otherwise (`[^…]` is a negation only in bash and busybox;
    /// `[[.a.]]` and `[[=a=]]` are collating elements only there).
    pub(super) fn pattern_text(&self, start: usize) -> R<()> {
        let text = &self.s[start..self.i];
        if text.windows(2).any(|w| w == b"[^") {
            return no("[^...] in a ${x%pattern}");
        }
        if text.windows(3).any(|w| w == b"[[." || w == b"[[=") {
            return no("[[.x.]] or [[=x=]] in a pattern");
        }
        Ok(())
    }
}
