//! The RFC 6902 diff of two JSON values, operation for operation the same as
//! `json_patch::diff` (which stays as the oracle in the tests below), but cheaper on the
//! admission hot path, where the two values are a pod template before and after our
//! mutation and differ in a few places:
//! - members of two objects are walked side by side, in order, and looked up by key only
//!   where the keys stop lining up (a mutated copy keeps its original's order);
//! - no member is looked for in the other object when both hold the same keys in order;
//! - the JSON Pointer is kept as one encoded string that grows and shrinks with the walk,
//!   and only copied for an operation that is emitted.

use crate::json::patch::{AddOperation, PatchOperation, RemoveOperation, ReplaceOperation};
use crate::json::{same_key, Map, Value};

/// The operations that turn `left` into `right`: `json_patch::diff(left, right).0`.
pub fn diff(left: &Value, right: &Value) -> Vec<PatchOperation> {
    diff_at("", left, &mut right.clone())
}

/// [`diff`] of two values found at `prefix` (an encoded JSON Pointer, `""` for the root)
/// of a larger document, with every path starting there: the patch of a pod template
/// inside a Job, say, without joining pointers operation by operation afterwards.
///
/// The values the operations add are moved out of `right` (null is left in their place),
/// not copied: the caller's mutated copy is thrown away after the diff.
pub fn diff_at(prefix: &str, left: &Value, right: &mut Value) -> Vec<PatchOperation> {
    let mut walk = Walk {
        path: String::with_capacity(prefix.len() + 64),
        operations: Vec::new(),
    };
    walk.path.push_str(prefix);
    walk.value(left, right);
    walk.operations
}

/// Whether `left` and `right` are equal with every object's members in the same order:
/// what a copy that nothing changed looks like, told without building a pointer. `false`
/// says only that the diff has to look (the members may be equal in another order).
pub fn same_in_order(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Object(left), Value::Object(right)) => {
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right)
                    .all(|((lk, lv), (rk, rv))| same_key(lk, rk) && same_in_order(lv, rv))
        }
        (Value::Array(left), Value::Array(right)) => {
            left.len() == right.len() && left.iter().zip(right).all(|(l, r)| same_in_order(l, r))
        }
        _ => left == right,
    }
}

/// The walk's position, as the encoded pointer it would emit; each step appends one
/// token and truncates back to where it was.
struct Walk {
    path: String,
    operations: Vec<PatchOperation>,
}

impl Walk {
    /// The prefix is a pointer and every token was escaped (`push_key`), so this is one
    /// too; the tests parse every pointer they apply (`Patch::to_json_patch`).
    fn pointer(&self) -> String {
        self.path.clone()
    }

    /// Appends `/key` (RFC 6901: `~` as `~0`, `/` as `~1`); returns the length to go
    /// back to.
    fn push_key(&mut self, key: &str) -> usize {
        let back = self.path.len();
        self.path.push('/');
        if key.contains(['~', '/']) {
            for c in key.chars() {
                match c {
                    '~' => self.path.push_str("~0"),
                    '/' => self.path.push_str("~1"),
                    c => self.path.push(c),
                }
            }
        } else {
            self.path.push_str(key);
        }
        back
    }

    fn push_index(&mut self, index: usize) -> usize {
        let back = self.path.len();
        self.path.push('/');
        // Without the formatting machinery: this runs for every array element.
        self.path.push_str(itoa::Buffer::new().format(index));
        back
    }

    fn value(&mut self, left: &Value, right: &mut Value) {
        match (left, right) {
            (Value::Object(left), Value::Object(right)) => self.object(left, right),
            (Value::Array(left), Value::Array(right)) => self.array(left, right),
            (left, right) => {
                if left != right {
                    let path = self.pointer();
                    self.operations
                        .push(PatchOperation::Replace(ReplaceOperation {
                            path,
                            value: std::mem::take(right),
                        }));
                }
            }
        }
    }

