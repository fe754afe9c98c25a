//! The seal (docs/REAPER.md#the-seal): proof, for the reaper, that the webhook itself
//! injected a pod's cleanup, as an HMAC-SHA256 tag in `prestop-injector.io/seal`.
//!
//! A status annotation and a hook argv can be copied into any hand-written Pod; the tag
//! cannot be made without a key only the webhook and the reaper hold
//! ([`crate::seal_keys`]). It covers everything the reaper derives a host directory from,
//! and nothing that the API server or a controller adds or defaults:
//! - the namespace (the pod's uid does not exist yet at admission: the webhook mutates
//!   Jobs' templates, and even a bare Pod gets its uid after mutating admission);
//! - each container that runs our cleanup ([`cleanup_containers`]: the exec hook of an
//!   app container, our sidecar), in order: where it is, its name, its exact argv; for each
//!   of its targets the volumeMount the target lies on (`name`, `mountPath`, `subPath`,
//!   `subPathExpr`, `readOnly`; absent = the default), the `env` entries a `subPathExpr`
//!   references (expanded by the reaper), and the volume the mount names (a hostPath's
//!   `path` and `type`, absent type = `""`; any other kind only as "not a hostPath");
//! - the `prestop-injector.io/reap` annotation when there is one ([`reaper_targets`]):
//!   its exact text, then for each of its targets the same mount, env and volume fields.
//!   Absent, the message is the one earlier releases sealed, so their pods still verify.
//!
//! Every field is length-prefixed and every list counted, after a domain and version
//! prefix, so two different inputs never encode alike. The annotation is
//! `v1:<base64 of the tag>`. Pure: the keys come in with the config.

use crate::config::Config;
use crate::json::Value;
use crate::mutation::hook::{sidecar_identified_targets, Action, Hook, Target, PROGRAM};
use crate::mutation::targets::{container_mounts, env_refs, mount_of, volume};
use crate::seal_keys::SealKeys;
use base64::Engine as _;

pub use crate::mutation::scope::settings::{REAP, SEAL};

/// Format of the annotation's value: this prefix, then the tag in base64.
const VERSION: &str = "v1:";

/// Starts every sealed message, so a tag made for something else never verifies here.
const DOMAIN: &[u8] = b"prestop-injector.io/seal\0v1\0";

/// Where a cleanup container sits in the pod spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// An app container (`containers`) whose preStop exec hook is ours.
    Hook,
    /// Our cleanup sidecar (`initContainers`).
    Sidecar,
    /// An app container whose targets no cleanup in the pod runs: named in the
    /// `prestop-injector.io/reap` annotation, for the node reaper alone (issue 38, class 2).
    Reaper,
}

/// One container that runs our cleanup, with its targets as its argv says them.
#[derive(Debug)]
pub struct Cleaner<'a> {
    pub place: Place,
    pub container: &'a Value,
    pub argv: Vec<String>,
    pub targets: Vec<Target>,
    /// Whether the argv is the cleaner program's, whose targets carry `--host` (the
    /// shell forms cannot).
    pub program: bool,
}

impl Cleaner<'_> {
    pub fn name(&self) -> &str {
        self.container
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

/// Each container of `spec` that runs our cleanup: app containers whose preStop is our
/// cleanup hook (not a custom script), then our sidecar, in spec order.
pub fn cleanup_containers(spec: &Value) -> Vec<Cleaner<'_>> {
    let list = |field: &str| {
        spec.get(field)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    };
    let argv = |value: Option<&Value>| -> Option<Vec<String>> {
        value?
            .as_array()?
            .iter()
            .map(|a| a.as_str().map(str::to_owned))
            .collect()
    };
    let mut found = Vec::new();
    for container in list("containers") {
        let Some(command) = argv(container.pointer("/lifecycle/preStop/exec/command")) else {
            continue;
        };
        if let Some(Hook {
            action: Action::Cleanup(targets),
            ..
        }) = Hook::from_argv(&command)
        {
            found.push(Cleaner {
                place: Place::Hook,
                container,
                program: command.first().map(String::as_str) == Some(PROGRAM),
                argv: command,
                targets,
            });
        }
    }
    for container in list("initContainers") {
        let Some(command) = argv(container.get("command")) else {
            continue;
        };
        if let Some(targets) = sidecar_identified_targets(&command) {
            found.push(Cleaner {
                place: Place::Sidecar,
                container,
                program: command.first().map(String::as_str)
                    == Some(crate::mutation::hook::IMAGE_PROGRAM),
                argv: command,
                targets,
            });
        }
    }
    found
}

