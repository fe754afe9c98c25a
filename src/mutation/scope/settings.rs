//! docs/DESIGN.md#annotations: the `prestop-injector.io/` annotations, read from the object and its
//! pod template (the template wins), validated into [`Settings`].

use crate::config::{Config, Mode};
use crate::duration;
use crate::json::{Map, Value};
use crate::mutation::Endpoint;
use std::borrow::Cow;

pub const PREFIX: &str = "prestop-injector.io/";
pub const CLEANUP: &str = "prestop-injector.io/cleanup";
pub const COMMAND: &str = "prestop-injector.io/command";
pub const CONTAINERS: &str = "prestop-injector.io/containers";
pub const HOOK_SECONDS: &str = "prestop-injector.io/hook-seconds";
pub const SHUTDOWN_SECONDS: &str = "prestop-injector.io/shutdown-seconds";
pub const SHELL: &str = "prestop-injector.io/shell";
pub const FIX_SHELL: &str = "prestop-injector.io/fix-shell";
pub const MODE: &str = "prestop-injector.io/mode";
pub const TTL_AFTER_FINISHED: &str = "prestop-injector.io/ttl-after-finished";
pub const INJECT: &str = "prestop-injector.io/inject";
pub const STATUS: &str = "prestop-injector.io/status";
/// Written by us on a workload's pod template: its effective settings (see `record`).
pub const SETTINGS: &str = "prestop-injector.io/settings";
/// Written by us on a pod template whose cleanup we inject: the reaper's proof that we
/// did (see `crate::mutation::seal`).
pub const SEAL: &str = "prestop-injector.io/seal";
/// Written by us on a pod template with cleanup targets that no cleanup in the pod runs
/// (its restart policy, another container on the directory, no sidecar): the node
/// reaper's to empty once the pod has ended, under the seal (see `crate::mutation::seal`).
pub const REAP: &str = "prestop-injector.io/reap";

/// The largest `ttlSecondsAfterFinished` the API accepts (the field is an int32).
pub const MAX_TTL_SECONDS: u64 = i32::MAX as u64;

const KNOWN: &[&str] = &[
    CLEANUP,
    COMMAND,
    CONTAINERS,
    HOOK_SECONDS,
    SHUTDOWN_SECONDS,
    SHELL,
    FIX_SHELL,
    MODE,
    TTL_AFTER_FINISHED,
    INJECT,
    STATUS,
    SETTINGS,
    SEAL,
    REAP,
];

/// What the injected hook deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    /// Nothing (the `/mutate` default): grace period and shell fix still apply.
    Nothing,
    /// `off`: explicitly nothing.
    Off,
    /// `auto`: every writable, unprotected hostPath mount.
    Auto,
    /// Explicit absolute container paths, validated.
    Paths(Vec<String>),
}

/// The validated annotations of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub cleanup: Cleanup,
    /// Whether `cleanup` was written on the object (an implicit `auto` on `/mutate/auto`
    /// stays quiet when there is nothing to clean, instead of warning on every object).
    pub cleanup_requested: bool,
    pub command: Option<String>,
    pub containers: Option<Vec<String>>,
    pub hook_seconds: Option<u64>,
    pub shutdown_seconds: u64,
    pub shell: String,
    pub fix_shell: bool,
    pub mode: Mode,
    pub ttl_after_finished: Option<u64>,
    /// Why the object's pods may share a host directory (`pods of a Deployment`, a Job's
    /// replacement pod, …), when an explicit cleanup proceeds anyway: each target without
    /// a per-pod directory warns (`targets::sharing`).
    pub shared_by: Option<SharedBy>,
}

/// Who else may use a host directory of the object's pods, and what gives each pod its
/// own; written by `targets::sharing::shared_by`, read by its `warn_shared`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedBy {
    /// The end of "/data may be shared by …": `pods of a Deployment with 3 replicas`.
    pub who: Cow<'static, str>,
    /// The `subPathExpr` the warning recommends: `$(POD_NAME)` or `$(POD_UID)`.
    pub fix: &'static str,
    /// Whether a directory from the pod's name is its own: not where names come back
    /// (a StatefulSet's `web-0`), where only the uid is.
    pub name_is_own: bool,
}

/// The annotations of an object and of its pod template; the template's win.
#[derive(Debug, Clone, Copy, Default)]
pub struct Annotations<'a> {
    object: Option<&'a Map<String, Value>>,
    template: Option<&'a Map<String, Value>>,
}

