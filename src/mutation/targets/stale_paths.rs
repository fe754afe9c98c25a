//! The most common broken cleanup in the wild: a preStop that deletes a path that is not
//! the one mounted (`rm -rf /cadm-package/*` while the volume is at `/test-package`).
//! What the user meant cannot be known, so this only feeds a warning.

use crate::mutation::targets::{is_at_or_below, Mount};

/// Absolute paths that an `rm` in `script` deletes and that lie on none of `mounts`:
/// deleting them removes nothing from any volume, only from the dying container.
pub fn unmounted_rm_targets(script: &str, mounts: &[Mount<'_>]) -> Vec<String> {
    let spaced: String = script
        .chars()
        .flat_map(|c| match c {
            ';' | '&' | '|' | '(' | ')' | '`' => [' ', ';', ' '],
            c => [c, '\0', '\0'],
        })
        .filter(|c| *c != '\0')
        .collect();
    let mut found = Vec::new();
    let (mut command_start, mut in_rm) = (true, false);
    for word in spaced.split_whitespace() {
        if word == ";" {
            (command_start, in_rm) = (true, false);
            continue;
        }
        if command_start {
            in_rm = word == "rm" || word.ends_with("/rm");
            command_start = false;
            continue;
        }
        if !in_rm {
            continue;
        }
        let path = word.trim_matches(|c| c == '"' || c == '\'');
        if path.starts_with('-') || !path.starts_with('/') {
            continue;
        }
        let base = path.trim_end_matches('*').trim_end_matches('/');
        let base = if base.is_empty() { "/" } else { base };
        if !mounts.iter().any(|mount| is_at_or_below(base, &mount.path))
            && !found.iter().any(|p| p == path)
        {
            found.push(path.to_owned());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::json;
    use crate::mutation::targets::mounts;

    #[test]
    fn finds_rm_targets_outside_the_mounts() {
        let container = json!({"volumeMounts": [{"name": "p", "mountPath": "/test-package"}, {"name": "c", "mountPath": "/cache"}]});
        let mounts = mounts(&container);
        for (script, expected) in [
            ("rm -rf /cadm-package/*", vec!["/cadm-package/*"]),
            ("rm -rf /test-package/*", vec![]),
            (
                "rm -rf '/cache/x' && rm -f /tmp/a; echo /elsewhere",
                vec!["/tmp/a"],
            ),
            ("/bin/rm -r -f -- /data/* /test-package", vec!["/data/*"]),
            ("echo rm /nothing", vec![]),
            ("cd /x; rm -rf *", vec![]),
            ("(rm -rf /a)|true", vec!["/a"]),
        ] {
            assert_eq!(unmounted_rm_targets(script, &mounts), expected, "{script}");
        }
    }
}
