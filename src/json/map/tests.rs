//! The map's index and its key comparison, from inside (they are private).

use super::{same_key, Map, LINEAR_LIMIT};

/// The index that keeps a tenant's large map from costing the square of its size:
/// kept past the threshold, right after every kind of write, dropped below it.
#[test]
fn the_index_is_there_past_the_threshold_and_right() {
    let mut map: Map<String, u32> = Map::new();
    let holds = |map: &Map<String, u32>| {
        let index = map.index.as_ref().expect("an index past the threshold");
        index.len() == map.len()
            && map
                .entries
                .iter()
                .enumerate()
                .all(|(at, (k, _))| index[k] == at)
    };
    for n in 0..=LINEAR_LIMIT as u32 {
        assert!(map.index.is_none(), "no index at {n} members");
        map.insert(format!("k{n}"), n);
    }
    assert!(holds(&map));
    *map.entry("late").or_insert(0) += 1;
    map.insert("k3".into(), 30);
    assert!(holds(&map));
    map.swap_remove("k0");
    assert!(holds(&map));
    map.shift_remove("k1");
    assert_eq!(map.len(), LINEAR_LIMIT);
    assert!(map.index.is_none(), "dropped at the threshold");
    map.insert("again".into(), 1);
    assert!(holds(&map));
    map.retain(|k, _| k != "again");
    assert!(map.index.is_none());
}

/// `same_key` is `==`: every pair of keys up to 20 bytes that differ in one byte at
/// any place (each end, each load's seam), or in length, or not at all.
#[test]
fn keys_compare_as_equality_does() {
    let mut compared = 0;
    for len in 0..=20usize {
        let key: Vec<u8> = (0..len).map(|i| b'a' + i as u8).collect();
        let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).unwrap();
        assert!(same_key(&text(&key), &text(&key)));
        for at in 0..len {
            for byte in [b'A', b'a' + at as u8 + 1, 0x7f] {
                let mut other = key.clone();
                other[at] = byte;
                let (a, b) = (text(&key), text(&other));
                assert_eq!(same_key(&a, &b), a == b, "{a:?} {b:?}");
                assert_eq!(same_key(&b, &a), a == b, "{a:?} {b:?}");
                compared += 1;
            }
        }
        let longer = text(&[&key[..], b"x"].concat());
        assert!(!same_key(&text(&key), &longer));
        assert!(!same_key(&longer, &text(&key)));
    }
    assert!(same_key("", ""));
    assert!(!same_key("é", "e\u{301}"));
    assert_eq!(compared, 630);
}
