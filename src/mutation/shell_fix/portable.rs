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
//! - The **value** of every expansion is the attacker's (issue 17, class 2) wherever a
//!   builtin or the shell interprets it: `cd` to a word that starts with an expansion
//!   (`-` is OLDPWD, `-P` an option); `test` operators from expansions (the first of
//!   two words, the middle of three, any of four); integer operands of `test`, numeric
//!   `printf` slots and variables in `$((…))` (`1\r`, `1+1`, `a[$(cmd)]`) unless the
//!   script owns the variable as an integer (its first mention an unconditional
//!   top-level `NAME=<integer>`, every assignment an integer); `exit`/`return` other
//!   than a literal or `$?`; `kill`/`wait` other than `$!`/`$$`; an unquoted expansion
//!   in a word that is globbed or matched (arguments, `for` words, `case` patterns) or
//!   in a `${x%PAT}` pattern, whose value is a pattern (dash reads `[^a]`, `[[.a.]]`,
//!   `[[=a=]]` otherwise); and `[^…]`, `[[.x.]]`, `[[=x=]]` written in a pattern.
//! - Limits (documented in the README): a quoted expansion as a redirection target is trusted not to name
//!   `/dev/tcp/…`, and one as a `wait` argument to be a child; glob order and `${#x}`
//!   assume the C locale; the shells' own error numbering may differ (a failed `cd` or
//!   redirection exits 1 in bash, 2 in dash) where the script does not read `$?`;
//!   programs started see `SHLVL` and `_` as each shell sets them; dash (unlike bash and
//!   busybox) does not `exec` the last command of `-c`; `BASH_ENV`, `SHELLOPTS`,
//!   `POSIXLY_CORRECT` and `BASH_FUNC_*` in the container's environment are not seen.

mod builtins;
pub mod gate;
mod invocation;
mod words;

pub use gate::{gate, Gate, Text};
pub use invocation::{invocation, Invocation};

/// Why a script is not proven portable: a short phrase for the warning.
pub type Blocker = String;

type R<T> = Result<T, Blocker>;

fn no<T>(what: impl Into<String>) -> R<T> {
    Err(what.into())
}

fn show(text: &[u8]) -> String {
    String::from_utf8_lossy(text).into_owned()
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
    /// The value starts with an expansion's (attacker-chosen) value: it may be `-`, `-P`,
    /// `!`… wherever a builtin reads its first character.
    leads_with_expansion: bool,
    /// Plain `$NAME` / `${NAME}` references (any quoting): integers only when the script
    /// owns the variable (see [`Parser::owned_integer`]).
    vars: Vec<Vec<u8>>,
    /// Unquoted expansions whose value is neither an integer nor a plain variable:
    /// their value is a glob pattern (`[^a]`, `[[.a.]]` match differently in dash).
    unquoted_free: u32,
    /// Unquoted plain variable references: patterns unless the variable is an owned
    /// integer.
    unquoted_vars: Vec<Vec<u8>>,
    /// The special parameter of the last `$?`, `$!`, `$$`, `$#` in the word.
    special: Option<u8>,
}

/// What one expansion can yield, for [`Parser::expanded`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Exp {
    /// Always an integer: `$((…))`, `${#NAME}`.
    Integer,
    /// `$?`, `$!`, `$$`, `$#`.
    Special(u8),
    /// `$NAME` or `${NAME}`.
    Var(Vec<u8>),
    /// Anything else: `$1`, `$@`, `$(…)`, `${NAME:-…}`: attacker-chosen.
    Free,
}

/// One read or assignment of a variable, in text order (for [`Parser::owned_integer`]).
struct VarEvent {
    name: Vec<u8>,
    /// `None` for a read; `Some(true)` for an assignment of an integer.
    assign: Option<bool>,
    /// Runs unconditionally in the main shell: top level, not in a loop, `if`, `case`,
    /// function, subshell, `$(…)`, pipeline, `&&`/`||` tail or background job.
    top: bool,
}

impl Word {
    fn is(&self, text: &str) -> bool {
        self.literal && self.text == text.as_bytes()
    }

    /// The value is exactly `$?` (0-255 in every shell).
    fn is_status(&self) -> bool {
        self.text.is_empty() && self.expansions == 1 && self.special == Some(b'?')
    }

