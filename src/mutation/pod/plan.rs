//! Each app container's plan, decided from the spec alone: what it should run (a cleanup
//! of its targets, the user's own hook, or nothing), then exec hook or a place in the
//! cleanup sidecar, with the warnings a refusal gives.

use super::warnings::{also_mount, not_cleaned, shared_warnings};
use super::*;

/// A sidecar plan becomes final once the sidecar accepts the container; when it must
/// refuse it, the container keeps its own exec hook (its own mounts passed the target rules) or,
/// when it can have none, is not cleaned — both with a warning.
pub(super) fn admit(
    plan: Plan,
    sidecar: &mut SidecarPlan,
    container: &Value,
    pod_security: Option<&Value>,
    config: &Config,
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
                "container {quoted}: no cleanup sidecar: {refusal}; using an exec preStop",
                quoted = cited(format_args!("{name:?}"))
            ));
            warnings.extend(shell_warnings);
            Plan::Exec(hook)
        }
        Err(no_exec) => {
            warnings.push(format!(
                // The exec reason first: it names what the user can act on (another
                // container, the restart policy); a long sidecar reason may be cut.
                "container {quoted} {not_cleaned}: {no_exec} (exec), {refusal} (sidecar)",
                quoted = cited(format_args!("{name:?}")),
                not_cleaned = not_cleaned(config)
            ));
            restore.map_or(Plan::Leave, Plan::Restore)
        }
    }
}

pub(super) fn name_of(container: &Value) -> &str {
    container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Decides every app container's plan, reading the spec only; with each, the targets its
/// cleanup wants, whatever the plan (what no cleanup in the pod takes is the reaper's;
/// none without a seal key, which leaves nothing to it).
pub(super) fn plan(
    spec: &Value,
    settings: &Settings,
    config: &Config,
    warnings: &mut Vec<String>,
) -> Result<Vec<(Plan, Vec<Target>)>, BadAnnotation> {
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
            // Only a seal key lets the webhook leave targets to the reaper.
            let wanted = match &action {
                Some(Action::Cleanup(targets)) if !config.seal.is_empty() => targets.clone(),
                _ => Vec::new(),
            };
            let plan = plan_container(spec, container, action, settings, config, warnings);
            (plan, wanted)
        })
        .collect())
}

