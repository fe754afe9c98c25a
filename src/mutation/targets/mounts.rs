//! Container paths as the kubelet reads them (docs/DESIGN.md#targets).
//!
//! The API server checks `mountPath` uniqueness on the raw string, so `/data`, `/data/`,
//! `data` and `/data/.` can all be mounts of one container; the kubelet mounts each at
//! `path.Clean("/" + mountPath)`. Every comparison here is on that cleaned form.
//!
//! Decision (fail closed): a `..` segment is *not* resolved. The runtime joins the mount
//! path onto the image's root following the image's symlinks, so `/data/../etc` may land
//! anywhere; a container with such a mount (or an empty, non-string or control-character
//! mount path, or a mount without a volume name) gets no cleanup at all.

use crate::json::Value;
use crate::policy::is_at_or_below;

/// `path.Clean("/" + mount_path)` as the kubelet computes it, except that `..`, control
/// characters and the empty string give `None` instead of a guess.
pub fn kubelet_mount_path(mount_path: &str) -> Option<String> {
    if mount_path.is_empty() {
        return None;
    }
    prestop_clean::host_path::clean_segments(mount_path)
}

/// Which directory of its volume a mount shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubPath {
    /// The volume's own directory.
    Whole,
    /// A fixed `subPath`, normalized, without leading `/` (e.g. `keep/x`).
    Fixed(String),
    /// A `subPathExpr`: a directory below the volume's that only the kubelet knows.
    /// `identity` is the expression plus the `env` entries it references, so two mounts
    /// with the same identity show the same directory.
    Expr { identity: String, non_empty: bool },
    /// Absolute, with `..`, not a string, or both fields set: nothing is known.
    Invalid(String),
}

/// One `volumeMount` of a container, its path read as the kubelet reads it.
#[derive(Debug, Clone)]
pub struct Mount<'a> {
    pub volume: &'a str,
    pub path: String,
    pub writable: bool,
    pub sub_path: SubPath,
    pub raw: &'a Value,
}

/// A mount the kubelet would read differently from us, or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMount {
    /// The raw `mountPath` as JSON text (it may not be a string).
    pub mount_path: String,
}

impl<'a> Mount<'a> {
    /// `target` (a normalized absolute path at or below this mount's path) as a path
    /// below the mount, with its leading `/`: `/x/y` for `/data/x/y` in `/data`, and the
    /// whole target in a mount at `/` (cutting the mount's path off would lose the `/`).
    pub fn below<'t>(&self, target: &'t str) -> &'t str {
        if self.path == "/" {
            target
        } else {
            &target[self.path.len()..]
        }
    }

    /// Reads one `volumeMount`; `container` supplies the `env` a `subPathExpr` uses.
    pub fn parse(raw: &'a Value, container: &'a Value) -> Result<Mount<'a>, BadMount> {
        let mount_path = raw.get("mountPath");
        let bad = || BadMount {
            mount_path: mount_path.map_or_else(|| "(none)".to_owned(), Value::to_string),
        };
        let path = mount_path
            .and_then(Value::as_str)
            .and_then(kubelet_mount_path)
            .ok_or_else(bad)?;
        let volume = raw.get("name").and_then(Value::as_str).ok_or_else(bad)?;
        Ok(Mount {
            volume,
            path,
            // Anything but an absent or false `readOnly` is read-only: a value the API
            // server would refuse must not make a mount cleanable.
            writable: matches!(
                raw.get("readOnly"),
                None | Some(Value::Null | Value::Bool(false))
            ),
            sub_path: sub_path(raw, container),
            raw,
        })
    }
}

/// Every `volumeMount` of a container, or the first one that cannot be read.
pub fn container_mounts(container: &Value) -> Result<Vec<Mount<'_>>, BadMount> {
    let Some(list) = container.get("volumeMounts") else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err(BadMount {
            mount_path: "(volumeMounts is not a list)".to_owned(),
        });
    };
    list.iter()
        .map(|raw| Mount::parse(raw, container))
        .collect()
}

/// The readable mounts of a container, skipping the others. For lookups and messages
/// only: a decision to delete must use [`container_mounts`], which fails closed.
pub fn mounts(container: &Value) -> Vec<Mount<'_>> {
    let Some(list) = container.get("volumeMounts").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|raw| Mount::parse(raw, container).ok())
        .collect()
}

/// The mount a container path lives on: the deepest mount at or above it.
pub fn mount_of<'m, 'a>(mounts: &'m [Mount<'a>], path: &str) -> Option<&'m Mount<'a>> {
    mounts
        .iter()
        .filter(|mount| is_at_or_below(path, &mount.path))
        .max_by_key(|mount| mount.path.len())
}