    /// A free expansion (not an integer one) somewhere in the word.
    fn has_free_expansion(&self) -> bool {
        self.expansions > self.integer_expansions
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
    /// Reads and assignments of variables, and the variables that must be owned integers
    /// (with the blocker to report when one is not).
    events: Vec<VarEvent>,
    integer_needed: Vec<(Vec<u8>, String)>,
    /// Inside a construct whose commands do not run unconditionally in the main shell.
    nest: usize,
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
            events: Vec::new(),
            integer_needed: Vec::new(),
            nest: 0,
        }
    }

    fn record(&mut self, name: &[u8], assign: Option<bool>) {
        self.events.push(VarEvent {
            name: name.to_vec(),
            assign,
            top: self.nest == 0,
        });
    }

    /// `name`'s value must be an integer when the script runs: checked in [`finish`].
    fn need_integer(&mut self, name: &[u8], why: impl Into<String>) {
        self.integer_needed.push((name.to_vec(), why.into()));
    }

    /// The variables the script owns as integers: the first mention of each is an
    /// unconditional top-level assignment of an integer, and every assignment is one. Its
    /// value from the environment is then never read, and nothing makes it a non-number.
    fn owned_integers(&self) -> std::collections::HashSet<&[u8]> {
        let mut first = std::collections::HashSet::new();
        let mut owned = std::collections::HashSet::new();
        let mut spoiled = std::collections::HashSet::new();
        for event in &self.events {
            let name = &event.name[..];
            if first.insert(name) && event.top && event.assign == Some(true) {
                owned.insert(name);
            }
            if event.assign == Some(false) {
                spoiled.insert(name);
            }
        }
        owned.retain(|name| !spoiled.contains(name));
        owned
    }

    /// `word` is always an integer: a literal, an integer expansion, or one owned variable.
    fn require_integer(&mut self, word: &Word, what: &str) -> R<()> {
        if word.integer() {
            return Ok(());
        }
        if word.text.is_empty() && word.expansions == 1 && word.vars.len() == 1 {
            let name = word.vars[0].clone();
            let why = format!("{what} from ${}", show(&name));
            self.need_integer(&name, why);
            return Ok(());
        }
        no(format!("{what} from an expansion"))
    }

    /// A word that undergoes pathname expansion or pattern matching (arguments, `for`
    /// words, `case` patterns): an unquoted expansion's value is a pattern, and dash reads
    /// `[^a]`, `[[.a.]]`, `[[=a=]]` otherwise than bash and busybox.
    fn pattern_word(&mut self, word: &Word) -> R<()> {
        if word.unquoted_free > 0 {
            return no("an unquoted $ (a glob pattern)");
        }
        for name in word.unquoted_vars.clone() {
            let why = format!("an unquoted ${} (a glob pattern)", show(&name));
            self.need_integer(&name, why);
        }
        Ok(())
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
        if self.integer_needed.is_empty() {
            return Ok(());
        }
        let owned = self.owned_integers();
        if let Some((_, why)) = self
            .integer_needed
            .iter()
            .find(|(name, _)| !owned.contains(&name[..]))
        {
            return no(why.clone());
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
        // Its commands run later (a trap) or in a subshell (`` `…` ``): never unconditional.
        for mut event in inner.events.drain(..) {
            event.top = false;
            self.events.push(event);
        }
        self.integer_needed.append(&mut inner.integer_needed);
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
    fn and_or(&mut self) -> R<bool> {
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
    fn pipeline(&mut self) -> R<bool> {
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
        // Conditional or repeated bodies, and subshells: see [`VarEvent::top`].
        let nests = matches!(raw, b"if" | b"while" | b"until" | b"for" | b"case")
            || (self.peek() == Some(b'(') && self.peek_at(1) != Some(b'('));
        self.nest += usize::from(nests);
        let result = self.compound_or_simple(raw);
        self.nest -= usize::from(nests);
        result
    }

    fn compound_or_simple(&mut self, raw: &'a [u8]) -> R<()> {
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
        self.nest += 1;
        let body = match (self.raw_word(), self.peek()) {
            (b"{", _) | (_, Some(b'(')) => self.command(),
            _ => no("a function body that is not { } or ( )"),
        };
        self.in_function -= 1;
        self.nest -= 1;
        self.in_loop = outer_loop;
        body?;
        Ok(true)
    }

    fn simple_command(&mut self) -> R<()> {
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

/// The value of assignment `word` (`NAME=…`, `name_len` bytes of name) is always an
/// integer: a decimal literal or one integer expansion (`$((…))`, `$#`, `${#x}`).
fn assigned_integer(word: &Word, name_len: usize) -> bool {
    let value = &word.text[name_len + 1..];
    if word.literal {
        let digits = value.strip_prefix(b"-").unwrap_or(value);
        // No leading 0: `$((010))` is octal (and `08` an error) in every shell.
        return !digits.is_empty()
            && digits.iter().all(u8::is_ascii_digit)
            && (digits.len() == 1 || digits[0] != b'0');
    }
    value.is_empty() && word.expansions == 1 && word.integer_expansions == 1
}

#[cfg(test)]
#[path = "portable/tests.rs"]
mod tests;