mod reap;
pub use reap::{reap_annotation, reaper_targets, ReapTarget};

/// What a pod's seal says, as the reaper reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Made with one of the keys, for this namespace and these containers, mounts and volumes.
    Sealed,
    /// No seal (or one in a format we do not write), or no key to check it with.
    Unsealed,
    /// A seal that none of the keys made for what the pod has now.
    Mismatch,
}

impl Verdict {
    /// The reaper's refusal reason (a metric label).
    pub fn reason(self) -> Option<&'static str> {
        match self {
            Verdict::Sealed => None,
            Verdict::Unsealed => Some("unsealed"),
            Verdict::Mismatch => Some("seal_mismatch"),
        }
    }
}

/// The annotation value for a pod template in `namespace` without a reap annotation:
/// `None` without a key or when no container runs our cleanup.
pub fn seal(keys: &SealKeys, namespace: &str, spec: &Value) -> Option<String> {
    seal_with(keys, namespace, spec, None)
}

/// [`seal`] of a pod template whose reap annotation is `reap`.
pub fn seal_with(
    keys: &SealKeys,
    namespace: &str,
    spec: &Value,
    reap: Option<&str>,
) -> Option<String> {
    // Without a key nothing is sealed: the message is not worth building (every review).
    if keys.is_empty() {
        return None;
    }
    let message = message(namespace, spec, reap)?;
    let tag = keys.sign(&message)?;
    Some(format!(
        "{VERSION}{}",
        base64::engine::general_purpose::STANDARD.encode(tag)
    ))
}

/// Whether `annotation` (the pod's seal, if any) seals `spec` and the reap annotation
/// `reap` in `namespace` under one of `keys`.
pub fn verify(
    keys: &SealKeys,
    namespace: &str,
    spec: &Value,
    reap: Option<&str>,
    annotation: Option<&str>,
) -> Verdict {
    let Some(tag) = annotation
        .and_then(|text| text.strip_prefix(VERSION))
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
    else {
        return Verdict::Unsealed;
    };
    if keys.is_empty() {
        return Verdict::Unsealed;
    }
    match message(namespace, spec, reap) {
        Some(message) if keys.verify(&message, &tag) => Verdict::Sealed,
        _ => Verdict::Mismatch,
    }
}

/// The seal a mutated pod template must carry: that of what it has now, under the first
/// key, when it runs our cleanup; `None` (no seal) otherwise.
pub fn wanted(template: &Value, namespace: Option<&str>, config: &Config) -> Option<String> {
    let reap = template
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(REAP))
        .and_then(Value::as_str);
    seal_with(&config.seal, namespace?, template.get("spec")?, reap)
}

/// The sealed message; `None` when no container runs our cleanup and nothing is left to
/// the reaper.
fn message(namespace: &str, spec: &Value, reap: Option<&str>) -> Option<Vec<u8>> {
    let cleaners = cleanup_containers(spec);
    if cleaners.is_empty() && reap.is_none() {
        return None;
    }
    let mut out = Encoder(DOMAIN.to_vec());
    out.text(namespace);
    out.count(cleaners.len());
    for cleaner in &cleaners {
        out.text(match cleaner.place {
            Place::Hook => "containers",
            Place::Sidecar => "initContainers",
            Place::Reaper => "reap",
        });
        out.json_text(cleaner.container.get("name"));
        out.count(cleaner.argv.len());
        for arg in &cleaner.argv {
            out.text(arg);
        }
        target_fields(&mut out, spec, cleaner);
    }
    // Appended only when present: a pod without one seals what earlier releases sealed.
    if let Some(text) = reap {
        out.text(REAP);
        out.text(text);
        match reaper_targets(spec, text) {
            Ok(cleaners) => {
                out.count(cleaners.len());
                for cleaner in &cleaners {
                    // The container's name and each target's path and host are in the text.
                    target_fields(&mut out, spec, cleaner);
                }
            }
            Err(_) => out.text("unreadable"),
        }
    }
    Some(out.0)
}

