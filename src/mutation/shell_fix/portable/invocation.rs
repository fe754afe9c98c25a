//! bash's own arguments: which ones `/bin/sh` (busybox `ash`, `dash`) takes the same way.

use super::{builtin_args, check, Blocker, Word};

/// What bash was asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation<'a> {
    /// `-c SCRIPT` with flags every `sh` knows; the script still needs [`check`].
    Script {
        text: &'a str,
        /// `$0` was given after the script (`bash -c SCRIPT NAME`).
        zero_known: bool,
        /// Started with `-e` or `-o errexit`.
        errexit: bool,
    },
    /// Cannot be proven the same under `sh`: a script file, stdin, a bash-only option.
    Refuse(Blocker),
    /// An argument that matters is not a string (odd JSON): decide nothing.
    Unknown,
}

impl Invocation<'_> {
    /// What keeps this from running under `sh`; `None` when proven portable (or, for
    /// [`Invocation::Unknown`], when there is nothing to decide).
    pub fn blocker(&self) -> Option<Blocker> {
        match self {
            Invocation::Script {
                text,
                zero_known,
                errexit,
            } => check(text, *zero_known, *errexit).err(),
            Invocation::Refuse(what) => Some(what.clone()),
            Invocation::Unknown => None,
        }
    }
}

/// Reads bash's arguments after `argv[0]`. `None` entries stand for non-string JSON values.
///
/// Options come first: single-letter flags (`-e`, combined `-ec`/`-xc`, `+x`), `-o NAME`
/// taking the next argument; with `-c` the first operand is the script and the rest are
/// `$0 $1 …`. Without `-c` the first operand is a script file, whose content we cannot
/// see, and no operand at all means commands from stdin: both refused.
pub fn invocation<'a>(args: &[Option<&'a str>]) -> Invocation<'a> {
    if args.iter().any(Option::is_none) {
        return Invocation::Unknown;
    }
    let refuse = |what: String| Invocation::Refuse(what);
    let mut has_c = false;
    let mut errexit = false;
    let mut i = 0;
    while let Some(&Some(arg)) = args.get(i) {
        if arg == "-" || arg == "--" {
            return refuse(format!("bash option {arg}"));
        }
        if arg.starts_with("--") {
            return refuse(format!("bash option {}", short(arg)));
        }
        let (minus, flags) = match arg.as_bytes().first() {
            Some(b'-') => (true, &arg[1..]),
            Some(b'+') => (false, &arg[1..]),
            _ => break,
        };
        i += 1;
        for flag in flags.chars() {
            match flag {
                'c' if minus => has_c = true,
                'e' => errexit |= minus,
                'x' | 'v' | 'f' | 'C' | 'a' => {}
                'o' => {
                    let Some(&Some(name)) = args.get(i) else {
                        return refuse("bash -o without a name".to_owned());
                    };
                    i += 1;
                    let word = Word {
                        text: name.as_bytes().to_vec(),
                        literal: true,
                        ..Word::default()
                    };
                    match builtin_args::set_option(&word) {
                        Ok(option) => errexit |= minus && option == "errexit",
                        Err(what) => return refuse(what),
                    }
                }
                'u' => return refuse("bash -u (bash and sh exit with other codes)".to_owned()),
                'l' => return refuse("bash -l (a login shell reads other files)".to_owned()),
                's' => return refuse("bash -s (commands from stdin)".to_owned()),
                'O' => return refuse("bash -O (shopt)".to_owned()),
                other => return refuse(format!("bash option -{other}")),
            }
        }
    }
    if !has_c {
        return if i < args.len() {
            refuse("a script file (content unknown)".to_owned())
        } else {
            refuse("commands from stdin (content unknown)".to_owned())
        };
    }
    match args.get(i) {
        Some(&Some(text)) => Invocation::Script {
            text,
            zero_known: args.len() > i + 1,
            errexit,
        },
        _ => refuse("-c without a script".to_owned()),
    }
}

fn short(arg: &str) -> String {
    arg.chars().take(20).collect()
}
