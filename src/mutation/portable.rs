//! SPEC §6: is a `bash -c` script proven to mean the same under busybox `ash`, `dash` and
//! `bash`? Only then may the shell fix run it with `/bin/sh`.
//!
//! Contract:
//! - [`check`] parses the script with a small recursive-descent parser of a POSIX `sh`
//!   subset and answers `Ok(())` only when every construct, expansion, redirection and
//!   builtin is on an allow-list of things that behave the same in all three shells,
//!   including on errors (bash `-c` keeps going where `dash` exits, so a builtin or error
//!   path that differs is a blocker too). Anything else, or anything the parser does not
//!   understand, is `Err(what)`: a short phrase ("declare", "[[ ]]", "$RANDOM") for the
//!   warning. Unknown command names are allowed only as external programs: those are the
//!   image's binaries whichever shell starts them. Command names from expansions are not.
//! - [`invocation`] reads bash's own arguments: only `-c SCRIPT` with the flags
//!   `-e -x -v -f -C -a` (and `-o` with their long names) qualifies; a script file, stdin,
//!   `-l`, `-s`, `-O`, `-u`, `-o pipefail` or any long option does not.
//! - The allow-list (builtins, their arguments and the shell's own variables are in
//!   `builtins.rs`): simple commands, pipelines, `&&`/`||`, `!`, `;`/`&`/newlines, `( )`,
//!   `{ }`, `if`, `while`, `until`, `for NAME [in WORDS]`, `case` with `;;`,
//!   `NAME() { … }`; quotes and backslash escapes; `$NAME`, `${NAME}`,
//!   `${NAME[:]-=+ WORD}`, `${#NAME}`, `${NAME%[%]PAT}`, `${NAME#[#]PAT}`; `$(…)` and
//!   `` `…` `` (no backslashes inside; one command only when `set -e` is on: dash stops a
//!   failing `$(a; b)` early, bash does not); `$((…))` with integer operators (no `++`,
//!   `**`, `,`, assignments, octal, division by a variable); globs `* ? [..]` (not on a
//!   leading `.`: dash matches `.` and `..`); `~` and `~/…` at a word start; redirections
//!   `< > >> >| <& >& n>&m` with a single-digit fd to a target without unquoted
//!   expansion or glob, and here-documents `<<`/`<<-`. Builtins: `: true false cd pwd
//!   echo printf test [ read set export unset exit return break continue wait kill trap
//!   umask exec`, each with the arguments that behave alike (`echo` only with literal
//!   arguments without backslashes or a leading `-`; `printf` with a literal format of
//!   `%s %c %d %i %u %o %x %X`, and numeric slots fed integers; `trap` on HUP INT QUIT TERM
//!   USR1 USR2 only — bash also runs an EXIT trap when killed by a signal, sh does not).
//! - Error paths count: a redirection or assignment on a special builtin (dash exits when
//!   it fails), `set -u` and `${x:?}` (exit codes 127 vs 2), `shift`, `$?` read after a
//!   `cd` or a file redirection that may fail (bash 1, dash 2), `cd` without a directory.
//! - Limits (documented in the README): arithmetic on variables assumes they hold
//!   integers; a quoted expansion as a redirection target is trusted not to name
//!   `/dev/tcp/…`, and one as a `wait` argument to be a child; glob order and `${#x}`
//!   assume the C locale; the shells' own error numbering may differ (a failed `cd` or
//!   redirection exits 1 in bash, 2 in dash) where the script does not read `$?`;
//!   programs started see `SHLVL` and `_` as each shell sets them; dash (unlike bash and
//!   busybox) does not `exec` the last command of `-c`; `BASH_ENV`, `SHELLOPTS`,
//!   `POSIXLY_CORRECT` and `BASH_FUNC_*` in the container's environment are not seen.

mod builtins;
mod invocation;
mod words;

pub use invocation::{invocation, Invocation};

/// Why a script is not proven portable: a short phrase for the warning.
pub type Blocker = String;

type R<T> = Result<T, Blocker>;

fn no<T>(what: impl Into<String>) -> R<T> {
    Err(what.into())
}

/// `Ok(())` when `script` is proven to behave the same in busybox `ash`, `dash` and
/// `bash`. `zero_known`: `$0` was given after the script (`bash -c SCRIPT NAME`), so it
/// does not change with the shell's path; `errexit`: the shell starts with `-e`.
pub fn check(script: &str, zero_known: bool, errexit: bool) -> Result<(), Blocker> {
    let mut parser = Parser::new(script.as_bytes(), zero_known, 0);
    parser.errexit = errexit;
    parser.program()?;
    parser.finish()
}

