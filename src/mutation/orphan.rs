//! docs/DESIGN.md#responses: the orphan-delete guard on `/validate`.
//!
//! batch/v1 deletes a Job's pods only when the client asks for it: a DELETE without
//! `propagationPolicy` (or with `Orphan`, or `orphanDependents: true`) leaves the pods
//! running, and their preStop cleanup only runs whenever they are deleted later.

use super::{Decision, Denial};
use crate::config::{Config, OrphanDelete};
use crate::json::Value;
use crate::mutation::request::{Operation, Request};
use crate::mutation::scope::settings::STATUS;

pub const MESSAGE: &str =
    "this Job's pods keep running and their cleanup waits until they are deleted; use propagationPolicy=Background";

/// Warns about, or denies, a DELETE that would orphan the pods of an injected Job.
pub fn check(request: &Request, config: &Config) -> Decision {
    if request.operation != Operation::Delete
        || request.kind.group != "batch"
        || request.kind.kind != "Job"
        || config.orphan_delete == OrphanDelete::Allow
    {
        return Decision::allow();
    }
    let injected = request
        .old_object
        .as_ref()
        .and_then(|job| job.pointer("/spec/template/metadata/annotations"))
        .and_then(|annotations| annotations.get(STATUS))
        .is_some();
    if !injected || !orphans_pods(request.options.as_ref()) {
        return Decision::allow();
    }
    match config.orphan_delete {
        OrphanDelete::Deny => Decision::deny(Denial {
            code: 403,
            reason: "orphan_delete",
            message: MESSAGE.to_owned(),
        }),
        _ => Decision {
            warnings: vec![MESSAGE.to_owned()],
            ..Decision::allow()
        },
    }
}

/// Whether DeleteOptions leave a Job's pods behind (batch/v1's default is to orphan them).
fn orphans_pods(options: Option<&Value>) -> bool {
    let policy = options
        .and_then(|o| o.get("propagationPolicy"))
        .and_then(Value::as_str);
    let orphan_dependents = options
        .and_then(|o| o.get("orphanDependents"))
        .and_then(Value::as_bool);
    orphan_dependents == Some(true)
        || policy == Some("Orphan")
        || (policy.is_none() && orphan_dependents != Some(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    #[test]
    fn message_fits_a_warning() {
        assert!(MESSAGE.len() <= 120, "{}", MESSAGE.len());
    }

    #[test]
    fn delete_options_matrix() {
        let cases = [
            (json!(null), true),
            (json!({}), true),
            (json!({"propagationPolicy": "Orphan"}), true),
            (json!({"propagationPolicy": "Background"}), false),
            (json!({"propagationPolicy": "Foreground"}), false),
            (json!({"orphanDependents": true}), true),
            (json!({"orphanDependents": false}), false),
            (
                json!({"propagationPolicy": "Background", "orphanDependents": true}),
                true,
            ),
        ];
        for (options, orphans) in cases {
            assert_eq!(orphans_pods(Some(&options)), orphans, "{options}");
        }
        assert!(orphans_pods(None));
    }
}
