//! Rendering decided documents as YAML, JSON, JSON Patch lines or a unified diff.

use super::yaml::to_yaml;
use anyhow::Result;
use serde_json::Value;

/// What `-o` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The mutated documents, multi-document YAML separated by `---`.
    Yaml,
    /// The mutated documents, one pretty JSON document each (a JSON stream).
    Json,
    /// One line per input document: the RFC 6902 operations as a JSON array (`[]` if none).
    Patch,
    /// A unified diff of each changed document's YAML.
    Diff,
}

/// One decided document.
#[derive(Debug)]
pub struct Decided {
    /// `Kind/namespace/name` (or `Kind/name`), for diff headers.
    pub path: String,
    /// The object before mutation; `None` when a review carries no object (e.g. DELETE).
    pub before: Option<Value>,
    /// The object after the patch; `None` when denied or when there is no object.
    pub after: Option<Value>,
    /// The operations applied (empty when nothing changes or when denied).
    pub patch: Vec<json_patch::PatchOperation>,
}

pub fn render(format: Format, decided: &[Decided]) -> Result<String> {
    let mut out = String::new();
    match format {
        Format::Yaml => {
            for (position, after) in decided.iter().filter_map(|d| d.after.as_ref()).enumerate() {
                if position > 0 {
                    out.push_str("---\n");
                }
                out.push_str(&to_yaml(after));
            }
        }
        Format::Json => {
            for after in decided.iter().filter_map(|d| d.after.as_ref()) {
                out.push_str(&serde_json::to_string_pretty(after)?);
                out.push('\n');
            }
        }
        Format::Patch => {
            for document in decided {
                out.push_str(&serde_json::to_string(&document.patch)?);
                out.push('\n');
            }
        }
        Format::Diff => {
            for document in decided {
                if let (Some(before), Some(after)) = (&document.before, &document.after) {
                    out.push_str(&diff(&document.path, before, after));
                }
            }
        }
    }
    Ok(out)
}

/// git-style headers (`a/Job/default/job-worker`) so pagers like delta colour it.
fn diff(path: &str, before: &Value, after: &Value) -> String {
    if before == after {
        return String::new();
    }
    let (old, new) = (to_yaml(before), to_yaml(after));
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(grace: u64) -> Value {
        json!({"kind": "Job", "spec": {"template": {"spec": {"terminationGracePeriodSeconds": grace}}}})
    }

    fn decided() -> Vec<Decided> {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/spec/template/spec/terminationGracePeriodSeconds", "value": 40}
        ]))
        .unwrap();
        vec![
            Decided {
                path: "Job/default/a".into(),
                before: Some(job(30)),
                after: Some(job(40)),
                patch: patch.0,
            },
            Decided {
                path: "Job/denied".into(),
                before: Some(job(30)),
                after: None,
                patch: Vec::new(),
            },
            Decided {
                path: "Job/b".into(),
                before: Some(job(30)),
                after: Some(job(30)),
                patch: Vec::new(),
            },
        ]
    }

    #[test]
    fn patch_prints_one_line_per_document() {
        let out = render(Format::Patch, &decided()).unwrap();
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("[{\"op\":\"replace\""), "{out}");
        assert_eq!(&lines[1..], ["[]", "[]"]);
    }

    #[test]
    fn yaml_and_json_skip_denied_documents() {
        let yaml = render(Format::Yaml, &decided()).unwrap();
        assert_eq!(yaml.matches("kind: Job").count(), 2);
        assert_eq!(yaml.matches("---\n").count(), 1);
        let json = render(Format::Json, &decided()).unwrap();
        assert!(json.starts_with("{\n  \"kind\": \"Job\""), "{json}");
        assert_eq!(json.matches("\"kind\"").count(), 2);
    }

    #[test]
    fn diff_shows_only_changed_documents() {
        let out = render(Format::Diff, &decided()).unwrap();
        assert!(
            out.starts_with("--- a/Job/default/a\n+++ b/Job/default/a\n@@ "),
            "{out}"
        );
        assert!(out.contains("\n-      terminationGracePeriodSeconds: 30\n+      terminationGracePeriodSeconds: 40\n"), "{out}");
        assert!(
            !out.contains("Job/b") && !out.contains("Job/denied"),
            "{out}"
        );
    }
}
