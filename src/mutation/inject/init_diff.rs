//! The patch of a pod template (docs/DESIGN.md#responses: targeted operations only).
//!
//! `json_patch::diff` compares arrays index by index: inserting one init container in
//! front of the user's would become a `replace` of every one after it and an `add` at the
//! end — a rewrite of the user's containers. We add, remove and move only our own two
//! (the installer, see `delivery`, and the cleanup sidecar, see `sidecar`), so those are
//! found first and become one `add` or `remove` at an index each; the rest is diffed as
//! usual and touches only the fields that changed.

use crate::json::patch::{AddOperation, PatchOperation, RemoveOperation};
use crate::json::Value;
use crate::mutation::hook::ours::{is_installer, is_our_sidecar};

/// An init container in a list: one of ours, or the n-th of the user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Installer,
    Sidecar,
    User(usize),
}

/// Each entry of `list`: the first installer and the first sidecar of ours are ours,
/// anything else (a copy of ours included) is the user's.
fn entries(list: &[Value]) -> Vec<Entry> {
    let installer = list.iter().position(is_installer);
    let sidecar = list.iter().position(is_our_sidecar);
    let mut users = 0;
    (0..list.len())
        .map(|index| {
            if Some(index) == installer {
                Entry::Installer
            } else if Some(index) == sidecar {
                Entry::Sidecar
            } else {
                users += 1;
                Entry::User(users - 1)
            }
        })
        .collect()
}

/// The patch from `original` to `mutated` (both pod templates: `metadata` + `spec`), found
/// at `prefix` (an encoded JSON Pointer) of the object under review. The values added are
/// moved out of `mutated` (see `json_diff::diff_at`).
pub fn diff(prefix: &str, original: &Value, mutated: &mut Value) -> Vec<PatchOperation> {
    fn list(template: &Value) -> Option<&Vec<Value>> {
        template
            .pointer("/spec/initContainers")
            .and_then(Value::as_array)
    }
    let (Some(before), Some(after)) = (list(original), list(&*mutated)) else {
        // The whole list appears or goes: one operation either way.
        return crate::json_diff::diff_at(prefix, original, mutated);
    };
    let (old, new) = (entries(before), entries(after));
    let ours = |entries: &[Entry]| -> Vec<Entry> {
        entries
            .iter()
            .copied()
            .filter(|e| !matches!(e, Entry::User(_)))
            .collect()
    };
    // Ours that can stay where they are: the most of them such that both lists, without
    // the others, hold the same entries in the same order.
    let in_both: Vec<Entry> = ours(&old).into_iter().filter(|e| new.contains(e)).collect();
    let subsets: Vec<Vec<Entry>> = match in_both.as_slice() {
        [a, b] => vec![vec![*a, *b], vec![*a], vec![*b], vec![]],
        [a] => vec![vec![*a], vec![]],
        _ => vec![vec![]],
    };
    let without = |entries: &[Entry], kept: &[Entry]| -> Vec<Entry> {
        entries
            .iter()
            .copied()
            .filter(|e| matches!(e, Entry::User(_)) || kept.contains(e))
            .collect()
    };
    let Some(kept) = subsets
        .into_iter()
        .find(|kept| without(&old, kept) == without(&new, kept))
    else {
        // The user's own entries differ in number: nothing of ours explains it.
        return crate::json_diff::diff_at(prefix, original, mutated);
    };
    let mut shifted = original.clone();
    let mut operations = Vec::new();
    let Some(working) = shifted
        .pointer_mut("/spec/initContainers")
        .and_then(Value::as_array_mut)
    else {
        return crate::json_diff::diff_at(prefix, original, mutated);
    };
    for (index, entry) in old.iter().enumerate().rev() {
        if !matches!(entry, Entry::User(_)) && !kept.contains(entry) {
            working.remove(index);
            operations.push(PatchOperation::Remove(RemoveOperation {
                path: init_container_path(prefix, index),
            }));
        }
    }
    for (index, entry) in new.iter().enumerate() {
        if !matches!(entry, Entry::User(_)) && !kept.contains(entry) {
            working.insert(index, after[index].clone());
            operations.push(PatchOperation::Add(AddOperation {
                path: init_container_path(prefix, index),
                value: after[index].clone(),
            }));
        }
    }
    operations.extend(crate::json_diff::diff_at(prefix, &shifted, mutated));
    operations
}

/// A template's pointer and two plain tokens: a valid pointer.
fn init_container_path(prefix: &str, index: usize) -> String {
    format!("{prefix}/spec/initContainers/{index}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;
    use crate::mutation::hook::ours::installer_argv;

    fn installer() -> Value {
        json!({"name": "prestop-install", "command": installer_argv()})
    }

    fn sidecar() -> Value {
        let argv = crate::mutation::hook::program_sidecar_argv(
            &["/scratch".to_owned().into()],
            None,
            false,
        );
        json!({"name": "prestop-cleanup", "command": argv, "restartPolicy": "Always"})
    }

    fn user(name: &str) -> Value {
        json!({"name": name, "image": "x"})
    }

    fn template(list: Vec<Value>) -> Value {
        json!({"spec": {"initContainers": list, "containers": [{"name": "app"}]}})
    }

    /// Every change to our entries is an add or remove at an index, never a replace of
    /// the user's, and the patch turns the one list into the other.
    #[test]
    fn ours_move_by_index() {
        let lists = [
            vec![user("a"), user("b")],
            vec![installer(), user("a"), user("b")],
            vec![installer(), user("a"), sidecar(), user("b")],
            vec![user("a"), user("b"), sidecar()],
            vec![installer(), sidecar(), user("a"), user("b")],
            vec![sidecar(), user("a"), installer(), user("b")],
        ];
        for from in &lists {
            for to in &lists {
                let (original, mutated) = (template(from.clone()), template(to.clone()));
                let patch = diff("", &original, &mut mutated.clone());
                let patched = crate::json::patch::Patch(patch.clone())
                    .apply_to(&original)
                    .unwrap();
                assert_eq!(patched, mutated, "{from:?} -> {to:?}");
                for operation in &patch {
                    assert!(
                        !matches!(operation, PatchOperation::Replace(_)),
                        "{from:?} -> {to:?}: {operation:?}"
                    );
                }
                assert!(patch.len() <= 4, "{from:?} -> {to:?}: {patch:?}");
            }
        }
    }
}
