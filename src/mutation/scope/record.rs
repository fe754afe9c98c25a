//! docs/DESIGN.md#annotations, "The Pod-level pass": a workload's effective settings, recorded on
//! its pod template, so that what a controller creates from that template reproduces the
//! workload's decision instead of re-deciding from what it happens to carry.
//!
//! A controller copies only the template: the Pods of a Job never see the Job's own
//! annotations, the endpoint's default, or its parallelism; the Jobs of a CronJob never
//! see the CronJob's. Re-deciding there broadened `cleanup: /scratch/tmp` to `auto`,
//! ignored an opt-out and removed cleanups. So:
//! - a top-level workload pass that injects records its effective settings in the
//!   `prestop-injector.io/settings` annotation of its template, rewritten on every pass
//!   (an UPDATE that changes annotations changes the record), never read back there;
//! - a *derived* object — a Pod, a ReplicaSet of a Deployment, a Job of a CronJob — is
//!   decided from the record alone. Without one it gets no patch at all when its
//!   controller is a kind whose template we mutate: its parent's decision is unknown,
//!   and guessing is how files get deleted (fail closed).
//!
//! The record holds the settings in annotation form (`{"version":1,"cleanup":"/scratch"}`)
//! and is read back through the same validator as annotations, so a hand-written or
//! forged record can do no more than the annotations its author could write anyway.

use crate::config::{Config, Mode};
use crate::json::{json, Map, Value};
use crate::mutation::object_text::ObjectText;
use crate::mutation::scope::settings::{
    Annotations, BadAnnotation, Cleanup, Settings, CLEANUP, COMMAND, CONTAINERS, FIX_SHELL,
    HOOK_SECONDS, MODE, PREFIX, SETTINGS, SHELL, SHUTDOWN_SECONDS,
};

const VERSION: u64 = 1;

/// A record-only key: the workload's `cleanup: auto` was written, not the endpoint's
/// default. Without it a recorded `auto` is the implicit one, which cleans only private
/// directories (`sharing::keep_private`) — so a record written before the key existed,
/// or one that drops it, cleans less, never more.
const EXPLICIT: &str = "explicit";

/// What a derived object's record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// The workload opted out: leave its pods alone.
    OptedOut,
    Settings(Settings),
    /// Written by another version of the injector: not ours to interpret.
    UnknownVersion(String),
}

/// The controllers whose pod templates we mutate, by the kind they create (group, kind).
const PARENTS: &[(&str, &str, &str)] = &[
    ("Pod", "apps", "ReplicaSet"),
    ("Pod", "apps", "StatefulSet"),
    ("Pod", "apps", "DaemonSet"),
    ("Pod", "batch", "Job"),
    ("ReplicaSet", "apps", "Deployment"),
    ("Job", "batch", "CronJob"),
];

/// The `kind` of the object's controller (the ownerReference with `controller: true`).
pub fn controller_of(object: &Value) -> Option<(&str, &str)> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|owner| owner.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|owner| {
            let field = |key| owner.get(key).and_then(Value::as_str).unwrap_or_default();
            let group = field("apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
            (group, field("kind"))
        })
}

/// Whether `object` (of `kind`) was created by a controller from a template we mutate.
pub fn is_derived(kind: &str, object: &Value) -> bool {
    controller_of(object).is_some_and(|(group, owner)| {
        PARENTS
            .iter()
            .any(|&(child, g, k)| child == kind && g == group && k == owner)
    })
}

