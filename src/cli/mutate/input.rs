//! Reading manifests: multi-document YAML or a JSON stream, `List`s expanded, empty
//! documents skipped, and every problem reported with the document number and line.

use super::yaml11;
use anyhow::{anyhow, bail, Result};
use serde_json::Value;

/// One unit the command decides on.
#[derive(Debug)]
pub struct Document {
    /// Names the document in messages, e.g. `job.yaml: document 2 (line 14), item 3`.
    pub label: String,
    pub body: Body,
}

#[derive(Debug)]
pub enum Body {
    /// A manifest; `apiVersion` and `kind` are present strings.
    Manifest(Value),
    /// An `AdmissionReview`, decided as the webhook would.
    Review(Value),
}

/// The documents of an input, and warnings about how kubectl would read it differently.
#[derive(Debug)]
pub struct Input {
    pub documents: Vec<Document>,
    pub warnings: Vec<String>,
}

/// Parses the whole input. JSON is recognised by its first character (`{` or `[`).
pub fn read(text: &str, source: &str) -> Result<Input> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut warnings = Vec::new();
    let raw = if text.trim_start().starts_with(['{', '[']) {
        json_documents(text, source)?
    } else {
        yaml_documents(text, source, &mut warnings)?
    };
    let mut documents = Vec::new();
    for (number, (line, value)) in raw.into_iter().enumerate() {
        let label = format!("{source}: document {} (line {line})", number + 1);
        expand(value, label, &mut documents)?;
    }
    Ok(Input {
        documents,
        warnings,
    })
}

/// A raw document: its first line and its value (`Null` for an empty document).
type Raw = (usize, Value);

fn json_documents(text: &str, source: &str) -> Result<Vec<Raw>> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut documents = Vec::new();
    loop {
        let start = stream.byte_offset();
        let Some(next) = stream.next() else {
            return Ok(documents);
        };
        let number = documents.len() + 1;
        let value = next.map_err(|e| anyhow!("{source}: document {number}: invalid JSON: {e}"))?;
        let skipped = text[start..].len() - text[start..].trim_start().len();
        let line = line_of(text, start + skipped);
        documents.push((line, value));
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Splits on `---` lines as kubectl does, so each document has its own line number, and
/// parses each piece on its own. Pieces holding only comments and blank lines are skipped.
fn yaml_documents(text: &str, source: &str, warnings: &mut Vec<String>) -> Result<Vec<Raw>> {
    let mut documents = Vec::new();
    for (first_line, piece) in split_documents(text) {
        if is_blank(piece) {
            continue;
        }
        let number = documents.len() + 1;
        let (piece, found) = yaml11::adapt(piece, first_line);
        warnings.extend(found.into_iter().map(|w| format!("{source}: {w}")));
        let value = parse_yaml(&piece).map_err(|e| {
            let reason = match e.downcast_ref::<serde_yaml::Error>() {
                Some(yaml) => yaml_error(yaml, first_line),
                None => e.to_string(),
            };
            anyhow!("{source}: document {number} (line {first_line}): invalid YAML: {reason}")
        })?;
        documents.push((first_line, value));
    }
    Ok(documents)
}

/// kubectl applies YAML merge keys (`<<: *anchor`); serde_yaml only does on request, and
/// that detour costs a conversion, so it is taken only when a merge key may be present.
fn parse_yaml(piece: &str) -> Result<Value> {
    if !piece.contains("<<") {
        return Ok(serde_yaml::from_str(piece)?);
    }
    let mut value: serde_yaml::Value = serde_yaml::from_str(piece)?;
    value.apply_merge()?;
    Ok(serde_json::to_value(value)?)
}

/// `(first line, text)` of each piece; a piece starts at its `---` line, if any.
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut pieces = Vec::new();
    let (mut start, mut start_line, mut offset) = (0, 1, 0);
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\n', '\r']);
        let separator = bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t");
        if separator && offset > start {
            pieces.push((start_line, &text[start..offset]));
            (start, start_line) = (offset, index + 1);
        } else if separator {
            start_line = index + 1;
        }
        offset += line.len();
    }
    pieces.push((start_line, &text[start..]));
    pieces
}

fn is_blank(piece: &str) -> bool {
    piece.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#') || line == "---" || line == "..."
    })
}

