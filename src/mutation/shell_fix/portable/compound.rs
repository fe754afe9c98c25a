//! Compound commands: `if`, `while`/`until`, `for`, `case` and function definitions,
//! each read to its closing word with the checks of the command level (`commands.rs`).

use super::*;

impl Parser<'_> {
    pub(super) fn if_clause(&mut self) -> R<()> {
        self.i += 2;
        self.list(&[b"then"], false, false)?;
        self.expect(b"then")?;
        self.list(&[b"elif", b"else", b"fi"], false, false)?;
        loop {
            self.blank();
            match self.raw_word() {
                b"elif" => {
                    self.i += 4;
                    self.list(&[b"then"], false, false)?;
                    self.expect(b"then")?;
                    self.list(&[b"elif", b"else", b"fi"], false, false)?;
                }
                b"else" => {
                    self.i += 4;
                    self.list(&[b"fi"], false, false)?;
                    return self.expect(b"fi");
                }
                _ => return self.expect(b"fi"),
            }
        }
    }

    pub(super) fn loop_clause(&mut self, keyword: usize) -> R<()> {
        self.i += keyword;
        self.list(&[b"do"], false, false)?;
        self.expect(b"do")?;
        self.loop_body()
    }

    pub(super) fn loop_body(&mut self) -> R<()> {
        self.in_loop += 1;
        let body = self.list(&[b"done"], false, false);
        self.in_loop -= 1;
        body?;
        self.expect(b"done")
    }

    pub(super) fn for_clause(&mut self) -> R<()> {
        self.i += 3;
        self.blank();
        if self.starts(b"((") {
            return no("for ((...))");
        }
        let name = self.raw_word();
        if !is_identifier(name) {
            return no("syntax the parser does not know");
        }
        builtins::check_assigned(name)?;
        self.record(name, Some(false));
        self.i += name.len();
        self.blank();
        if self.raw_word() == b"in" {
            self.i += 2;
            loop {
                self.blank();
                match self.peek() {
                    Some(b';') if self.peek_at(1) != Some(b';') => {
                        self.i += 1;
                        break;
                    }
                    Some(b'\n') => break,
                    Some(c) if !is_meta(c) => {
                        let word = self.word()?;
                        self.pattern_word(&word)?;
                    }
                    _ => return no("syntax the parser does not know"),
                }
            }
        } else if self.peek() == Some(b';') && self.peek_at(1) != Some(b';') {
            self.i += 1;
        }
        self.linebreak()?;
        self.expect(b"do")?;
        self.loop_body()
    }

    pub(super) fn case_clause(&mut self) -> R<()> {
        self.i += 4;
        self.blank();
        self.word()?;
        self.linebreak()?;
        self.expect(b"in")?;
        loop {
            self.linebreak()?;
            if self.raw_word() == b"esac" {
                self.i += 4;
                return Ok(());
            }
            if self.peek() == Some(b'(') {
                self.i += 1;
            }
            loop {
                self.blank();
                match self.peek() {
                    Some(c) if !is_meta(c) => {
                        let pattern = self.word()?;
                        self.pattern_word(&pattern)?;
                    }
                    _ => return no("syntax the parser does not know"),
                }
                self.blank();
                match self.peek() {
                    Some(b'|') => self.i += 1,
                    Some(b')') => {
                        self.i += 1;
                        break;
                    }
                    _ => return no("syntax the parser does not know"),
                }
            }
            self.list(&[b"esac"], false, true)?;
            self.blank();
            if self.starts(b";;&") || self.starts(b";&") {
                return no(";& in case");
            }
            if self.starts(b";;") {
                self.i += 2;
            } else if self.raw_word() != b"esac" {
                return no("syntax the parser does not know");
            }
        }
    }

    /// `NAME() compound` at the cursor; `false` (nothing consumed) when it is not one.
    pub(super) fn function_definition(&mut self) -> R<bool> {
        let rest = &self.s[self.i..];
        let name_len = rest.iter().take_while(|&&c| is_name_char(c)).count();
        let name = &rest[..name_len];
        let mut j = name_len;
        while matches!(rest.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        if name_len == 0 || rest.get(j) != Some(&b'(') {
            return Ok(false);
        }
        if !is_identifier(name) {
            return no("syntax the parser does not know");
        }
        j += 1;
        while matches!(rest.get(j), Some(b' ' | b'\t')) {
            j += 1;
        }
        if rest.get(j) != Some(&b')') {
            return no("syntax the parser does not know");
        }
        if builtins::is_builtin(name) {
            return no(format!(
                "a function named {}",
                String::from_utf8_lossy(name)
            ));
        }
        self.functions.insert(name.to_vec());
        self.i += j + 1;
        self.linebreak()?;
        let outer_loop = std::mem::replace(&mut self.in_loop, 0);
        self.in_function += 1;
        self.nest += 1;
        let body = match (self.raw_word(), self.peek()) {
            (b"{", _) | (_, Some(b'(')) => {
                self.function_body = true;
                self.command()
            }
            _ => no("a function body that is not { } or ( )"),
        };
        self.in_function -= 1;
        self.nest -= 1;
        self.in_loop = outer_loop;
        body?;
        Ok(true)
    }
}