/// A refused annotation: the key, the value as written, and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadAnnotation {
    pub key: String,
    pub value: String,
    pub problem: String,
}

impl BadAnnotation {
    pub fn new(key: &str, value: &str, problem: impl Into<String>) -> BadAnnotation {
        BadAnnotation {
            key: key.to_owned(),
            value: value.to_owned(),
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for BadAnnotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 80;
        let value: String = self.value.chars().take(SHOWN).collect();
        let ellipsis = if self.value.chars().count() > SHOWN {
            "…"
        } else {
            ""
        };
        write!(
            f,
            "annotation {}={:?}{ellipsis}: {}",
            self.key, value, self.problem
        )
    }
}

fn annotations_of(value: Option<&Value>) -> Option<&Map<String, Value>> {
    value?.get("metadata")?.get("annotations")?.as_object()
}

impl<'a> Annotations<'a> {
    /// `object` is the whole object, `template` its pod template (the same value for a Pod).
    pub fn new(object: Option<&'a Value>, template: Option<&'a Value>) -> Annotations<'a> {
        Annotations {
            object: annotations_of(object),
            template: annotations_of(template),
        }
    }

    fn keys(&self) -> impl Iterator<Item = (&'a String, &'a Value)> {
        self.object
            .into_iter()
            .chain(self.template)
            .flat_map(|map| map.iter())
    }

    /// The raw value of `key`, template first. A non-string value is a bad annotation.
    pub fn get(&self, key: &str) -> Result<Option<&'a str>, BadAnnotation> {
        let found = self
            .template
            .and_then(|map| map.get(key))
            .or_else(|| self.object.and_then(|map| map.get(key)));
        match found {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(BadAnnotation::new(
                key,
                &other.to_string(),
                "annotation values must be strings",
            )),
        }
    }

    /// Settings recorded by `record` (full keys), read as if written on a pod template.
    pub fn recorded(map: &'a Map<String, Value>) -> Annotations<'a> {
        Annotations {
            object: None,
            template: Some(map),
        }
    }

    /// docs/DESIGN.md#scope: any of our annotations other than `status` puts the object in scope —
    /// a `settings` record too: its pods would obey it, so it is recomputed (or removed)
    /// rather than left as someone wrote it; and a `seal` or `reap`, which the reaper would obey.
    pub fn requests_injection(&self) -> bool {
        self.keys()
            .any(|(key, _)| key.starts_with(PREFIX) && key != STATUS)
    }

    /// `inject: "false"` opts the object out everywhere.
    pub fn opted_out(&self) -> Result<bool, BadAnnotation> {
        match self.get(INJECT)? {
            None => Ok(false),
            Some(value) => parse_bool(INJECT, value).map(|inject| !inject),
        }
    }

    /// Validates every annotation of ours into settings.
    pub fn settings(&self, endpoint: Endpoint, config: &Config) -> Result<Settings, BadAnnotation> {
        if let Some((key, value)) = self
            .keys()
            .find(|(key, _)| key.starts_with(PREFIX) && !KNOWN.contains(&key.as_str()))
        {
            let known: Vec<&str> = KNOWN.iter().map(|k| &k[PREFIX.len()..]).collect();
            let value = value.as_str().unwrap_or_default();
            return Err(BadAnnotation::new(
                key,
                value,
                format!("unknown annotation; known keys: {}", known.join(", ")),
            ));
        }
        let cleanup = match self.get(CLEANUP)? {
            None if endpoint == Endpoint::MutateAuto => Cleanup::Auto,
            None => Cleanup::Nothing,
            Some(value) => parse_cleanup(value)?,
        };
        let command = match self.get(COMMAND)? {
            Some(script) if script.trim().is_empty() => {
                return Err(BadAnnotation::new(
                    COMMAND,
                    script,
                    "the script is empty; give a shell script or remove it",
                ))
            }
            other => other.map(str::to_owned),
        };
        let containers = self.get(CONTAINERS)?.map(parse_names).transpose()?;
        let shell = match self.get(SHELL)? {
            None => config.default_shell.clone(),
            Some(value) => parse_shell(value)?,
        };
        let fix_shell = match self.get(FIX_SHELL)? {
            None => true,
            Some(value) => parse_bool(FIX_SHELL, value)?,
        };
        let mode = match self.get(MODE)? {
            None => config.default_mode,
            Some("exec") => Mode::Exec,
            Some("sidecar") => Mode::Sidecar,
            Some(other) => {
                return Err(BadAnnotation::new(
                    MODE,
                    other,
                    "unknown mode; use exec or sidecar",
                ))
            }
        };
        Ok(Settings {
            cleanup,
            cleanup_requested: self.get(CLEANUP)?.is_some(),
            command,
            containers,
            hook_seconds: self.duration(HOOK_SECONDS)?,
            shutdown_seconds: self
                .duration(SHUTDOWN_SECONDS)?
                .unwrap_or(config.shutdown_seconds),
            shell,
            fix_shell,
            mode,
            ttl_after_finished: self.ttl_after_finished()?,
            shared_by: None,
        })
    }

    /// `spec.ttlSecondsAfterFinished` is an int32: a larger value would be patched into a
    /// field the API server then refuses (or truncates in clients), so it is denied here.
    fn ttl_after_finished(&self) -> Result<Option<u64>, BadAnnotation> {
        let seconds = self.duration(TTL_AFTER_FINISHED)?;
        match (seconds, self.get(TTL_AFTER_FINISHED)?) {
            (Some(seconds), Some(value)) if seconds > MAX_TTL_SECONDS => Err(BadAnnotation::new(
                TTL_AFTER_FINISHED,
                value,
                format!(
                    "out of range; accepted: 0 to {MAX_TTL_SECONDS} seconds, as {}",
                    duration::ACCEPTED_FORMS
                ),
            )),
            _ => Ok(seconds),
        }
    }

    fn duration(&self, key: &str) -> Result<Option<u64>, BadAnnotation> {
        let Some(value) = self.get(key)? else {
            return Ok(None);
        };
        duration::parse_seconds(value).map(Some).ok_or_else(|| {
            BadAnnotation::new(
                key,
                value,
                format!("not a duration; use {}", duration::ACCEPTED_FORMS),
            )
        })
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool, BadAnnotation> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(BadAnnotation::new(key, value, "use \"true\" or \"false\"")),
    }
}