/// One word of a simple command after parsing.
#[derive(Debug, Default)]
struct Word {
    /// The value after quote removal, expansions left out.
    text: Vec<u8>,
    /// No expansion at all: `text` is the whole value.
    literal: bool,
    /// Some part was quoted or escaped.
    quoted: bool,
    /// A `$…` or `` `…` `` outside double quotes: subject to splitting and globbing.
    unquoted_expansion: bool,
    /// An unquoted `*`, `?` or `[`.
    glob: bool,
    /// `NAME=` at its start, unquoted.
    assign: Option<String>,
    /// How many expansions, and how many of them always give an integer (`$?`, `$#`,
    /// `$$`, `$!`, `${#NAME}`, `$((…))`).
    expansions: u32,
    integer_expansions: u32,
}

impl Word {
    fn is(&self, text: &str) -> bool {
        self.literal && self.text == text.as_bytes()
    }

    /// Always an integer: a decimal literal or one expansion that yields one.
    fn integer(&self) -> bool {
        if self.literal {
            let digits = self.text.strip_prefix(b"-").unwrap_or(&self.text);
            return !digits.is_empty()
                && digits.iter().all(u8::is_ascii_digit)
                && (digits.len() == 1 || digits[0] != b'0');
        }
        self.text.is_empty() && self.expansions == 1 && self.integer_expansions == 1
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Unquoted,
    /// Inside double quotes or an unquoted here-document body.
    Quoted,
}

struct Heredoc {
    delimiter: Vec<u8>,
    strip_tabs: bool,
    expand: bool,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    pending: Vec<Heredoc>,
    in_heredoc: bool,
    functions: std::collections::HashSet<Vec<u8>>,
    /// Command names run with `NAME=value` before them: not allowed for functions.
    prefixed: Vec<Vec<u8>>,
    in_function: usize,
    in_loop: usize,
    zero_known: bool,
    errexit: bool,
    /// A `$(…)` with several commands: bash runs all of them under `set -e`, dash stops.
    multi_subst: bool,
    /// `$?` is read, and a `cd` or a file redirection may fail: bash reports those
    /// failures with status 1, dash (and busybox for `cd`) with 2.
    reads_status: bool,
    fallible: bool,
    /// The loop depth at each `break`/`continue`: one that leaves a subshell (`( )`,
    /// `$( )`, a pipeline element, `&`) is an error in bash and silent in sh.
    loop_exits: Vec<usize>,
    depth: usize,
}

/// Deeper nesting than this is refused rather than risking the stack.
const MAX_DEPTH: usize = 40;

const RESERVED: &[&[u8]] = &[
    b"if", b"then", b"else", b"elif", b"fi", b"do", b"done", b"case", b"esac", b"while", b"until",
    b"for", b"in", b"{", b"}", b"!",
];

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn is_identifier(text: &[u8]) -> bool {
    text.first().is_some_and(|&c| is_name_start(c)) && text.iter().all(|&c| is_name_char(c))
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' | b'(' | b')'
    )
}

impl<'a> Parser<'a> {
    fn new(s: &'a [u8], zero_known: bool, depth: usize) -> Parser<'a> {
        Parser {
            s,
            i: 0,
            pending: Vec::new(),
            in_heredoc: false,
            functions: std::collections::HashSet::new(),
            prefixed: Vec::new(),
            in_function: 0,
            in_loop: 0,
            zero_known,
            errexit: false,
            multi_subst: false,
            reads_status: false,
            fallible: false,
            loop_exits: Vec::new(),
            depth,
        }
    }

    fn finish(&self) -> R<()> {
        if let Some(name) = self.prefixed.iter().find(|n| self.functions.contains(*n)) {
            return no(format!(
                "an assignment before function {}",
                String::from_utf8_lossy(name)
            ));
        }
        if self.errexit && self.multi_subst {
            return no("set -e with several commands in $(...)");
        }
        if self.reads_status && self.fallible {
            return no("$? after a failing cd or redirection");
        }
        Ok(())
    }

    /// Parses `text` (a `` `…` `` body or a trap action) as a script of its own and merges
    /// what the whole-script checks need.
    fn nested(&mut self, text: &[u8]) -> R<usize> {
        if self.depth >= MAX_DEPTH {
            return no("deep nesting");
        }
        let mut inner = Parser::new(text, self.zero_known, self.depth + 1);
        inner.errexit = self.errexit;
        let count = inner.list(&[], false, true)?;
        if inner.i < inner.s.len() {
            return no("syntax the parser does not know");
        }
        self.errexit |= inner.errexit;
        self.multi_subst |= inner.multi_subst;
        self.reads_status |= inner.reads_status;
        self.fallible |= inner.fallible;
        self.prefixed.append(&mut inner.prefixed);
        self.functions.extend(inner.functions.drain());
        Ok(count)
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.s.get(self.i + offset).copied()
    }

    fn starts(&self, text: &[u8]) -> bool {
        self.s[self.i..].starts_with(text)
    }

    /// The unquoted word at the cursor as raw bytes (for reserved words), not consumed.
    fn raw_word(&self) -> &'a [u8] {
        let rest = &self.s[self.i..];
        let end = rest.iter().position(|&c| is_meta(c)).unwrap_or(rest.len());
        &rest[..end]
    }

