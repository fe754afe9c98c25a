//! The targets that no cleanup in the pod runs, left to the node reaper in the
//! `prestop-injector.io/reap` annotation (issue 38, class 2), under the seal.

use super::{Cleaner, Place, REAP};
use crate::json::Value;
use crate::mutation::hook::Target;

/// One target of the `prestop-injector.io/reap` annotation: a target of `container` that
/// no cleanup in the pod runs, with the host directory it must be (`--host`'s syntax).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReapTarget {
    pub container: String,
    pub target: String,
    pub host: String,
}

/// The annotation's text for `targets`; `None` when there are none.
pub fn reap_annotation(targets: &[ReapTarget]) -> Option<String> {
    (!targets.is_empty()).then(|| serde_json::to_string(targets).unwrap_or_default())
}

/// The app containers the reap annotation `text` names, each with its targets, as
/// [`Cleaner`]s of [`Place::Reaper`] (no argv of their own: `program`, so every target
/// carries the `--host` the reaper checks). `Err` when the text is not the annotation's
/// format or names a container the pod does not have.
pub fn reaper_targets<'a>(spec: &'a Value, text: &str) -> Result<Vec<Cleaner<'a>>, String> {
    let targets: Vec<ReapTarget> = serde_json::from_str(text)
        .map_err(|error| format!("{REAP} is not a list of targets: {error}"))?;
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut found: Vec<Cleaner<'a>> = Vec::new();
    for ReapTarget {
        container: name,
        target,
        host,
    } in targets
    {
        let Some(container) = containers
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name.as_str()))
        else {
            return Err(format!(
                "{REAP} names container {name:?}, which the pod has not"
            ));
        };
        let target = Target::on_host(target, host);
        match found.iter_mut().find(|c| c.name() == name) {
            Some(cleaner) => cleaner.targets.push(target),
            None => found.push(Cleaner {
                place: Place::Reaper,
                container,
                argv: Vec::new(),
                targets: vec![target],
                program: true,
            }),
        }
    }
    Ok(found)
}
