//! The model against serde_json's own (`preserve_order`, an `IndexMap`): the same text in
//! and out, the same order, the same answers, on generated values and operations.

use super::{json, Map, Value};
use proptest::prelude::*;

/// serde_json values with every kind of member, numbers of each representation, escapes,
/// keys given twice, and maps on both sides of the index's threshold.
fn serde_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        (-1e6f64..1e6).prop_map(serde_json::Value::from),
        "[a-c~/\"\\\\\u{0}-\u{1f}é😀]{0,6}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 120, 40, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::vec(("k[0-9]{1,2}|[a-c~/]{0,2}", inner), 0..40)
                .prop_map(|members| serde_json::Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A JSON object's text with duplicate keys, which no `Value` can write.
fn text_with_duplicates() -> impl Strategy<Value = String> {
    prop::collection::vec(("[a-e]|k[0-9]{1,2}", any::<u8>()), 0..60).prop_map(|members| {
        let members: Vec<String> = members
            .iter()
            .map(|(key, n)| format!("{key:?}:{n}"))
            .collect();
        format!("{{{}}}", members.join(","))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Read from text and written back: serde_json's bytes, compact and indented. (Read
    /// back, a float may move by one unit in its last place: serde_json's parser without
    /// `float_roundtrip`, the same for both models.)
    #[test]
    fn the_same_text_as_serde_json(written in serde_value()) {
        let text = serde_json::to_string(&written).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ours: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(ours.to_string(), value.to_string());
        prop_assert_eq!(format!("{ours:#}"), serde_json::to_string_pretty(&value).unwrap());
        prop_assert_eq!(serde_json::Value::from(ours.clone()), value.clone());
        prop_assert_eq!(Value::from(value), ours);
    }

    /// A key given twice keeps its first place and its last value, as serde_json's map.
    #[test]
    fn duplicate_keys_as_serde_json(text in text_with_duplicates()) {
        let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ours: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(ours.to_string(), theirs.to_string());
    }

    /// Equality ignores members' order, as serde_json's does, and nothing else.
    #[test]
    fn equal_as_serde_json(left in serde_value(), right in serde_value(), seed in any::<u64>()) {
        let shuffled = shuffled(&left, seed);
        for right in [right, shuffled] {
            prop_assert_eq!(
                Value::from(left.clone()) == Value::from(right.clone()),
                left == right
            );
        }
    }

    /// Pointers, escaped tokens and array indices included, find what serde_json finds.
    #[test]
    fn pointers_as_serde_json(value in serde_value(), tokens in prop::collection::vec("0|1|01|k[0-9]|[a-c]|~0|~1|a~1b|", 0..4)) {
        let pointer: String = tokens.iter().map(|t| format!("/{t}")).collect();
        let mut ours = Value::from(value.clone());
        let found = ours.pointer(&pointer).cloned().map(serde_json::Value::from);
        prop_assert_eq!(found.as_ref(), value.pointer(&pointer));
        let found_mut = ours.pointer_mut(&pointer).map(|v| serde_json::Value::from(v.clone()));
        prop_assert_eq!(found_mut, found);
        for bad in ["a", "a/b"] {
            prop_assert!(ours.pointer(bad).is_none());
        }
    }

    /// Any sequence of writes leaves the same members in the same order as serde_json's
    /// map, across the threshold where a map starts keeping an index and back.
    #[test]
    fn a_map_as_serde_jsons_map(ops in prop::collection::vec((0u8..7, 0u16..60, any::<u8>()), 0..200)) {
        let mut ours = Map::new();
        let mut theirs = serde_json::Map::new();
        for (op, key, n) in ops {
            let key = format!("k{key}");
            match op {
                0 | 1 => prop_assert_eq!(
                    ours.insert(key.clone(), Value::from(n)).map(serde_json::Value::from),
                    theirs.insert(key, serde_json::Value::from(n))
                ),
                2 => prop_assert_eq!(
                    ours.shift_remove(&key).map(serde_json::Value::from),
                    theirs.shift_remove(&key)
                ),
                3 => prop_assert_eq!(
                    ours.swap_remove(&key).map(serde_json::Value::from),
                    theirs.swap_remove(&key)
                ),
                4 => prop_assert_eq!(
                    ours.remove(&key).map(serde_json::Value::from),
                    theirs.remove(&key)
                ),
                5 => {
                    *ours.entry(key.clone()).or_insert(Value::from(n)) = Value::from(n / 2);
                    *theirs.entry(key).or_insert(serde_json::Value::from(n)) = serde_json::Value::from(n / 2);
                }
                _ => {
                    ours.retain(|k, _| k.len() % 2 == usize::from(n) % 2);
                    theirs.retain(|k, _| k.len() % 2 == usize::from(n) % 2);
                }
            }
            prop_assert_eq!(ours.len(), theirs.len());
            prop_assert!(ours.keys().eq(theirs.keys()), "order differs");
            for key in (0..60).map(|k| format!("k{k}")) {
                let found = ours.get(&key).cloned().map(serde_json::Value::from);
                prop_assert_eq!(found.as_ref(), theirs.get(&key));
                prop_assert_eq!(ours.contains_key(&key), theirs.contains_key(&key));
            }
        }
    }
}

/// `value` with every object's members in another order.
fn shuffled(value: &serde_json::Value, seed: u64) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            let len = members.len();
            if len > 1 {
                members.rotate_left((seed as usize) % len);
            }
            serde_json::Value::Object(
                members
                    .into_iter()
                    .map(|(k, v)| (k.clone(), shuffled(v, seed / 3)))
                    .collect(),
            )
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(|v| shuffled(v, seed / 3)).collect())
        }
        other => other.clone(),
    }
}

