//! Mutation of one pod template (`metadata` + `spec`): shell fix, the preStop hooks or the
//! cleanup sidecar, the cleaner program's delivery, the grace period and the status
//! annotation.

use crate::config::{CleanerMode, Config, Mode};
use crate::mutation::containers::app_containers;
use crate::mutation::hook::existing::Existing;
use crate::mutation::hook::{Action, Before, Hook};
use crate::mutation::inject::delivery::Delivery;
use crate::mutation::inject::sidecar::{self, SidecarPlan};
use crate::mutation::scope::gates::{self, storable};
use crate::mutation::scope::settings::{BadAnnotation, Cleanup, Settings, CONTAINERS, STATUS};
use crate::mutation::targets::messages::{auto_warnings, explicit_refusal, explicit_unconfigured};
use crate::mutation::targets::{self, PathRefusal};
use crate::mutation::{
    grace, scope::restarts, shell_fix, shell_fix::image, targets::sharing, targets::stale_paths,
};
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
    /// When the sidecar must refuse the container, `fallback` is its exec hook, or why
    /// it can have none.
    Sidecar {
        paths: Vec<String>,
        restore: Option<Before>,
        fallback: Result<(Hook, Vec<String>), String>,
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

    let mut sidecar = SidecarPlan::around(sidecar::foreign_mounts(spec));
    let pod_security = spec.get("securityContext").cloned();
    let mut injected = Vec::new();
    let mut served_by_sidecar = Vec::new();
    let mode = config.cleaner.mode;
    let delivery = Delivery::of(spec);
    // Per app container: whether its hook runs the program, which must be mounted there.
    let mut needs_program = Vec::new();
    if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        for (container, plan) in containers.iter_mut().zip(plans) {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let plan = admit(
                plan,
                &mut sidecar,
                container,
                pod_security.as_ref(),
                &mut warnings,
            );
            let mut needs = false;
            match plan {
                Plan::Leave => {}
                Plan::Exec(hook) => {
                    let conflict = match mode {
                        CleanerMode::Binary => delivery.conflict(container).map(str::to_owned),
                        CleanerMode::Shell => None,
                    };
                    if let Some(path) = conflict {
                        // The program could not be mounted, or would hide the user's mount.
                        warnings.push(format!(
                            "container {name:?} not cleaned: it mounts {path}, where the cleaner program goes"
                        ));
                        restore(container, hook.before);
                    } else {
                        if let (Some(why), Action::Cleanup(paths)) =
                            (&settings.shared_by, &hook.action)
                        {
                            let paths = crate::mutation::hook::target_paths(paths);
                            sharing::warn_shared(container, &paths, why, &mut warnings);
                        }
                        set_exec(container, hook.to_argv(mode));
                        injected.push(name);
                        needs = mode == CleanerMode::Binary;
                    }
                }
                Plan::Restore(before) => {
                    restore(container, storable(before, config, &name, &mut warnings))
                }
                Plan::Sidecar {
                    paths,
                    restore: before,
                    ..
                } => {
                    if let Some(before) = before {
                        restore(container, storable(before, config, &name, &mut warnings));
                    }
                    if let Some(why) = &settings.shared_by {
                        sharing::warn_shared(container, &paths, why, &mut warnings);
                    }
                    served_by_sidecar.push(name.clone());
                    injected.push(name);
                }
            }
            needs_program.push(needs);
        }
    }
    delivery.apply(spec, &needs_program, &config.cleaner.image);
    let wanted = (!sidecar.targets.is_empty()).then_some(&sidecar);
    let sidecar_name = sidecar::apply(spec, wanted, config, &mut warnings);
    if sidecar_name.is_none() {
        injected.retain(|name| !served_by_sidecar.contains(name));
    }

    let has_sidecar = sidecar_name.is_some();
    let grace = grace::raise(spec, settings, config, has_sidecar, &mut warnings);
    let changed = template != original;
    let status_present = template
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS))
        .is_some();
    if changed || status_present || !injected.is_empty() {
        let mut status = json!({"version": 1, "containers": injected, "grace": grace});
        if let Some(name) = sidecar_name {
            status["sidecar"] = json!(name);
        }
        set_status(template, status.to_string());
    }
    Ok(warnings)
}