/// What each app container should run, before choosing exec or sidecar.
pub(super) fn wanted_actions(
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

pub(super) fn plan_container(
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
    // docs/DESIGN.md#where-the-cleanup-runs: no exec-hook cleanup where the kubelet may start the
    // container again in this pod; the sidecar cleans only when the pod ends — unless restart rules
    // restart the whole pod in place, the sidecar included.
    let cleans = matches!(action, Action::Cleanup(_));
    let exec_impossible = exec_impossible.or_else(|| {
        let why = restarts::restarts_in_pod(spec, container).filter(|_| cleans)?;
        Some(format!("{why} restarts it in its pod"))
    });
    // docs/DESIGN.md#where-the-cleanup-runs: nor where another container of the pod may still
    // use the directory when this one stops; the exec hook keeps only the other targets.
    let shared = shared_targets(spec, container, &action);
    let exec_action = without(&action, &shared);
    let only_shared = exec_impossible.is_none() && exec_action.is_none();
    let exec_impossible = exec_impossible.or_else(|| {
        let (path, others) = shared.first().filter(|_| only_shared)?;
        Some(format!("{} {path}", also_mount(others)))
    });
    let wants_sidecar =
        settings.mode == Mode::Sidecar || exec_impossible.is_some() || !shared.is_empty();
    let exec_hook = |action: Action, warnings: &mut Vec<String>| {
        let shell = if !needs_shell {
            // The program's cleanup hook runs no shell: none to choose, none to warn about.
            String::new()
        } else if settings.fix_shell {
            let env = shell_fix::portable::Environment::of(container.get("env"));
            let (shell, warning) =
                shell_fix::hook_shell(&settings.shell, image, name, config, &action, &env);
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
        None => gates::sidecar_unavailable(config).or_else(|| {
            // Issue 31: only the program can ask the node whether the pod is ending.
            let shell = cleans && config.cleaner.mode == CleanerMode::Shell;
            let policy = restarts::pod_restarts_in_place(spec).filter(|_| shell)?;
            Some(format!(
                "the shell sidecar cannot ask the node whether the pod ends ({policy} restarts it in place)"
            ))
        }),
    };
    let exec_action = exec_action.unwrap_or_else(|| action.clone());
    match (&action, wants_sidecar, unavailable.is_none()) {
        (Action::Cleanup(paths), true, true) => {
            // Built now (its warnings kept aside) in case the sidecar refuses.
            let fallback = match &exec_impossible {
                Some(reason) => Err(reason.clone()),
                None => {
                    let mut aside = Vec::new();
                    let hook = exec_hook(exec_action, &mut aside);
                    if settings.mode == Mode::Sidecar {
                        aside.push(format!(
                            "container {name:?}: the exec preStop used instead does not run when it exits on its own (a finished Job)"
                        ));
                    }
                    aside.extend(shared_warnings(name, &shared, "no cleanup sidecar", config));
                    Ok((hook, aside))
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
                "container {quoted}: {reason}; the custom command is not injected",
                quoted = cited(format_args!("{name:?}"))
            ));
            return ours.map_or(Plan::Leave, Plan::Restore);
        }
        (_, true, _) if exec_impossible.is_some() => {
            let reason = exec_impossible.unwrap_or_default();
            let why = unavailable
                .as_deref()
                .unwrap_or("sidecar mode not available");
            if !only_shared {
                warnings.push(format!(
                    "container {quoted}: {reason}; {skipped} ({why})",
                    quoted = cited(format_args!("{name:?}")),
                    skipped = if config.seal.is_empty() {
                        "cleanup skipped"
                    } else {
                        "left to the node reaper"
                    }
                ));
            } else {
                warnings.extend(shared_warnings(name, &shared, why, config));
            }
            // A hook of ours that cannot run here any more (say the program's, after a
            // switch to cleaner.mode: shell) gives the user's handler back.
            return ours.map_or(Plan::Leave, Plan::Restore);
        }
        (Action::Custom(_), true, _) => warnings.push(format!(
            "container {quoted}: a custom command runs as an exec preStop",
            quoted = cited(format_args!("{name:?}"))
        )),
        (_, true, false) if !shared.is_empty() => warnings.extend(shared_warnings(
            name,
            &shared,
            unavailable.as_deref().unwrap_or_default(),
            config,
        )),
        (_, true, false) => warnings.push(format!(
            "container {quoted}: {}; using an exec preStop",
            unavailable.unwrap_or_default(),
            quoted = cited(format_args!("{name:?}"))
        )),
        _ => {}
    }
    Plan::Exec(exec_hook(exec_action, warnings))
}

/// The cleanup targets of `action` whose host directory another container of the pod may
/// still use when `container` stops, each with those containers' names.
fn shared_targets(spec: &Value, container: &Value, action: &Action) -> Vec<(String, Vec<String>)> {
    let Action::Cleanup(targets) = action else {
        return Vec::new();
    };
    targets
        .iter()
        .filter_map(|target| {
            let others = sharing::still_used_by(spec, container, &target.path);
            (!others.is_empty()).then(|| (target.path.clone(), others))
        })
        .collect()
}

/// `action` without the `shared` targets; `None` when none is left.
fn without(action: &Action, shared: &[(String, Vec<String>)]) -> Option<Action> {
    match action {
        Action::Cleanup(targets) => {
            let kept: Vec<_> = targets
                .iter()
                .filter(|target| shared.iter().all(|(path, _)| path != &target.path))
                .cloned()
                .collect();
            (!kept.is_empty()).then_some(Action::Cleanup(kept))
        }
        Action::Custom(_) => Some(action.clone()),
    }
}
