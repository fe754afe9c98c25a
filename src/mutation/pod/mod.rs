//! Mutation of one pod template (`metadata` + `spec`): shell fix, the preStop hooks or the
//! cleanup sidecar, the cleaner program's delivery, the grace period and the status
//! annotation.
//!
//! Runs the stages on one template: each app container's plan from `scope` and `targets`
//! (`plan.rs`), then `shell_fix`, the hooks from `hook` or the sidecar from `inject`, the
//! program's delivery and `grace`. Hands the mutated template back to the core, which
//! diffs it into the patch.

mod left;
mod plan;
mod warnings;

use crate::config::{CleanerMode, Config, Mode};
use crate::json::{json, Map, Value};
use crate::mutation::containers::app_containers;
use crate::mutation::hook::existing::Existing;
use crate::mutation::hook::{Action, Before, Hook, Target};
use crate::mutation::inject::delivery::Delivery;
use crate::mutation::inject::node_agent::NodeAgent;
use crate::mutation::inject::sidecar::{self, SidecarPlan};
use crate::mutation::object_text::ObjectText;
use crate::mutation::scope::gates::{self, storable};
use crate::mutation::scope::settings::{BadAnnotation, Cleanup, Settings, CONTAINERS, STATUS};
use crate::mutation::seal::{self, REAP};
use crate::mutation::targets::messages::{auto_warnings, explicit_refusal, explicit_unconfigured};
use crate::mutation::targets::{self, without_agent, PathRefusal};
use crate::mutation::warning::cited;
use crate::mutation::{
    grace, scope::restarts, shell_fix, shell_fix::image, targets::sharing, targets::stale_paths,
};
use left::{left_to_the_reaper, CleanedInPod};
use plan::{admit, name_of, plan};

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
    let (plans, wanted_targets): (Vec<Plan>, Vec<Vec<Target>>) =
        plan(spec, settings, config, &mut warnings)?
            .into_iter()
            .unzip();

    let mut sidecar = SidecarPlan::around(sidecar::foreign_mounts(spec));
    let pod_security = spec.get("securityContext").cloned();
    let mut injected = Vec::new();
    let mut served_by_sidecar = Vec::new();
    let mode = config.cleaner.mode;
    let delivery = Delivery::of(spec);
    let agent = NodeAgent::of(spec, config);
    // Issue 31: the program sidecar of such a pod cleans only on the node's word.
    let restarts_in_place = restarts::pod_restarts_in_place(spec);
    // Per app container: whether its hook runs the program, which must be mounted there,
    // and whether that program asks the node agent, whose socket must be mounted too.
    let mut needs_program = Vec::new();
    let mut needs_agent = Vec::new();
    // The program hooks, given their `--deadline` once the grace period is known.
    let mut program_hooks = Vec::new();
    // Per app container, what cleans its targets in the pod; kept only when something may
    // be left to the reaper (a seal key: it empties only what the webhook sealed).
    let leaves_to_reaper = !config.seal.is_empty();
    let mut cleaned_in_pod: Vec<CleanedInPod> = Vec::new();
    if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        for (index, (container, plan)) in containers.iter_mut().zip(plans).enumerate() {
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
                config,
                &mut warnings,
            );
            let mut needs = false;
            let mut asks_agent = false;
            let mut cleaned = CleanedInPod {
                container: if leaves_to_reaper {
                    name.clone()
                } else {
                    String::new()
                },
                ..CleanedInPod::default()
            };
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
                            "container {} {}: it mounts {}, where the cleaner program goes",
                            cited(format_args!("{name:?}")),
                            warnings::not_cleaned(config),
                            cited(path)
                        ));
                        restore(container, hook.before);
                    } else {
                        if let (Some(why), Action::Cleanup(paths)) =
                            (&settings.shared_by, &hook.action)
                        {
                            let paths = crate::mutation::hook::target_paths(paths);
                            sharing::warn_shared(container, &paths, why, &mut warnings);
                        }
                        let socket = match mode {
                            CleanerMode::Binary => {
                                agent.socket_for(list(container, "volumeMounts"))
                            }
                            CleanerMode::Shell => None,
                        };
                        if let (CleanerMode::Binary, None, Action::Cleanup(paths)) =
                            (mode, socket, &hook.action)
                        {
                            let paths = crate::mutation::hook::target_paths(paths);
                            without_agent::warn_fixed(container, &name, &paths, &mut warnings);
                        }
                        if let (true, Action::Cleanup(paths)) = (leaves_to_reaper, &hook.action) {
                            cleaned.by_hook = crate::mutation::hook::target_paths(paths);
                        }
                        set_exec(container, hook.to_argv(mode, socket));
                        injected.push(name);
                        needs = mode == CleanerMode::Binary;
                        // A custom script has no cleanup to cut off: it runs to the kill.
                        if needs && matches!(hook.action, Action::Cleanup(_)) {
                            program_hooks.push(index);
                        }
                        asks_agent = socket.is_some();
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
                    if mode == CleanerMode::Binary && config.node_agent.is_none() {
                        match &restarts_in_place {
                            Some(policy) => without_agent::warn_restartable(
                                &name,
                                &paths,
                                policy,
                                &mut warnings,
                            ),
                            None => {
                                without_agent::warn_fixed(container, &name, &paths, &mut warnings)
                            }
                        }
                    }
                    served_by_sidecar.push(name.clone());
                    if leaves_to_reaper {
                        cleaned.by_sidecar = paths;
                    }
                    injected.push(name);
                }
            }
            if leaves_to_reaper {
                cleaned_in_pod.push(cleaned);
            }
            needs_program.push(needs);
            needs_agent.push(asks_agent);
        }
    }
    delivery.apply(spec, &needs_program, &config.cleaner.image);
    sidecar.ask_node_agent(&agent, config);
    let wanted = (!sidecar.targets.is_empty()).then_some(&sidecar);
    let sidecar_name = sidecar::apply(spec, wanted, config, &mut warnings);
    if sidecar_name.is_none() {
        injected.retain(|name| !served_by_sidecar.contains(name));
    }
    let sidecar_asks_agent = sidecar_name.is_some() && sidecar.asks_node_agent();
    agent.apply(spec, &needs_agent, sidecar_asks_agent);

    let has_sidecar = sidecar_name.is_some();
    let grace = grace::raise(
        spec,
        settings,
        config,
        !injected.is_empty(),
        has_sidecar,
        &mut warnings,
    );
    set_deadlines(spec, &program_hooks, sidecar_name.as_deref(), grace, config);
    let left = left_to_the_reaper(&wanted_targets, &cleaned_in_pod, sidecar_name.is_some());
    super::set_annotation(template, REAP, seal::reap_annotation(&left));
    let status_present = template
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(STATUS))
        .is_some();
    // The whole template is compared last, only when nothing cheaper decided: comparing
    // two maps looks every member of one up in the other (equality ignores the order).
    if !injected.is_empty() || status_present || template != original {
        let mut status = ObjectText::new();
        status
            .number("version", 1)
            .strings("containers", &injected)
            .number("grace", grace);
        if let Some(name) = &sidecar_name {
            status.string("sidecar", name);
        }
        set_status(template, status.finish());
    }
    Ok(warnings)
}