/// A sidecar plan becomes final once the sidecar accepts the container; when it must
/// refuse it, the container keeps its own exec hook (its own mounts passed §3) or, when
/// it can have none, is not cleaned — both with a warning.
fn admit(
    plan: Plan,
    sidecar: &mut SidecarPlan,
    container: &Value,
    pod_security: Option<&Value>,
    warnings: &mut Vec<String>,
) -> Plan {
    let Plan::Sidecar {
        paths,
        restore,
        fallback,
    } = plan
    else {
        return plan;
    };
    let Err(refusal) = sidecar.try_add(container, &paths, pod_security) else {
        return Plan::Sidecar {
            paths,
            restore,
            fallback,
        };
    };
    let name = name_of(container);
    match fallback {
        Ok((hook, shell_warnings)) => {
            warnings.push(format!(
                "container {name:?}: no cleanup sidecar: {refusal}; using an exec preStop"
            ));
            warnings.extend(shell_warnings);
            Plan::Exec(hook)
        }
        Err(no_exec) => {
            warnings.push(format!(
                "container {name:?} not cleaned: {refusal} (sidecar), {no_exec} (exec)"
            ));
            restore.map_or(Plan::Leave, Plan::Restore)
        }
    }
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
            "nothing to clean: no writable hostPath directory mount may be cleaned (cleanup: auto)"
                .to_owned(),
        );
    }
    Ok(containers
        .iter()
        .zip(actions)
        .map(|(container, action)| {
            plan_container(spec, container, action, settings, config, warnings)
        })
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
                let mut found = targets::auto_targets(spec, container, config);
                warnings.extend(auto_warnings(name_of(container), &found));
                if !settings.cleanup_requested {
                    sharing::keep_private(container, &mut found.targets, warnings);
                }
                let found_targets = targets::identify_in(spec, container, &found.targets, config);
                actions.push((!found_targets.is_empty()).then_some(Action::Cleanup(found_targets)));
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
                        // No allowed prefixes: the operator's to fix, not the user's; the
                        // rest of the mutation (shell fix, grace, ttl) still applies.
                        Err(other) if other.is_unconfigured() => {
                            warnings.push(explicit_unconfigured(name_of(container), path, &other));
                            refusal = other;
                        }
                        // A safety rule refuses the path for the whole pod, even when
                        // another container could clean it: the user asked for it.
                        Err(other) if !other.is_not_ours() => {
                            return Err(explicit_refusal(paths, path, name_of(container), &other))
                        }
                        Err(_) if refusal.is_unconfigured() => {}
                        Err(other) => refusal = other,
                    }
                }
                if per_container
                    .iter()
                    .all(|paths_of| !paths_of.contains(path))
                    && !refusal.is_unconfigured()
                {
                    return Err(explicit_refusal(paths, path, "", &refusal));
                }
            }
            actions.extend(
                per_container
                    .into_iter()
                    .zip(containers)
                    .map(|(paths, container)| {
                        (!paths.is_empty()).then(|| {
                            Action::Cleanup(targets::identify_in(spec, container, &paths, config))
                        })
                    }),
            );
        }
    }
    Ok(actions)
}

fn plan_container(
    spec: &Value,
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
    // The program needs no shell: only the shell form and a custom script do.
    let needs_shell =
        config.cleaner.mode == CleanerMode::Shell || matches!(action, Action::Custom(_));
    let exec_impossible = match &existing {
        Existing::Other(kind) => Some(format!("its preStop is {kind}")),
        _ if needs_shell && image::lacks_shell(image, config) => {
            Some(format!("{image} has no shell"))
        }
        _ => None,
    };
    // SPEC §4: no exec-hook cleanup where the kubelet may start the container again in
    // this pod; the sidecar cleans only when the pod ends — unless restart rules restart
    // the whole pod in place, the sidecar included.
    let cleans = matches!(action, Action::Cleanup(_));
    let exec_impossible = exec_impossible.or_else(|| {
        let why = restarts::restarts_in_pod(spec, container).filter(|_| cleans)?;
        Some(format!("{why} restarts it in its pod"))
    });
    let wants_sidecar = settings.mode == Mode::Sidecar || exec_impossible.is_some();
    let exec_hook = |action: Action, warnings: &mut Vec<String>| {
        let shell = if !needs_shell {
            // The program's cleanup hook runs no shell: none to choose, none to warn about.
            String::new()
        } else if settings.fix_shell {
            let (shell, warning) =
                shell_fix::hook_shell(&settings.shell, image, name, config, &action);
            warnings.extend(warning);
            shell
        } else {
            settings.shell.clone()
        };
        Hook {
            shell,
            before: existing.before(),
            action,
        }
    };
    let unavailable = match restarts::in_place_restarts(spec).filter(|_| cleans) {
        Some(_) => Some("the sidecar restarts too".to_owned()),
        None => gates::sidecar_unavailable(config),
    };
    match (&action, wants_sidecar, unavailable.is_none()) {
        (Action::Cleanup(paths), true, true) => {
            // Built now (its shell-fix warning kept aside) in case the sidecar refuses.
            let fallback = match &exec_impossible {
                Some(reason) => Err(reason.clone()),
                None => {
                    let mut aside = Vec::new();
                    Ok((exec_hook(action.clone(), &mut aside), aside))
                }
            };
            return Plan::Sidecar {
                paths: crate::mutation::hook::target_paths(paths),
                restore: ours,
                fallback,
            };
        }
        (Action::Custom(_), true, _) if exec_impossible.is_some() => {
            let reason = exec_impossible.unwrap_or_default();
            warnings.push(format!(
                "container {name:?}: {reason}; the custom command is not injected"
            ));
            return ours.map_or(Plan::Leave, Plan::Restore);
        }
        (_, true, _) if exec_impossible.is_some() => {
            let reason = exec_impossible.unwrap_or_default();
            let why = unavailable
                .as_deref()
                .unwrap_or("sidecar mode not available");
            warnings.push(format!(
                "container {name:?}: {reason}; cleanup skipped ({why})"
            ));
            // A hook of ours that cannot run here any more (say the program's, after a
            // switch to cleaner.mode: shell) gives the user's handler back.
            return ours.map_or(Plan::Leave, Plan::Restore);
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
    Plan::Exec(exec_hook(action, warnings))
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