/// The `subPath` / `subPathExpr` of a raw `volumeMount`.
pub(super) fn sub_path(raw: &Value, container: &Value) -> SubPath {
    let text = |key: &str| raw.get(key).filter(|v| !v.is_null());
    match (text("subPath"), text("subPathExpr")) {
        (None, None) => SubPath::Whole,
        (Some(Value::String(path)), None) if path.is_empty() => SubPath::Whole,
        (None, Some(Value::String(expr))) if expr.is_empty() => SubPath::Whole,
        (Some(Value::String(path)), None) => fixed_sub_path(path),
        (None, Some(Value::String(expr))) => expr_sub_path(expr, container),
        (path, expr) => SubPath::Invalid(format!(
            "{}{}",
            path.map(Value::to_string).unwrap_or_default(),
            expr.map(Value::to_string).unwrap_or_default()
        )),
    }
}

/// The API server refuses an absolute `subPath` or one with `..`; we refuse it too, in
/// case it came from elsewhere (the `mutate` CLI reads files the API server never saw).
fn fixed_sub_path(path: &str) -> SubPath {
    if path.starts_with('/') {
        return SubPath::Invalid(path.to_owned());
    }
    match prestop_clean::host_path::clean_segments(path) {
        Some(cleaned) if cleaned == "/" => SubPath::Whole,
        Some(cleaned) => SubPath::Fixed(cleaned[1..].to_owned()),
        None => SubPath::Invalid(path.to_owned()),
    }
}

/// Field paths the kubelet always fills with a non-empty value.
const NON_EMPTY_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
];

/// A `subPathExpr` expands `$(VAR)` from the container's `env`. An expression that may
/// expand to nothing mounts the volume's own directory, so `non_empty` is only true when
/// literal text remains or a reference is one the kubelet always fills (`$(POD_NAME)` from
/// `metadata.name`); an undefined variable stays literal text, but `envFrom` may define
/// it, so it proves nothing.
fn expr_sub_path(expr: &str, container: &Value) -> SubPath {
    if expr.starts_with('/') || expr.chars().any(char::is_control) {
        return SubPath::Invalid(expr.to_owned());
    }
    if expr.split('/').any(|segment| segment == "..") {
        return SubPath::Invalid(expr.to_owned());
    }
    let env = container
        .get("env")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut identity = expr.to_owned();
    let mut literal = String::new();
    let mut non_empty = false;
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        literal.push_str(&rest[..start]);
        let Some(length) = rest[start..].find(')') else {
            literal.push_str(&rest[start..]);
            rest = "";
            break;
        };
        let name = &rest[start + 2..start + length];
        // The last definition wins, as in the kubelet.
        let definition = env
            .iter()
            .rev()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name));
        identity.push('\0');
        identity.push_str(&definition.map(Value::to_string).unwrap_or_default());
        let field = definition.and_then(|d| d.pointer("/valueFrom/fieldRef/fieldPath"));
        non_empty |= field
            .and_then(Value::as_str)
            .is_some_and(|f| NON_EMPTY_FIELDS.contains(&f));
        rest = &rest[start + length + 1..];
    }
    literal.push_str(rest);
    non_empty |= literal.chars().any(|c| c != '/');
    SubPath::Expr {
        identity,
        non_empty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;

    #[test]
    fn mount_paths_read_as_the_kubelet_reads_them() {
        for (path, cleaned) in [
            ("data", Some("/data")),
            ("/data/", Some("/data")),
            ("/data/.", Some("/data")),
            ("//data", Some("/data")),
            ("./data//x/", Some("/data/x")),
            ("/", Some("/")),
            (".", Some("/")),
            ("", None),
            ("/data/../etc", None),
            ("..", None),
            ("/a\nb", None),
            ("/a\0b", None),
        ] {
            assert_eq!(kubelet_mount_path(path).as_deref(), cleaned, "{path:?}");
        }
    }

    #[test]
    fn sub_paths() {
        let pod_name = json!({"env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                     {"name": "EMPTY", "value": ""}]});
        let read = |mount: Value| sub_path(&mount, &pod_name);
        assert_eq!(read(json!({})), SubPath::Whole);
        assert_eq!(read(json!({"subPath": ""})), SubPath::Whole);
        assert_eq!(read(json!({"subPath": "./"})), SubPath::Whole);
        assert_eq!(
            read(json!({"subPath": "a//b/"})),
            SubPath::Fixed("a/b".into())
        );
        for invalid in [
            json!({"subPath": "/abs"}),
            json!({"subPath": "a/../b"}),
            json!({"subPath": 3}),
            json!({"subPath": "a", "subPathExpr": "b"}),
            json!({"subPathExpr": "$(POD)/.."}),
        ] {
            assert!(
                matches!(read(invalid.clone()), SubPath::Invalid(_)),
                "{invalid}"
            );
        }
        let non_empty = |mount: Value| match read(mount) {
            SubPath::Expr { non_empty, .. } => non_empty,
            other => panic!("{other:?}"),
        };
        assert!(non_empty(json!({"subPathExpr": "$(POD)"})));
        assert!(non_empty(json!({"subPathExpr": "pods/$(EMPTY)"})));
        assert!(!non_empty(json!({"subPathExpr": "$(EMPTY)"})));
        assert!(!non_empty(json!({"subPathExpr": "$(UNDEFINED)/"})));
    }
}