    fn at_reserved(&self, words: &[&[u8]]) -> bool {
        let raw = self.raw_word();
        words.contains(&raw)
    }

    fn expect(&mut self, word: &[u8]) -> R<()> {
        self.blank();
        if self.raw_word() != word {
            return no(format!(
                "syntax the parser does not know (wanted {})",
                String::from_utf8_lossy(word)
            ));
        }
        self.i += word.len();
        Ok(())
    }

    /// Spaces, tabs, line continuations and a comment up to (not including) the newline.
    fn blank(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\r') => self.i += 1,
                Some(b'\\') if self.peek_at(1) == Some(b'\n') => self.i += 2,
                Some(b'#') => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.i += 1;
                    }
                }
                _ => return,
            }
        }
    }

    /// Blanks and newlines (reading pending here-documents after each newline).
    fn linebreak(&mut self) -> R<()> {
        loop {
            self.blank();
            if self.peek() == Some(b'\n') {
                self.newline()?;
            } else {
                return Ok(());
            }
        }
    }

    fn newline(&mut self) -> R<()> {
        self.i += 1;
        let pending = std::mem::take(&mut self.pending);
        for heredoc in &pending {
            self.heredoc_body(heredoc)?;
        }
        Ok(())
    }

    fn program(&mut self) -> R<()> {
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
    fn list(&mut self, ends: &[&[u8]], paren: bool, allow_empty: bool) -> R<usize> {
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
            self.and_or()?;
            count += 1;
            self.blank();
            if self.peek() == Some(b'&') && self.peek_at(1) != Some(b'>') {
                self.no_loop_exit(mark, "break or continue in the background")?;
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

    fn and_or(&mut self) -> R<()> {
        self.pipeline()?;
        loop {
            self.blank();
            if self.starts(b"&&") || self.starts(b"||") {
                self.i += 2;
                self.linebreak()?;
                self.pipeline()?;
            } else {
                return Ok(());
            }
        }
    }

    fn pipeline(&mut self) -> R<()> {
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
        Ok(())
    }

    /// Refuses a `break`/`continue` since `mark` that leaves the current loop level: it
    /// ran in a subshell.
    fn no_loop_exit(&self, mark: usize, what: &str) -> R<()> {
        if self.loop_exits[mark..].iter().any(|&d| d <= self.in_loop) {
            return no(what);
        }
        Ok(())
    }

    fn command(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return no("deep nesting");
        }
        let result = self.command_inner();
        self.depth -= 1;
        result
    }

    fn command_inner(&mut self) -> R<()> {
        self.blank();
        let raw = self.raw_word();
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
        self.trailing_redirections()
    }

    fn trailing_redirections(&mut self) -> R<()> {
        loop {
            self.blank();
            if !self.redirection()? {
                return Ok(());
            }
        }
    }

    fn if_clause(&mut self) -> R<()> {
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

    fn loop_clause(&mut self, keyword: usize) -> R<()> {
        self.i += keyword;
        self.list(&[b"do"], false, false)?;
        self.expect(b"do")?;
        self.loop_body()
    }

    fn loop_body(&mut self) -> R<()> {
        self.in_loop += 1;
        let body = self.list(&[b"done"], false, false);
        self.in_loop -= 1;
        body?;
        self.expect(b"done")
    }

    fn for_clause(&mut self) -> R<()> {
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
                        self.word()?;
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

    fn case_clause(&mut self) -> R<()> {
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
                        self.word()?;
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
    fn function_definition(&mut self) -> R<bool> {
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
        let body = match (self.raw_word(), self.peek()) {
            (b"{", _) | (_, Some(b'(')) => self.command(),
            _ => no("a function body that is not { } or ( )"),
        };
        self.in_function -= 1;
        self.in_loop = outer_loop;
        body?;
        Ok(true)
    }

    fn simple_command(&mut self) -> R<()> {
        let mut name: Option<Word> = None;
        let mut args = Vec::new();
        let mut assignments = 0;
        let mut redirections = 0;
        loop {
            self.blank();
            match self.peek() {
                None | Some(b'\n' | b';' | b'&' | b'|' | b')') => break,
                Some(b'(') => return no("syntax the parser does not know"),
                _ => {}
            }
            if self.redirection()? {
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
                    assignments += 1;
                    continue;
                }
                name = Some(word);
            } else {
                args.push(word);
            }
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

#[cfg(test)]
#[path = "portable/tests.rs"]
mod tests;