/// serde_yaml counts lines from the start of the piece; report them from the start of input.
fn yaml_error(error: &serde_yaml::Error, first_line: usize) -> String {
    let text = error.to_string();
    let Some(location) = error.location() else {
        return text;
    };
    let suffix = format!(" at line {} column {}", location.line(), location.column());
    match text.strip_suffix(&suffix) {
        Some(message) => format!(
            "{message} at line {} column {}",
            first_line + location.line() - 1,
            location.column()
        ),
        None => text,
    }
}

/// Checks one document and adds it (or, for a `List`, its items) to `documents`.
fn expand(value: Value, label: String, documents: &mut Vec<Document>) -> Result<()> {
    let Value::Object(map) = value else {
        if value.is_null() {
            return Ok(()); // `~` or `null`: an empty document
        }
        bail!(
            "{label}: expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
            type_name(&value)
        );
    };
    let field = |name: &str| match map.get(name) {
        Some(Value::String(text)) if !text.is_empty() => Ok(text.clone()),
        Some(other) => Err(anyhow!(
            "{label}: {name:?} must be a non-empty string, found {}",
            type_name(other)
        )),
        None => Err(anyhow!(
            "{label}: has no {name:?}; every manifest needs apiVersion and kind"
        )),
    };
    let kind = field("kind")?;
    field("apiVersion")?;
    if kind == "AdmissionReview" {
        documents.push(Document {
            label,
            body: Body::Review(Value::Object(map)),
        });
        return Ok(());
    }
    if kind.ends_with("List") {
        if let Some(items) = map.get("items") {
            let Value::Array(items) = items else {
                bail!(
                    "{label}: \"items\" of a {kind} must be a list, found {}",
                    type_name(items)
                );
            };
            for (index, item) in items.iter().enumerate() {
                expand(
                    item.clone(),
                    format!("{label}, item {}", index + 1),
                    documents,
                )?;
            }
            return Ok(());
        }
    }
    documents.push(Document {
        label,
        body: Body::Manifest(Value::Object(map)),
    });
    Ok(())
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_kubectl() {
        let text = "---\na: 1\n--- # second\nb: 2\n---\n# only a comment\n---\nc: |\n  ---x\n";
        let pieces: Vec<_> = split_documents(text)
            .into_iter()
            .filter(|(_, piece)| !is_blank(piece))
            .map(|(line, _)| line)
            .collect();
        assert_eq!(pieces, [1, 3, 7]);
    }

    #[test]
    fn yaml_errors_count_lines_from_the_start_of_input() {
        let text = "kind: A\napiVersion: v1\n---\nkind: B\napiVersion: v1\n  x: : y\n";
        let error = read(text, "in.yaml").unwrap_err().to_string();
        assert!(
            error.starts_with("in.yaml: document 2 (line 3): invalid YAML"),
            "{error}"
        );
        assert!(error.contains("at line 6 column"), "{error}");
    }

    #[test]
    fn merge_keys_are_applied_as_kubectl_does() {
        // (`name: n` would be the boolean false for kubectl, YAML 1.1.)
        let text = "apiVersion: v1\nkind: Pod\nx-base: &base\n  image: a\n  name: web\nspec:\n  containers:\n  - <<: *base\n    image: b\n";
        let documents = read(text, "-").unwrap().documents;
        let Body::Manifest(pod) = &documents[0].body else {
            panic!("{documents:?}")
        };
        assert_eq!(
            pod["spec"]["containers"][0],
            serde_json::json!({"image": "b", "name": "web"})
        );
        let error = read("a: *missing\n<<: x\n", "-").unwrap_err().to_string();
        assert!(
            error.starts_with("-: document 1 (line 1): invalid YAML: "),
            "{error}"
        );
    }

    #[test]
    fn json_stream_and_lists() {
        let text = "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[\n{\"apiVersion\":\"v1\",\"kind\":\"Pod\"},\
                    {\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}]}\n\n{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}";
        let documents = read(text, "-").unwrap().documents;
        let labels: Vec<_> = documents.iter().map(|d| d.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "-: document 1 (line 1), item 1",
                "-: document 1 (line 1), item 2",
                "-: document 2 (line 4)"
            ]
        );
    }
}