/// For each target of `cleaner`: its path, and the mount it lies on with the env and
/// volume that mount reads.
fn target_fields(out: &mut Encoder, spec: &Value, cleaner: &Cleaner) {
    let mounts = container_mounts(cleaner.container);
    out.count(cleaner.targets.len());
    for target in &cleaner.targets {
        out.text(&target.path);
        let mount = match &mounts {
            Ok(mounts) => mount_of(mounts, &target.path),
            Err(_) => {
                out.text("unreadable mounts");
                continue;
            }
        };
        let Some(mount) = mount else {
            out.text("no mount");
            continue;
        };
        out.text("mount");
        mount_fields(out, mount.raw);
        env_fields(out, cleaner.container, mount.raw);
        volume_fields(out, volume(spec, mount.volume));
    }
}

fn mount_fields(out: &mut Encoder, raw: &Value) {
    for key in ["name", "mountPath", "subPath", "subPathExpr"] {
        out.json_text(raw.get(key));
    }
    match raw.get("readOnly") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => out.text("false"),
        Some(Value::Bool(true)) => out.text("true"),
        Some(other) => out.other(other),
    }
}

/// The `env` entries the mount's `subPathExpr` references, as the reaper reads them:
/// a literal `value` or a `fieldRef`'s `fieldPath` (its `apiVersion` is defaulted by the
/// API server, and only `v1` exists).
fn env_fields(out: &mut Encoder, container: &Value, raw: &Value) {
    let names = raw
        .get("subPathExpr")
        .and_then(Value::as_str)
        .map(env_refs::references)
        .unwrap_or_default();
    let env = container
        .get("env")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    out.count(names.len());
    for name in &names {
        out.text(name);
        let entries: Vec<&Value> = env
            .iter()
            .filter(|e| e.get("name").and_then(Value::as_str) == Some(name))
            .collect();
        out.count(entries.len());
        for entry in entries {
            match (
                entry.get("value"),
                entry.pointer("/valueFrom/fieldRef/fieldPath"),
            ) {
                (Some(value), _) if !value.is_null() => {
                    out.text("value");
                    out.json_text(Some(value));
                }
                (_, Some(path)) => {
                    out.text("fieldRef");
                    out.json_text(Some(path));
                }
                // A ConfigMap key, a resource: the reaper never expands those.
                _ => out.text("other"),
            }
        }
    }
}

fn volume_fields(out: &mut Encoder, volume: Option<&Value>) {
    let Some(volume) = volume else {
        out.text("no volume");
        return;
    };
    match volume.get("hostPath").filter(|h| !h.is_null()) {
        Some(host_path) => {
            out.text("hostPath");
            out.json_text(volume.get("name"));
            out.json_text(host_path.get("path"));
            out.json_text(host_path.get("type"));
        }
        None => out.text("not hostPath"),
    }
}

/// Length-prefixed fields: `u64` big-endian length, then the bytes.
struct Encoder(Vec<u8>);

impl Encoder {
    fn count(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u64).to_be_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.extend_from_slice(bytes);
    }

    /// A string field: tag `s`.
    fn text(&mut self, text: &str) {
        self.bytes(b"s");
        self.bytes(text.as_bytes());
    }

    /// A field that should be a string: absent and `null` are `""` (the default of every
    /// string field sealed), anything else not a string is its JSON under another tag.
    fn json_text(&mut self, value: Option<&Value>) {
        match value {
            None | Some(Value::Null) => self.text(""),
            Some(Value::String(text)) => self.text(text),
            Some(other) => self.other(other),
        }
    }

    /// A value of an unexpected type: tag `j`, its JSON text.
    fn other(&mut self, value: &Value) {
        self.bytes(b"j");
        self.bytes(value.to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests;
