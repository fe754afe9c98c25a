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