/// The record of the settings a workload was decided with (in annotation form).
pub fn render(settings: &Settings) -> String {
    let mut record = ObjectText::new();
    record.number("version", VERSION);
    let mut put = |key: &str, value: &str| {
        record.string(short(key), value);
    };
    match &settings.cleanup {
        // The endpoint's default is resolved here: a derived object must not apply its own.
        Cleanup::Nothing => {}
        Cleanup::Off => put(CLEANUP, "off"),
        Cleanup::Auto => {
            put(CLEANUP, "auto");
            if settings.cleanup_requested {
                put(EXPLICIT, "true");
            }
        }
        Cleanup::Paths(paths) => put(CLEANUP, &paths.join(",")),
    }
    if let Some(command) = &settings.command {
        put(COMMAND, command);
    }
    if let Some(containers) = &settings.containers {
        put(CONTAINERS, &containers.join(","));
    }
    if let Some(seconds) = settings.hook_seconds {
        put(HOOK_SECONDS, itoa::Buffer::new().format(seconds));
    }
    put(
        SHUTDOWN_SECONDS,
        itoa::Buffer::new().format(settings.shutdown_seconds),
    );
    put(SHELL, &settings.shell);
    put(FIX_SHELL, if settings.fix_shell { "true" } else { "false" });
    let mode = match settings.mode {
        Mode::Exec => "exec",
        Mode::Sidecar => "sidecar",
    };
    put(MODE, mode);
    record.finish()
}

fn short(key: &str) -> &str {
    key.strip_prefix(PREFIX).unwrap_or(key)
}

