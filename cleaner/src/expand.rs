//! Kubernetes' `$(VAR)` expansion, as the kubelet expands a `subPathExpr` from the
//! container's environment (`third_party/forked/golang/expansion`): `$(NAME)` is the
//! variable's value, `$$` a literal `$`, a `$` before anything else stays as it is.
//!
//! Where the kubelet would leave text unexpanded — an undefined variable, `$()`, an
//! unterminated `$(` — the expected host path is not one we can know: an error, and the
//! target is refused.

/// `text` expanded with `lookup`; `Err` is the reason.
pub fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            let end = inner
                .find(')')
                .ok_or_else(|| format!("{text:?} has an unterminated $( reference"))?;
            let name = &inner[..end];
            if name.is_empty() {
                return Err(format!("{text:?} has an empty $() reference"));
            }
            let value = lookup(name)
                .ok_or_else(|| format!("{text:?} references $({name}), which is not set here"))?;
            out.push_str(&value);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The process environment, for [`expand`]; a value that is not UTF-8 counts as unset.
pub fn from_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "POD_NAME" => Some("job-1-abc".into()),
            "EMPTY" => Some(String::new()),
            "DOLLAR" => Some("$(POD_NAME)".into()),
            _ => None,
        }
    }

    #[test]
    fn expands_as_the_kubelet_does() {
        for (text, want) in [
            ("/mnt/scratch/$(POD_NAME)", "/mnt/scratch/job-1-abc"),
            ("/a/$(POD_NAME)/$(POD_NAME)x", "/a/job-1-abc/job-1-abcx"),
            ("/a/$$(POD_NAME)", "/a/$(POD_NAME)"),
            ("/a/$$$(POD_NAME)", "/a/$job-1-abc"),
            ("/a/$x/$", "/a/$x/$"),
            ("/a/$(EMPTY)/b", "/a//b"),
            // A value is never expanded again.
            ("/a/$(DOLLAR)", "/a/$(POD_NAME)"),
            ("plain", "plain"),
        ] {
            assert_eq!(expand(text, &env).as_deref(), Ok(want), "{text}");
        }
    }

    #[test]
    fn what_the_kubelet_leaves_literal_is_refused() {
        for text in ["/a/$(UNSET)", "/a/$(POD_NAME", "/a/$()", "/a/$(EMPTY)/$("] {
            let err = expand(text, &env).unwrap_err();
            assert!(err.contains(text), "{err}");
        }
        assert!(expand("/a/$(UNSET)", &env)
            .unwrap_err()
            .contains("references $(UNSET), which is not set here"));
    }
}
