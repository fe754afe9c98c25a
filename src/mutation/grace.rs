//! docs/DESIGN.md#grace-period: the grace period must cover the preStop hooks and the app's
//! shutdown.

use crate::config::Config;
use crate::json::{json, Value};
use crate::mutation::containers::app_containers;
use crate::mutation::hook::existing::Existing;
use crate::mutation::hook::script;
use crate::mutation::hook::Action;
use crate::mutation::scope::settings::Settings;

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_GRACE_SECONDS: u64 = 30;

/// docs/DESIGN.md#grace-period: seconds a container's final preStop may take, from literal sleeps.
fn hook_estimate(container: &Value, config: &Config) -> u64 {
    match Existing::of(container) {
        Existing::Ours(hook) => {
            let budget = if matches!(hook.action, Action::Cleanup(_)) {
                config.cleanup_budget_seconds
            } else {
                0
            };
            hook.literal_sleep_seconds().saturating_add(budget)
        }
        Existing::Exec(argv) => script::literal_sleep_seconds(&argv.join(" ")),
        Existing::Sleep(seconds) => seconds,
        Existing::None | Existing::Other(_) => 0,
    }
}

/// docs/DESIGN.md#grace-period: raises `terminationGracePeriodSeconds` to cover hook + shutdown (+
/// the sidecar's cleanup), never lowers it, caps it at `maxGraceSeconds`. Returns the resulting
/// value.
///
/// Only where something needs the time: a hook or sidecar we inject, a user's hook that
/// takes time, or `hook-seconds`. Otherwise the value is the user's choice (an explicit
/// `0` included) and, under namespace opt-in, an object that asked for nothing is not
/// patched for it.
pub(super) fn raise(
    spec: &mut Value,
    settings: &Settings,
    config: &Config,
    injected: bool,
    has_sidecar: bool,
    warnings: &mut Vec<String>,
) -> u64 {
    let hook = settings.hook_seconds.unwrap_or_else(|| {
        app_containers(spec)
            .iter()
            .map(|c| hook_estimate(c, config))
            .max()
            .unwrap_or(0)
    });
    let current = spec
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_u64);
    if !injected && !has_sidecar && hook == 0 {
        return current.unwrap_or(DEFAULT_GRACE_SECONDS);
    }
    let sidecar = if has_sidecar {
        config.cleanup_budget_seconds
    } else {
        0
    };
    let needed = hook
        .saturating_add(settings.shutdown_seconds)
        .saturating_add(sidecar);
    let effective = current.unwrap_or(DEFAULT_GRACE_SECONDS);
    let max = config.max_grace_seconds;
    // Said only where the cap holds the period below what is needed: a pod whose own
    // period already covers it (above the cap or not) is not capped.
    let capped = match needed {
        needed if needed <= max => needed,
        needed if effective >= needed => needed,
        needed if effective > max => {
            warnings.push(format!(
                "hook and shutdown need {needed}s, more than terminationGracePeriodSeconds \
                 {effective}s; not raised beyond maxGraceSeconds {max}s"
            ));
            max
        }
        needed => {
            warnings.push(format!(
                "grace period capped at maxGraceSeconds {max}s; hook and shutdown need {needed}s"
            ));
            max
        }
    };
    if capped > effective {
        spec["terminationGracePeriodSeconds"] = json!(capped);
        return capped;
    }
    effective
}
