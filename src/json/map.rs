//! An object's members in their order, found by a linear scan while there are few of
//! them and through an index once there are many.
//!
//! Kubernetes objects are made of small maps (a container has a dozen members, a mount
//! three), where comparing a few short keys is cheaper than hashing one: `IndexMap`, which
//! serde_json keeps its members in, hashes every key of every map it reads (SipHash,
//! about a tenth of a Pod's review) and allocates a table per map. A tenant still
//! decides how many annotations or labels an object carries, so a map past
//! [`LINEAR_LIMIT`] members keeps an index: a review never costs the square of its size.

use std::collections::HashMap;

/// Members looked up by scanning, at most; past it a map keeps an index.
const LINEAR_LIMIT: usize = 16;

/// An object's members, in the order they were read or inserted (what `IndexMap` does for
/// serde_json with `preserve_order`). Equality ignores the order, as serde_json's does.
#[derive(Clone)]
pub struct Map<K, V> {
    entries: Vec<(K, V)>,
    /// Each key's position, kept only while there are more than [`LINEAR_LIMIT`] members.
    /// Boxed: every map carries the field, few use it, and a value is as large as its
    /// largest variant.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<K, usize>>>,
}

impl<V> Map<String, V> {
    pub fn new() -> Self {
        Map {
            entries: Vec::new(),
            index: None,
        }
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Map {
            entries: Vec::with_capacity(capacity),
            index: None,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn position(&self, key: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(key).copied(),
            None => self.entries.iter().position(|(k, _)| same_key(k, key)),
        }
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        match &self.index {
            Some(index) => index.get(key).map(|&at| &self.entries[at].1),
            None => self
                .entries
                .iter()
                .find_map(|(k, v)| same_key(k, key).then_some(v)),
        }
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        match &self.index {
            Some(index) => index.get(key).map(|&at| &mut self.entries[at].1),
            None => self
                .entries
                .iter_mut()
                .find_map(|(k, v)| same_key(k, key).then_some(v)),
        }
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Sets `key` to `value`: in its place when it is there (returning what it held), at
    /// the end when it is not.
    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        if let Some(at) = self.position(&key) {
            return Some(std::mem::replace(&mut self.entries[at].1, value));
        }
        self.push(key, value);
        None
    }

    /// Appends a member whose key the caller knows is not there yet (see
    /// `convert::key_mark`), without looking for it first.
    pub(crate) fn push_new(&mut self, key: String, value: V) {
        debug_assert!(!self.contains_key(&key), "{key:?} is there already");
        self.push(key, value);
    }

    fn push(&mut self, key: String, value: V) {
        let at = self.entries.len();
        if let Some(index) = &mut self.index {
            index.insert(key.clone(), at);
        }
        self.entries.push((key, value));
        if self.index.is_none() && self.entries.len() > LINEAR_LIMIT {
            self.reindex();
        }
    }

    fn reindex(&mut self) {
        self.index = (self.entries.len() > LINEAR_LIMIT).then(|| {
            let positions = self.entries.iter().enumerate();
            Box::new(positions.map(|(at, (k, _))| (k.clone(), at)).collect())
        });
    }

    /// Removes `key`, keeping the order of the others.
    pub fn shift_remove(&mut self, key: &str) -> Option<V> {
        self.remove_by(key, Vec::remove)
    }

    /// Removes `key`, moving the last member into its place.
    pub fn swap_remove(&mut self, key: &str) -> Option<V> {
        self.remove_by(key, Vec::swap_remove)
    }

    fn remove_by(&mut self, key: &str, take: Take<V>) -> Option<V> {
        let at = self.position(key)?;
        let (_, value) = take(&mut self.entries, at);
        if self.index.is_some() {
            self.reindex();
        }
        Some(value)
    }

    /// What serde_json's `remove` does with `preserve_order`: the same as `swap_remove`.
    pub fn remove(&mut self, key: &str) -> Option<V> {
        self.swap_remove(key)
    }

    pub fn retain(&mut self, mut keep: impl FnMut(&String, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(k, v));
        if self.index.is_some() {
            self.reindex();
        }
    }

    pub fn entry(&mut self, key: impl Into<String>) -> Entry<'_, V> {
        let key = key.into();
        match self.position(&key) {
            Some(at) => Entry {
                map: self,
                at: Ok(at),
            },
            None => Entry {
                map: self,
                at: Err(key),
            },
        }
    }

    pub fn iter(&self) -> Iter<'_, V> {
        Iter(self.entries.iter())
    }

    pub fn iter_mut(&mut self) -> IterMut<'_, V> {
        IterMut(self.entries.iter_mut())
    }

    pub fn keys(&self) -> Keys<'_, V> {
        self.entries.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> Values<'_, V> {
        self.entries.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> ValuesMut<'_, V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

