//! The preStop exec command we generate, and recognising it again.
//!
//! OWNER: shell helper. Interface fixed; bodies to be written.

/// What runs before our action inside the one preStop handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// Nothing: a fresh hook.
    Nothing,
    /// The user's own exec preStop, with its exact argv; the hook exits with its status.
    Exec(Vec<String>),
    /// A former `preStop.sleep.seconds` action, now `sleep N` in the script.
    Sleep(u64),
}

/// What our part of the hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Delete the contents of these absolute paths (passed as argv entries, never spliced).
    Cleanup(Vec<String>),
    /// The user's `prestop-injector.io/command` script.
    Custom(String),
}

/// One injected preStop handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub shell: String,
    pub before: Before,
    pub action: Action,
}

impl Hook {
    /// The `exec.command` argv for this hook.
    pub fn to_argv(&self) -> Vec<String> {
        todo!()
    }

    /// Recognises an argv produced by [`Hook::to_argv`] (any shell); `None` for anything else.
    pub fn from_argv(argv: &[String]) -> Option<Hook> {
        let _ = argv;
        todo!()
    }

    /// Seconds of literal `sleep N` the hook will run: the `Sleep` action, sleeps in the
    /// user's argv and in a custom script.
    pub fn literal_sleep_seconds(&self) -> u64 {
        todo!()
    }
}

/// The command of the cleanup sidecar: idles until SIGTERM, then cleans `targets` and exits 0.
pub fn sidecar_argv(shell: &str, targets: &[String]) -> Vec<String> {
    let _ = (shell, targets);
    todo!()
}

/// The targets of a command produced by [`sidecar_argv`]; `None` for anything else.
pub fn sidecar_targets(argv: &[String]) -> Option<Vec<String>> {
    let _ = argv;
    todo!()
}
