//! docs/DESIGN.md#the-shell-fix: is a `bash -c` script proven to mean the same under busybox `ash`,
//! `dash` and `bash`? Only then may the shell fix run it with `/bin/sh`.
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
//!   `cd` or a file redirection that may fail (bash 1, dash 2), `cd` without a directory;
//!   with errexit possibly on anywhere, a redirection that may fail on `{ }`, `if`, `for`,
//!   `while`, `until` or `case` (busybox `sh` ignores `set -e` when it fails; subshells,
//!   function bodies and simple commands it checks, see docs/SHELL-FIX.md).
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
//! - Limits (documented in docs/SHELL-FIX.md): a quoted expansion as a redirection target is
//!   trusted not to name `/dev/tcp/…`, and one as a `wait` argument to be a child; glob order and
//!   `${#x}` assume the C locale; the shells' own error numbering may differ (a failed `cd` or
//!   redirection exits 1 in bash, 2 in dash) where the script does not read `$?`;
//!   programs started see `SHLVL` and `_` as each shell sets them; dash (unlike bash and
//!   busybox) does not `exec` the last command of `-c`. The container's environment is
//!   the gate's (`gate.rs`): `BASH_ENV`, `SHELLOPTS`, `POSIXLY_CORRECT`, `BASH_FUNC_*`
//!   from `envFrom` or the image are not seen.

mod builtin_args;
mod builtins;
mod commands;
mod compound;
mod expansions;
pub mod gate;
mod invocation;
mod variables;
mod words;

pub use gate::{gate, Environment, Gate, Text};
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
            return is_portable_integer(&self.text);
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
    /// The first redirection that may fail on `{ }`, `if`, `for`, `while`, `until` or
    /// `case`, as the blocker to report under `set -e`: busybox `sh` does not exit when it
    /// fails (`evaltree()`'s `NREDIR` case skips the errexit check), bash and dash do.
    errexit_gap: Option<String>,
    /// The next compound command parsed is a function's body: busybox applies `set -e` to
    /// a failed redirection there at the call (`evalcommand`), as bash and dash do.
    function_body: bool,
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

/// A decimal integer every shell reads alike: optional `-`, digits with no leading `0`
/// (`010` is octal in `$((...))`), and within 64 bits. Beyond them they part: bash and
/// busybox wrap `99999999999999999999`, dash clamps it, and busybox's `printf %d` prints
/// 0 where bash prints the maximum, so a test on it can delete under one shell only.
fn is_portable_integer(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits.len() == 1 || digits[0] != b'0')
        && std::str::from_utf8(text).is_ok_and(|text| text.parse::<i64>().is_ok())
}

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
            errexit_gap: None,
            function_body: false,
            reads_status: false,
            fallible: false,
            loop_exits: Vec::new(),
            depth,
            events: Vec::new(),
            integer_needed: Vec::new(),
            nest: 0,
        }
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
        if self.errexit_gap.is_none() {
            self.errexit_gap = inner.errexit_gap.take();
        }
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
}

#[cfg(test)]
mod tests;