/// Warns once per container when its own preStop deletes paths outside its volumes.
pub(super) fn warn_about_unmounted_cleanup(
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
            "container {}: preStop deletes {}, which is on no volume mount",
            cited(format_args!("{:?}", name_of(container))),
            cited(path)
        ));
    }
}

/// The entries of `value[key]`; none when absent or not an array.
fn list<'v>(value: &'v Value, key: &str) -> &'v [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// The object at `value[key]`, created when absent or null; `None` when it is something else.
pub(crate) fn child<'v>(value: &'v mut Value, key: &str) -> Option<&'v mut Value> {
    let slot = value.as_object_mut()?.entry(key).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.is_object().then_some(slot)
}

/// docs/CLEANUP.md#the-deadline: gives each program hook (`hooks`, indices of app
/// containers) and the program sidecar their `--deadline`, now that the grace period is
/// final (its estimate reads the hooks, so they are in place before it, without one).
/// The option is inserted where `HookArgs::render` writes it, first after the
/// subcommand, rather than rendered again: the same argv for a fraction of the cost (the
/// core tests' second pass re-parses and re-renders it, and must find it ours).
fn set_deadlines(
    spec: &mut Value,
    hooks: &[usize],
    sidecar: Option<&str>,
    grace: u64,
    config: &Config,
) {
    use crate::mutation::hook::deadline_seconds;
    if let (Some(seconds), Some(containers)) = (
        deadline_seconds(grace, None),
        spec.get_mut("containers").and_then(Value::as_array_mut),
    ) {
        for &index in hooks {
            let command = containers
                .get_mut(index)
                .and_then(|c| c.pointer_mut("/lifecycle/preStop/exec/command"));
            insert_deadline(command, seconds);
        }
    }
    let (Some(name), CleanerMode::Binary) = (sidecar, config.cleaner.mode) else {
        return;
    };
    let Some(seconds) = deadline_seconds(grace, Some(config.cleanup_budget_seconds)) else {
        return;
    };
    if let Some(init) = spec.get_mut("initContainers").and_then(Value::as_array_mut) {
        let ours = init
            .iter_mut()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name));
        insert_deadline(ours.and_then(|c| c.get_mut("command")), seconds);
    }
}

/// `[program, subcommand, …]` becomes `[program, subcommand, "--deadline", S, …]`.
fn insert_deadline(command: Option<&mut Value>, seconds: u64) {
    if let Some(argv) = command.and_then(Value::as_array_mut) {
        if argv.len() >= 2 {
            argv.splice(2..2, [json!("--deadline"), json!(seconds.to_string())]);
        }
    }
}

pub(super) fn set_exec(container: &mut Value, argv: Vec<String>) {
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
pub(super) fn restore(container: &mut Value, before: Before) {
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

pub(super) fn set_status(template: &mut Value, status: String) {
    if let Some(annotations) = child(template, "metadata").and_then(|m| child(m, "annotations")) {
        annotations[STATUS] = Value::String(status);
    }
}
