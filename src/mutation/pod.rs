//! Mutation of one pod template (`metadata` + `spec`): shell fix, the preStop hooks or the
//! cleanup sidecar, the grace period and the status annotation.

use super::existing::Existing;
use super::gates::{self, storable};
use super::hook::{Action, Before, Hook};
use super::settings::{BadAnnotation, Cleanup, Settings, CLEANUP, CONTAINERS, STATUS};
use super::sidecar::{self, SidecarPlan};
use super::targets::{self, PathRefusal};
use super::{grace, image, shell_fix, stale_paths};
use crate::config::{Config, Mode};
use serde_json::{json, Map, Value};

/// What happens to one app container.
#[derive(Debug)]
enum Plan {
    /// Not ours to touch.
    Leave,
    /// Our exec preStop with this hook.
    Exec(Hook),
    /// Our hook is there but nothing is wanted any more: give the user's handler back.
    Restore(Before),
    /// Cleaned by the sidecar; our exec hook, if any, gives the user's handler back.
    Sidecar {
        paths: Vec<String>,
        restore: Option<Before>,
    },
}

/// Mutates `template` in place; returns the warnings, or the annotation to refuse.
/// `original` is the template as it came in, to tell whether anything changed.
pub fn mutate(
    template: &mut Value,
    original: &Value,
    settings: &Settings,
    config: &Config,
) -> Result<Vec<String>, BadAnnotation> {
    let mut warnings = Vec::new();
    let Some(spec) = template.get_mut("spec").filter(|spec| spec.is_object()) else {
        return Ok(warnings);
    };
    if settings.fix_shell {
        warnings.extend(shell_fix::fix_shells(spec, config));
    }
    let plans = plan(spec, settings, config, &mut warnings)?;

    let mut sidecar = SidecarPlan::default();
    let sidecar_name_taken = sidecar::name_taken(spec);
    let mut injected = Vec::new();
    if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        for (container, plan) in containers.iter_mut().zip(plans) {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            match plan {
                Plan::Leave => {}
                Plan::Exec(hook) => {
                    set_exec(container, hook.to_argv());
                    injected.push(name);
                }
                Plan::Restore(before) => {
                    restore(container, storable(before, config, &name, &mut warnings))
                }
                Plan::Sidecar { .. } if sidecar_name_taken => {
                    let warning = format!(
                        "container {name:?} not cleaned: an init container is already named {:?}",
                        sidecar::NAME
                    );
                    if !warnings.contains(&warning) {
                        warnings.push(warning);
                    }
                }
                Plan::Sidecar {
                    paths,
                    restore: before,
                } => {
                    if let Some(before) = before {
                        restore(container, storable(before, config, &name, &mut warnings));
                    }
                    sidecar.add(container, &paths, &mut warnings);
                    injected.push(name);
                }
            }
        }
    }
    let has_sidecar = !sidecar.targets.is_empty();
    sidecar::apply(spec, has_sidecar.then_some(&sidecar), config);

    let grace = grace::raise(spec, settings, config, has_sidecar, &mut warnings);
    let changed = template != original;
    let status_present = template
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS))
        .is_some();
    if changed || status_present || !injected.is_empty() {
        let mut status = json!({"version": 1, "containers": injected, "grace": grace});
        if has_sidecar {
            status["sidecar"] = json!(sidecar::NAME);
        }
        set_status(template, status.to_string());
    }
    Ok(warnings)
}

pub(super) fn app_containers(spec: &Value) -> &[Value] {
    spec.get("containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn name_of(container: &Value) -> &str {
    container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Decides every app container's plan, reading the spec only.
fn plan(
    spec: &Value,
    settings: &Settings,
    config: &Config,
    warnings: &mut Vec<String>,
) -> Result<Vec<Plan>, BadAnnotation> {
    let containers = app_containers(spec);
    if let Some(selected) = &settings.containers {
        let names: Vec<&str> = containers.iter().map(name_of).collect();
        if let Some(unknown) = selected.iter().find(|name| !names.contains(&name.as_str())) {
            return Err(BadAnnotation::new(
                CONTAINERS,
                &selected.join(","),
                format!(
                    "no app container named {unknown:?}; containers: {}",
                    names.join(", ")
                ),
            ));
        }
    }
    let is_selected = |container: &Value| {
        settings
            .containers
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name_of(container)))
    };
    let actions = wanted_actions(spec, containers, settings, config, &is_selected, warnings)?;
    if settings.cleanup == Cleanup::Auto
        && settings.cleanup_requested
        && actions.iter().all(Option::is_none)
    {
        warnings.push(
            "nothing to clean: no writable hostPath directory mounts (cleanup: auto)".to_owned(),
        );
    }
    Ok(containers
        .iter()
        .zip(actions)
        .map(|(container, action)| plan_container(container, action, settings, config, warnings))
        .collect())
}