const CLEANUP_FORMS: &str =
    "use auto, off, or comma-separated absolute container paths such as /scratch,/cache";

fn parse_cleanup(value: &str) -> Result<Cleanup, BadAnnotation> {
    match value.trim() {
        "auto" => return Ok(Cleanup::Auto),
        "off" => return Ok(Cleanup::Off),
        _ => {}
    }
    let mut paths = Vec::new();
    for path in value.split(',').map(str::trim) {
        if let Some(problem) = path_problem(path) {
            return Err(BadAnnotation::new(
                CLEANUP,
                value,
                format!("{path:?} {problem}; {CLEANUP_FORMS}"),
            ));
        }
        if !paths.iter().any(|known: &String| known == path) {
            paths.push(path.to_owned());
        }
    }
    Ok(Cleanup::Paths(paths))
}

/// Why `path` is not an acceptable explicit cleanup path, if it is not.
pub fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("is empty");
    }
    if !path.starts_with('/') {
        return Some("is not absolute");
    }
    if path == "/" {
        return Some("is the root directory");
    }
    if path.ends_with('/') || path.contains("//") {
        return Some("is not normalized (no trailing or double slashes)");
    }
    if path
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return Some("is not normalized (no . or .. segments)");
    }
    if path.chars().any(char::is_control) {
        return Some("contains control characters");
    }
    None
}

fn parse_names(value: &str) -> Result<Vec<String>, BadAnnotation> {
    let names: Vec<String> = value
        .split(',')
        .map(|name| name.trim().to_owned())
        .collect();
    if names.iter().any(String::is_empty) {
        return Err(BadAnnotation::new(
            CONTAINERS,
            value,
            "use comma-separated container names such as app,worker",
        ));
    }
    Ok(names)
}

fn parse_shell(value: &str) -> Result<String, BadAnnotation> {
    let ok = value.starts_with('/')
        && value.len() > 1
        && !value.ends_with('/')
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
        && !value.split('/').any(|segment| segment == "..");
    if ok {
        Ok(value.to_owned())
    } else {
        Err(BadAnnotation::new(
            SHELL,
            value,
            "use an absolute path to a shell such as /bin/sh",
        ))
    }
}
