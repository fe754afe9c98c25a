//! Kubernetes' `$(VAR)` expansion syntax, as used in `subPathExpr` and `env[].value`:
//! `$(NAME)` references a variable, `$$` is a literal `$`, anything else is literal.

/// The variable names `text` references, in order of first appearance.
pub fn references(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        let after = &rest[dollar + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            rest = escaped;
            continue;
        }
        let Some(inner) = after.strip_prefix('(') else {
            rest = after;
            continue;
        };
        match inner.find(')') {
            Some(end) => {
                let name = &inner[..end];
                if !name.is_empty() && !found.iter().any(|f| f == name) {
                    found.push(name.to_owned());
                }
                rest = &inner[end + 1..];
            }
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::references;

    #[test]
    fn expansion_syntax() {
        for (text, names) in [
            ("$(POD_NAME)", &["POD_NAME"][..]),
            ("a/$(X)/$(Y)/$(X)", &["X", "Y"]),
            ("$$(X)", &[]),
            ("$$$(X)", &["X"]),
            ("$X $(", &[]),
            ("$()", &[]),
            ("plain", &[]),
        ] {
            assert_eq!(references(text), names, "{text}");
        }
    }
}
