//! What the script does with variables: each read and assignment in text order, the
//! variables it owns as integers, and the whole-script checks made at the end ([`finish`]).
//!
//! [`finish`]: Parser::finish

use super::*;

impl Parser<'_> {
    pub(super) fn record(&mut self, name: &[u8], assign: Option<bool>) {
        self.events.push(VarEvent {
            name: name.to_vec(),
            assign,
            top: self.nest == 0,
        });
    }

    /// `name`'s value must be an integer when the script runs: checked in [`finish`].
    pub(super) fn need_integer(&mut self, name: &[u8], why: impl Into<String>) {
        self.integer_needed.push((name.to_vec(), why.into()));
    }

    /// The variables the script owns as integers: the first mention of each is an
    /// unconditional top-level assignment of an integer, and every assignment is one. Its
    /// value from the environment is then never read, and nothing makes it a non-number.
    pub(super) fn owned_integers(&self) -> std::collections::HashSet<&[u8]> {
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
    pub(super) fn require_integer(&mut self, word: &Word, what: &str) -> R<()> {
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
    pub(super) fn pattern_word(&mut self, word: &Word) -> R<()> {
        if word.unquoted_free > 0 {
            return no("an unquoted $ (a glob pattern)");
        }
        for name in word.unquoted_vars.clone() {
            let why = format!("an unquoted ${} (a glob pattern)", show(&name));
            self.need_integer(&name, why);
        }
        Ok(())
    }

    pub(super) fn finish(&self) -> R<()> {
        if let Some(name) = self.prefixed.iter().find(|n| self.functions.contains(*n)) {
            return no(format!(
                "an assignment before function {}",
                String::from_utf8_lossy(name)
            ));
        }
        if self.errexit && self.multi_subst {
            return no("set -e with several commands in $(...)");
        }
        // errexit counts as on for the whole script once anything may turn it on.
        if let (true, Some(gap)) = (self.errexit, &self.errexit_gap) {
            return no(gap.clone());
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
}

/// The value of assignment `word` (`NAME=…`, `name_len` bytes of name) is always an
/// integer: a decimal literal or one integer expansion (`$((…))`, `$#`, `${#x}`).
pub(super) fn assigned_integer(word: &Word, name_len: usize) -> bool {
    let value = &word.text[name_len + 1..];
    if word.literal {
        // No leading 0: `$((010))` is octal (and `08` an error) in every shell; and
        // within 64 bits.
        return super::is_portable_integer(value);
    }
    value.is_empty() && word.expansions == 1 && word.integer_expansions == 1
}