/// What each app container should run, before choosing exec or sidecar.
fn wanted_actions(
    spec: &Value,
    containers: &[Value],
    settings: &Settings,
    config: &Config,
    is_selected: &dyn Fn(&Value) -> bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Option<Action>>, BadAnnotation> {
    if let Some(script) = &settings.command {
        return Ok(containers
            .iter()
            .map(|c| is_selected(c).then(|| Action::Custom(script.clone())))
            .collect());
    }
    let mut actions: Vec<Option<Action>> = Vec::with_capacity(containers.len());
    match &settings.cleanup {
        Cleanup::Nothing | Cleanup::Off => actions.resize(containers.len(), None),
        Cleanup::Auto => {
            for container in containers {
                if !is_selected(container) {
                    actions.push(None);
                    continue;
                }
                let found = targets::auto_targets(spec, container, config);
                for (target, nested) in &found.skipped {
                    warnings.push(format!(
                        "container {:?}: {target} not cleaned: {nested} is mounted inside it",
                        name_of(container)
                    ));
                }
                actions.push((!found.targets.is_empty()).then_some(Action::Cleanup(found.targets)));
            }
        }
        Cleanup::Paths(paths) => {
            let mut per_container: Vec<Vec<String>> = vec![Vec::new(); containers.len()];
            for path in paths {
                let mut refusal = PathRefusal::NotMounted;
                for (index, container) in containers
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| is_selected(c))
                {
                    match targets::check_explicit(spec, container, path, config) {
                        Ok(()) => per_container[index].push(path.clone()),
                        Err(PathRefusal::NotMounted) => {}
                        Err(other) => refusal = other,
                    }
                }
                if per_container
                    .iter()
                    .all(|paths_of| !paths_of.contains(path))
                {
                    return Err(explicit_refusal(paths, path, refusal));
                }
            }
            actions.extend(
                per_container
                    .into_iter()
                    .map(|paths| (!paths.is_empty()).then_some(Action::Cleanup(paths))),
            );
        }
    }
    Ok(actions)
}

fn explicit_refusal(paths: &[String], path: &str, refusal: PathRefusal) -> BadAnnotation {
    let problem = match refusal {
        PathRefusal::NotMounted => {
            format!("{path} is not at or below a writable volumeMount of the selected containers")
        }
        PathRefusal::ReadOnly(mount) => format!("{path} is on the read-only mount {mount}"),
        PathRefusal::Protected { mount, host_path } => {
            format!("{path} is on {mount}, a hostPath volume of the protected host directory {host_path}")
        }
        PathRefusal::Nested(nested) => {
            format!("{path} has another volume mounted inside it at {nested}")
        }
    };
    BadAnnotation::new(
        CLEANUP,
        &paths.join(","),
        format!("{problem}; give paths inside the container's own writable mounts"),
    )
}