    fn array(&mut self, left: &[Value], right: &mut [Value]) {
        // As json_patch: index by index; the surplus of `left` removed at the same index
        // (each removal shifts the rest down), the surplus of `right` added at the end.
        let common = left.len().min(right.len());
        for index in 0..common {
            let back = self.push_index(index);
            self.value(&left[index], &mut right[index]);
            self.path.truncate(back);
        }
        for _ in common..left.len() {
            let back = self.push_index(common);
            let path = self.pointer();
            self.operations
                .push(PatchOperation::Remove(RemoveOperation { path }));
            self.path.truncate(back);
        }
        for (index, value) in right.iter_mut().enumerate().skip(common) {
            let back = self.push_index(index);
            let path = self.pointer();
            self.operations.push(PatchOperation::Add(AddOperation {
                path,
                value: std::mem::take(value),
            }));
            self.path.truncate(back);
        }
    }

    fn object(&mut self, left: &Map<String, Value>, right: &mut Map<String, Value>) {
        // Walk `right` in order (the order of json_patch's operations), taking the member
        // of `left` at the same position when its key is the same, else by lookup.
        let mut left_in_order = left.iter();
        let mut in_step = true;
        for (key, right_value) in right.iter_mut() {
            let beside = left_in_order.next();
            let left_value = match beside {
                Some((left_key, left_value)) if in_step && same_key(left_key, key) => {
                    Some(left_value)
                }
                _ => {
                    in_step = false;
                    left.get(key)
                }
            };
            let back = self.push_key(key);
            match left_value {
                Some(left_value) => self.value(left_value, right_value),
                None => {
                    let path = self.pointer();
                    self.operations.push(PatchOperation::Add(AddOperation {
                        path,
                        value: std::mem::take(right_value),
                    }));
                }
            }
            self.path.truncate(back);
        }
        // Every key matched in step and the lengths agree: nothing of `left` is missing.
        if in_step && left.len() == right.len() {
            return;
        }
        for key in left.keys() {
            if !right.contains_key(key) {
                let back = self.push_key(key);
                let path = self.pointer();
                self.operations
                    .push(PatchOperation::Remove(RemoveOperation { path }));
                self.path.truncate(back);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::diff;
    use crate::json::{json, Value};
    use proptest::prelude::*;

    /// Small JSON values over few keys, so that two of them share structure and keys.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0i64..4).prop_map(Value::from),
            prop::sample::select(vec!["", "a", "~1", "/x"]).prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop::sample::select(vec!["a", "b", "c", "", "~", "a/b", "d"]),
                        inner
                    ),
                    0..6
                )
                .prop_map(|members| {
                    Value::Object(
                        members
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect(),
                    )
                }),
            ]
        })
    }

    /// `right` made from `left` as a mutation does: members changed, added, removed.
    fn edited(left: &Value, seed: u64) -> Value {
        let mut right = left.clone();
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        fn visit(value: &mut Value, next: &mut dyn FnMut() -> usize) {
            match value {
                Value::Object(map) => {
                    match next() % 5 {
                        0 => {
                            map.insert(format!("new{}", next() % 3), json!(next() % 2));
                        }
                        1 => {
                            if let Some(key) = map.keys().next().cloned() {
                                map.shift_remove(&key);
                            }
                        }
                        2 => {
                            if let Some(key) = map.keys().next_back().cloned() {
                                map.swap_remove(&key);
                            }
                        }
                        _ => {}
                    }
                    for child in map.values_mut() {
                        visit(child, next);
                    }
                }
                Value::Array(items) => {
                    match next() % 4 {
                        0 => items.push(json!({"added": true})),
                        1 if !items.is_empty() => {
                            items.remove(next() % items.len());
                        }
                        _ => {}
                    }
                    for child in items {
                        visit(child, next);
                    }
                }
                leaf => {
                    if next() % 4 == 0 {
                        *leaf = json!("changed");
                    }
                }
            }
        }
        visit(&mut right, &mut next);
        right
    }

    /// json_patch's diff of the same two values (as serde_json's).
    fn oracle(left: &Value, right: &Value) -> Vec<json_patch::PatchOperation> {
        json_patch::diff(&left.clone().into(), &right.clone().into()).0
    }

    /// Our operations as json_patch's.
    fn theirs(operations: Vec<super::PatchOperation>) -> Vec<json_patch::PatchOperation> {
        crate::json::patch::Patch(operations).to_json_patch().0
    }

    /// Our operations are json_patch's, and they turn `left` into `right`.
    fn same_as_json_patch(left: &Value, right: &Value) -> Result<(), TestCaseError> {
        let ours = theirs(diff(left, right));
        prop_assert_eq!(&ours, &oracle(left, right));
        let mut patched: serde_json::Value = left.clone().into();
        json_patch::patch(&mut patched, &ours).unwrap();
        prop_assert_eq!(&Value::from(patched), right);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Unrelated values: the same operations as json_patch, and they apply.
        #[test]
        fn the_same_operations_as_json_patch(left in json_value(), right in json_value()) {
            same_as_json_patch(&left, &right)?;
        }

        /// A value and an edited copy of it (the hot path's case): the same operations.
        #[test]
        fn the_same_operations_on_an_edited_copy(left in json_value(), seed in any::<u64>()) {
            same_as_json_patch(&left, &edited(&left, seed))?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// "The same in order" is never wrong about equal: the diff of such a pair is
        /// empty, and a copy is always the same in order.
        #[test]
        fn the_same_in_order_has_nothing_to_diff(left in json_value(), right in json_value(), seed in any::<u64>()) {
            prop_assert!(super::same_in_order(&left, &left.clone()));
            for right in [right, edited(&left, seed)] {
                if super::same_in_order(&left, &right) {
                    prop_assert_eq!(&left, &right);
                    prop_assert!(oracle(&left, &right).is_empty());
                }
            }
        }
    }

    /// Members in another order are equal, but not the same in order: the diff looks.
    #[test]
    fn another_order_is_left_to_the_diff() {
        let left = json!({"a": 1, "b": [1, {"c": 2, "d": 3}]});
        let reordered = json!({"b": [1, {"d": 3, "c": 2}], "a": 1});
        assert_eq!(left, reordered);
        assert!(!super::same_in_order(&left, &reordered));
        assert_eq!(diff(&left, &reordered), vec![]);
        assert!(!super::same_in_order(&json!([1, 2]), &json!([1, 2, 3])));
        assert!(!super::same_in_order(&json!({"a": 1}), &json!({"a": 1.0})));
        assert!(super::same_in_order(&left, &left.clone()));
    }

    #[test]
    fn keys_out_of_order_and_escaped() {
        let left = json!({"a/b": 1, "~": [1, 2, 3], "c": {"x": 1}});
        let right = json!({"c": {"x": 2}, "a/b": 1, "~": [1], "d": null});
        assert_eq!(theirs(diff(&left, &right)), oracle(&left, &right));
        assert_eq!(diff(&left, &left), vec![]);
    }

    /// Indices of one, two and three digits, changed, added and removed.
    #[test]
    fn long_arrays() {
        let left = Value::from((0..105).collect::<Vec<u64>>());
        let mut longer: Vec<u64> = (0..120).collect();
        longer[9] = 90;
        longer[10] = 100;
        longer[101] = 1010;
        let right = Value::from(longer);
        assert_eq!(theirs(diff(&left, &right)), oracle(&left, &right));
        assert_eq!(theirs(diff(&right, &left)), oracle(&right, &left));
    }

    /// At a prefix, the operations of the whole document that holds the two values.
    #[test]
    fn at_a_prefix_the_paths_of_the_whole_document() {
        let left = json!({"a/b": 1, "~": [1, 2, 3], "c": {"x": 1}});
        let right = json!({"c": {"x": 2}, "~": [1], "d": null});
        let whole = |v: &Value| json!({"spec": {"t~/": v}});
        assert_eq!(
            theirs(super::diff_at("/spec/t~0~1", &left, &mut right.clone())),
            oracle(&whole(&left), &whole(&right))
        );
    }
}
