//! What a container's `lifecycle.preStop` holds before we touch it.

use crate::json::Value;
use crate::mutation::hook::{Before, Hook};

/// The preStop handler a container already has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    None,
    /// A hook we generated earlier (recognised from its argv).
    Ours(Hook),
    /// The user's exec handler.
    Exec(Vec<String>),
    /// The user's `sleep` action.
    Sleep(u64),
    /// A handler that cannot be composed with a command: `httpGet`, `tcpSocket`, or one
    /// this version does not know.
    Other(String),
}

impl Existing {
    pub fn of(container: &Value) -> Existing {
        let Some(pre_stop) = container.get("lifecycle").and_then(|l| l.get("preStop")) else {
            return Existing::None;
        };
        let Some(handler) = pre_stop.as_object() else {
            return Existing::Other("malformed".to_owned());
        };
        if let Some(exec) = handler.get("exec") {
            let argv: Option<Vec<String>> =
                exec.get("command")
                    .and_then(Value::as_array)
                    .and_then(|argv| {
                        argv.iter()
                            .map(|arg| arg.as_str().map(str::to_owned))
                            .collect()
                    });
            return match argv {
                Some(argv) => match Hook::from_argv(&argv) {
                    Some(hook) => Existing::Ours(hook),
                    None => Existing::Exec(argv),
                },
                None => Existing::Other("malformed exec".to_owned()),
            };
        }
        if let Some(sleep) = handler.get("sleep") {
            return match sleep.get("seconds").and_then(Value::as_u64) {
                Some(seconds) => Existing::Sleep(seconds),
                None => Existing::Other("malformed sleep".to_owned()),
            };
        }
        match handler.keys().next() {
            None => Existing::None,
            Some(kind) => Existing::Other(kind.clone()),
        }
    }

    /// The user's part, to run before our action.
    pub fn before(&self) -> Before {
        match self {
            Existing::Ours(hook) => hook.before.clone(),
            Existing::Exec(argv) => Before::Exec(argv.clone()),
            Existing::Sleep(seconds) => Before::Sleep(*seconds),
            Existing::None | Existing::Other(_) => Before::Nothing,
        }
    }
}