/// `a == b` for the keys objects are made of, most of them under 16 bytes, without a
/// call to `memcmp` for each: every lookup scans the members, comparing each key of the
/// same length (~6 k instructions a seed review went to `memcmp`, with a key read from
/// the wire compared with all before it). Two loads from each end, overlapping, cover a
/// short key.
#[inline]
pub(crate) fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let len = a.len();
    if len != b.len() {
        return false;
    }
    let word = |bytes: &[u8], at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
    let half = |bytes: &[u8], at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
    match len {
        0 => true,
        1..=3 => a[0] == b[0] && a[len / 2] == b[len / 2] && a[len - 1] == b[len - 1],
        4..=7 => half(a, 0) == half(b, 0) && half(a, len - 4) == half(b, len - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8),
        _ => a == b,
    }
}

/// Takes the member at a position out of the list: `Vec::remove` or `Vec::swap_remove`.
type Take<V> = fn(&mut Vec<(String, V)>, usize) -> (String, V);

// Named types rather than `impl Iterator`, which the borrow checker takes to borrow the map
// until they are dropped (`if let Some(k) = map.keys().next().cloned() { map.remove(&k) }`).
pub type Keys<'m, V> =
    std::iter::Map<std::slice::Iter<'m, (String, V)>, fn(&'m (String, V)) -> &'m String>;
pub type Values<'m, V> =
    std::iter::Map<std::slice::Iter<'m, (String, V)>, fn(&'m (String, V)) -> &'m V>;
pub type ValuesMut<'m, V> =
    std::iter::Map<std::slice::IterMut<'m, (String, V)>, fn(&'m mut (String, V)) -> &'m mut V>;

/// A member that may be there, as `Map::entry` finds it.
pub struct Entry<'m, V> {
    map: &'m mut Map<String, V>,
    /// Its position, or the key to insert it under.
    at: Result<usize, String>,
}

impl<'m, V> Entry<'m, V> {
    pub fn or_insert(self, default: V) -> &'m mut V {
        self.or_insert_with(|| default)
    }

    pub fn or_insert_with(self, default: impl FnOnce() -> V) -> &'m mut V {
        let at = match self.at {
            Ok(at) => at,
            Err(key) => {
                self.map.push(key, default());
                self.map.entries.len() - 1
            }
        };
        &mut self.map.entries[at].1
    }
}

impl<V> Default for Map<String, V> {
    fn default() -> Self {
        Map::new()
    }
}

impl<V: PartialEq> PartialEq for Map<String, V> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(key, value)| other.get(key).is_some_and(|theirs| value == theirs))
    }
}

impl<V: std::fmt::Debug> std::fmt::Debug for Map<String, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V> std::ops::Index<&str> for Map<String, V> {
    type Output = V;

    fn index(&self, key: &str) -> &V {
        self.get(key).expect("no entry found for key")
    }
}

impl<V> std::ops::IndexMut<&str> for Map<String, V> {
    fn index_mut(&mut self, key: &str) -> &mut V {
        self.get_mut(key).expect("no entry found for key")
    }
}

impl<V> Extend<(String, V)> for Map<String, V> {
    fn extend<I: IntoIterator<Item = (String, V)>>(&mut self, members: I) {
        for (key, value) in members {
            self.insert(key, value);
        }
    }
}

impl<V> FromIterator<(String, V)> for Map<String, V> {
    fn from_iter<I: IntoIterator<Item = (String, V)>>(members: I) -> Self {
        let mut map = Map::new();
        map.extend(members);
        map
    }
}

/// Members in order, by reference.
pub struct Iter<'m, V>(std::slice::Iter<'m, (String, V)>);

impl<'m, V> Iterator for Iter<'m, V> {
    type Item = (&'m String, &'m V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
    }
}

impl<V> ExactSizeIterator for Iter<'_, V> {}

/// Members in order, values changeable.
pub struct IterMut<'m, V>(std::slice::IterMut<'m, (String, V)>);

impl<'m, V> Iterator for IterMut<'m, V> {
    type Item = (&'m String, &'m mut V);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (&*k, v))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<V> ExactSizeIterator for IterMut<'_, V> {}

impl<'m, V> IntoIterator for &'m Map<String, V> {
    type Item = (&'m String, &'m V);
    type IntoIter = Iter<'m, V>;

    fn into_iter(self) -> Iter<'m, V> {
        self.iter()
    }
}

impl<'m, V> IntoIterator for &'m mut Map<String, V> {
    type Item = (&'m String, &'m mut V);
    type IntoIter = IterMut<'m, V>;

    fn into_iter(self) -> IterMut<'m, V> {
        self.iter_mut()
    }
}

impl<V> IntoIterator for Map<String, V> {
    type Item = (String, V);
    type IntoIter = std::vec::IntoIter<(String, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

#[cfg(test)]
mod tests;