fn plan_container(
    container: &Value,
    action: Option<Action>,
    settings: &Settings,
    config: &Config,
    warnings: &mut Vec<String>,
) -> Plan {
    let existing = Existing::of(container);
    warn_about_unmounted_cleanup(container, &existing, warnings);
    // The user's own handler inside our hook, when the container has one of ours.
    let ours = match &existing {
        Existing::Ours(hook) => Some(hook.before.clone()),
        _ => None,
    };
    let Some(action) = action else {
        return ours.map_or(Plan::Leave, Plan::Restore);
    };
    let name = name_of(container);
    let image = container
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let exec_impossible = match &existing {
        Existing::Other(kind) => Some(format!("its preStop is {kind}")),
        _ if image::lacks_shell(image, config) => Some(format!("{image} has no shell")),
        _ => None,
    };
    let wants_sidecar = settings.mode == Mode::Sidecar || exec_impossible.is_some();
    let unavailable = gates::sidecar_unavailable(config);
    match (&action, wants_sidecar, unavailable.is_none()) {
        (Action::Cleanup(paths), true, true) => {
            return Plan::Sidecar {
                paths: paths.clone(),
                restore: ours,
            }
        }
        (_, true, _) if exec_impossible.is_some() => {
            let reason = exec_impossible.unwrap_or_default();
            let why = unavailable
                .as_deref()
                .unwrap_or("sidecar mode not available");
            warnings.push(format!(
                "container {name:?}: {reason}; cleanup skipped ({why})"
            ));
            return Plan::Leave;
        }
        (Action::Custom(_), true, _) => warnings.push(format!(
            "container {name:?}: a custom command runs as an exec preStop"
        )),
        (_, true, false) => warnings.push(format!(
            "container {name:?}: {}; using an exec preStop",
            unavailable.unwrap_or_default()
        )),
        _ => {}
    }
    let shell = if settings.fix_shell {
        let (shell, warning) = shell_fix::hook_shell(&settings.shell, image, name, config);
        warnings.extend(warning);
        shell
    } else {
        settings.shell.clone()
    };
    Plan::Exec(Hook {
        shell,
        before: existing.before(),
        action,
    })
}

/// Warns once per container when its own preStop deletes paths outside its volumes.
fn warn_about_unmounted_cleanup(
    container: &Value,
    existing: &Existing,
    warnings: &mut Vec<String>,
) {
    let argv = match existing {
        Existing::Exec(argv) => argv,
        Existing::Ours(Hook {
            before: Before::Exec(argv),
            ..
        }) => argv,
        _ => return,
    };
    let mounts = targets::mounts(container);
    // The argv itself (`rm -rf /x`) or a script inside it (`sh -c "rm -rf /x"`).
    let joined = argv.join(" ");
    let stale = std::iter::once(&joined).chain(argv).find_map(|text| {
        stale_paths::unmounted_rm_targets(text, &mounts)
            .into_iter()
            .next()
    });
    if let Some(path) = stale {
        warnings.push(format!(
            "container {:?}: preStop deletes {path}, which is on no volume mount",
            name_of(container)
        ));
    }
}

/// The object at `value[key]`, created when absent or null; `None` when it is something else.
pub(crate) fn child<'v>(value: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    let slot = value.as_object_mut()?.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.is_object().then_some(slot)
}

fn set_exec(container: &mut Value, argv: Vec<String>) {
    let Some(pre_stop) = child(container, "lifecycle").and_then(|l| child(l, "preStop")) else {
        return;
    };
    if let Some(handler) = pre_stop.as_object_mut() {
        handler.remove("sleep");
    }
    if let Some(exec) = child(pre_stop, "exec") {
        exec["command"] = json!(argv);
    }
}

/// Puts back the user's own handler that our hook wrapped.
fn restore(container: &mut Value, before: Before) {
    match before {
        Before::Exec(argv) => set_exec(container, argv),
        Before::Sleep(seconds) => {
            if let Some(pre_stop) = container
                .pointer_mut("/lifecycle/preStop")
                .and_then(Value::as_object_mut)
            {
                pre_stop.remove("exec");
                pre_stop.insert("sleep".to_owned(), json!({ "seconds": seconds }));
            }
        }
        Before::Nothing => {
            if let Some(lifecycle) = container
                .get_mut("lifecycle")
                .and_then(Value::as_object_mut)
            {
                lifecycle.remove("preStop");
                if lifecycle.is_empty() {
                    container.as_object_mut().map(|c| c.remove("lifecycle"));
                }
            }
        }
    }
}

fn set_status(template: &mut Value, status: String) {
    if let Some(annotations) = child(template, "metadata").and_then(|m| child(m, "annotations")) {
        annotations[STATUS] = Value::String(status);
    }
}