/// Indexing as serde_json: `Null` where nothing is, and a write into `Null` makes an object.
#[test]
fn indexing_as_serde_json() {
    let mut ours = json!({"a": [1, {"b": null}]});
    let mut theirs = serde_json::json!({"a": [1, {"b": null}]});
    assert!(ours["missing"]["deeper"][3].is_null());
    assert!(ours["a"][7].is_null());
    ours["a"][1]["b"]["c"] = json!("made");
    theirs["a"][1]["b"]["c"] = serde_json::json!("made");
    ours["new"] = json!(1);
    theirs["new"] = serde_json::json!(1);
    assert_eq!(ours.to_string(), theirs.to_string());
    let key = String::from("a");
    assert_eq!(ours.get(&key), ours.get("a"));
    assert_eq!(ours["a"][0], 1u64);
    assert_eq!(ours["new"], 1i64);
    assert_eq!(ours["a"][1]["b"]["c"], "made");
}

/// `json!` builds what serde_json's builds, expressions and nesting included.
#[test]
fn the_macro_as_serde_jsons() {
    let name = String::from("x\"y");
    let ours =
        json!({"a": [null, true, false, 1, -2, 1.5, name, {"b": []}], "c": {}, "d": name.len()});
    let theirs = serde_json::json!({"a": [null, true, false, 1, -2, 1.5, name, {"b": []}], "c": {}, "d": name.len()});
    assert_eq!(ours.to_string(), theirs.to_string());
}

/// An expression in `json!` is built straight into the model (`ToJson`), as serde_json
/// would have serialised it: every type `ToJson` takes, nested, at the limits of its numbers.
#[test]
fn expressions_build_what_serde_json_serialises() {
    fn both<T: super::ToJson + serde::Serialize + ?Sized>(value: &T) {
        let ours = json!(value);
        let theirs = Value::from(serde_json::to_value(value).unwrap());
        assert_eq!(ours, theirs);
        assert_eq!(ours.to_string(), theirs.to_string());
    }
    both("tab\t \"quoted\" \u{1F600}");
    both(&String::from("owned"));
    both(&[
        String::from("/usr/local/bin/prestop-clean"),
        "install".into(),
    ]);
    both(&vec![Some(1u8), None, Some(u8::MAX)]);
    both(&[i64::MIN, -1, 0, i64::MAX]);
    both(&[u64::MAX, usize::MAX as u64]);
    both(&[i8::MIN as i32, i16::MIN as i32, i32::MIN]);
    both(&[0.5f64, -0.0, 1e300, f64::NAN, f64::INFINITY]);
    both(&[true, false]);
    both(&vec![vec!["a", "b"], vec![]]);
    both(&serde_json::json!({"z": 1, "a": [null, {"b": "c"}]}));
    let value = json!({"z": 1, "a": [null, {"b": "c"}]});
    assert_eq!(json!(value), value);
    assert_eq!(json!(value.as_object().unwrap()), value);
}

/// The claim `convert::key_mark` is kept for: a container's usual keys have marks of
/// their own, so reading one scans for none of them (equal keys share a mark by
/// construction; the duplicate-key proptest above holds the scan where marks meet).
#[test]
fn a_containers_keys_have_marks_of_their_own() {
    let keys = [
        "name",
        "image",
        "command",
        "resources",
        "volumeMounts",
        "lifecycle",
        "terminationMessagePath",
        "terminationMessagePolicy",
        "imagePullPolicy",
    ];
    let marks = keys.iter().fold(0u64, |marks, key| {
        let mark = super::convert::key_mark(key);
        assert_eq!(mark.count_ones(), 1, "{key}");
        assert_eq!(marks & mark, 0, "{key} shares a mark with a key before it");
        marks | mark
    });
    assert_eq!(marks.count_ones(), 9);
}

/// A map far past the threshold: every member found, in order, after removals.
#[test]
fn a_large_map_keeps_its_index() {
    let mut map: Map<String, Value> = (0..5000).map(|n| (format!("k{n}"), json!(n))).collect();
    for n in (0..5000).step_by(3) {
        assert_eq!(map.shift_remove(&format!("k{n}")), Some(json!(n)));
    }
    let kept: Vec<u64> = map.values().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(kept, (0..5000).filter(|n| n % 3 != 0).collect::<Vec<_>>());
    for n in 0..5000u64 {
        assert_eq!(
            map.get(&format!("k{n}")).and_then(Value::as_u64),
            (n % 3 != 0).then_some(n)
        );
    }
}