/// Reads the record in `annotations` (a pod template's or a Pod's), if there is one.
pub fn read(
    annotations: Option<&Map<String, Value>>,
    config: &Config,
) -> Result<Option<Recorded>, BadAnnotation> {
    let Some(raw) = annotations.and_then(|a| a.get(SETTINGS)) else {
        return Ok(None);
    };
    let text = raw.as_str().unwrap_or_default();
    let bad = |problem: String| BadAnnotation::new(SETTINGS, text, problem);
    let written_by_us = "written by prestop-injector; remove it to decide from the annotations";
    let Some(Value::Object(record)) = raw.as_str().and_then(|t| serde_json::from_str(t).ok())
    else {
        return Err(bad(format!(
            "not a JSON object of settings; {written_by_us}"
        )));
    };
    match record.get("version") {
        Some(version) if version == &json!(VERSION) => {}
        other => {
            let version = other.map_or_else(|| "none".to_owned(), Value::to_string);
            return Ok(Some(Recorded::UnknownVersion(version)));
        }
    }
    let explicit = match record.get(EXPLICIT) {
        None => false,
        Some(value) if value == "true" => true,
        Some(other) => {
            return Err(bad(format!(
                "{EXPLICIT}={other} is not \"true\"; {written_by_us}"
            )))
        }
    };
    let mut keys = Map::new();
    for (key, value) in record
        .iter()
        .filter(|(key, _)| !["version", EXPLICIT].contains(&key.as_str()))
    {
        let full = format!("{PREFIX}{key}");
        if key.contains('/')
            || [
                SETTINGS,
                crate::mutation::scope::settings::STATUS,
                crate::mutation::scope::settings::SEAL,
                crate::mutation::scope::settings::REAP,
            ]
            .contains(&full.as_str())
        {
            return Err(bad(format!("unknown setting {key:?}; {written_by_us}")));
        }
        keys.insert(full, value.clone());
    }
    let annotations = Annotations::recorded(&keys);
    let inner = |bad: BadAnnotation| {
        BadAnnotation::new(
            SETTINGS,
            text,
            format!(
                "recorded {}={:?}: {}",
                short(&bad.key),
                bad.value,
                bad.problem
            ),
        )
    };
    if annotations.opted_out().map_err(inner)? {
        return Ok(Some(Recorded::OptedOut));
    }
    let mut settings = annotations
        .settings(crate::mutation::Endpoint::Mutate, config)
        .map_err(inner)?;
    if settings.cleanup == Cleanup::Auto {
        settings.cleanup_requested = explicit;
    }
    Ok(Some(Recorded::Settings(settings)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings_of(annotations: Value, endpoint: crate::mutation::Endpoint) -> Settings {
        let map = annotations.as_object().unwrap().clone();
        Annotations::recorded(&map)
            .settings(endpoint, &Config::default())
            .unwrap()
    }

    fn round_trip(settings: &Settings) -> Recorded {
        let map = Map::from_iter([(SETTINGS.to_owned(), json!(render(settings)))]);
        read(Some(&map), &Config::default()).unwrap().unwrap()
    }

    #[test]
    fn settings_survive_the_record() {
        use crate::mutation::Endpoint::*;
        for (annotations, endpoint) in [
            (json!({}), Mutate),
            (json!({}), MutateAuto),
            (json!({CLEANUP: "/scratch/tmp, /cache"}), Mutate),
            (
                json!({CLEANUP: "off", COMMAND: "echo \"bye\"\nsleep 5", CONTAINERS: "a,b",
                       HOOK_SECONDS: "1m30s", SHUTDOWN_SECONDS: "0", SHELL: "/bin/bash",
                       FIX_SHELL: "false", MODE: "sidecar"}),
                MutateAuto,
            ),
        ] {
            let settings = settings_of(annotations.clone(), endpoint);
            let Recorded::Settings(back) = round_trip(&settings) else {
                panic!("{annotations}");
            };
            // Only what a derived object cannot have differs: whether `cleanup` was
            // written (a warning's wording) and the Job-level ttl.
            let expected = Settings {
                cleanup_requested: back.cleanup_requested,
                ..settings
            };
            assert_eq!(back, expected, "{annotations} on {endpoint:?}");
        }
    }

    #[test]
    fn opt_out_and_foreign_records() {
        let read_text = |text: &str| {
            let map = Map::from_iter([(SETTINGS.to_owned(), json!(text))]);
            read(Some(&map), &Config::default())
        };
        assert_eq!(
            read_text(r#"{"version":1,"inject":"false"}"#),
            Ok(Some(Recorded::OptedOut))
        );
        assert_eq!(
            read_text(r#"{"version":2,"cleanup":"auto"}"#),
            Ok(Some(Recorded::UnknownVersion("2".into())))
        );
        for (text, problem) in [
            ("auto", "not a JSON object"),
            (r#"{"version":1,"cleanup":"../etc"}"#, "recorded cleanup"),
            (r#"{"version":1,"status":"{}"}"#, "unknown setting"),
            (r#"{"version":1,"other.io/x":"1"}"#, "unknown setting"),
            (r#"{"version":1,"ttl":"1"}"#, "unknown annotation"),
            (r#"{"version":1,"hook-seconds":7}"#, "must be strings"),
            (
                r#"{"version":1,"cleanup":"auto","explicit":"yes"}"#,
                "explicit",
            ),
        ] {
            let bad = read_text(text).expect_err(text);
            assert_eq!(bad.key, SETTINGS);
            assert!(bad.to_string().contains(problem), "{text}: {bad}");
        }
    }

    #[test]
    fn derived_objects_are_recognised_by_their_controller() {
        let owned = |api: &str, kind: &str, controller: bool| {
            json!({"metadata": {"ownerReferences": [
                {"apiVersion": "v1", "kind": "Other", "name": "x"},
                {"apiVersion": api, "kind": kind, "name": "p", "controller": controller}]}})
        };
        assert!(is_derived("Pod", &owned("apps/v1", "ReplicaSet", true)));
        assert!(is_derived("Pod", &owned("batch/v1", "Job", true)));
        assert!(is_derived(
            "ReplicaSet",
            &owned("apps/v1", "Deployment", true)
        ));
        assert!(is_derived("Job", &owned("batch/v1", "CronJob", true)));
        assert!(!is_derived("Pod", &owned("apps/v1", "ReplicaSet", false)));
        assert!(!is_derived("Pod", &owned("example.com/v1", "Job", true)));
        assert!(!is_derived("Job", &owned("apps/v1", "Deployment", true)));
        assert!(!is_derived("Pod", &json!({"metadata": {}})));
        assert_eq!(
            controller_of(&owned("apps.kruise.io/v1alpha1", "CloneSet", true)),
            Some(("apps.kruise.io", "CloneSet"))
        );
    }
}
