//! What we know about container images: which have `sh` but no `bash`, which have no
//! shell at all.
//!
//! Contract:
//! - A reference is split into registry, repository, tag and digest without allocating
//!   (these run per container per request). `docker.io/library/busybox:1.36`,
//!   `library/busybox` and `busybox` are the same repository `busybox`.
//! - Built-in rules look at the last path component (the image name) and the tag, so a
//!   mirror (`mirror.example/hub/busybox`) is recognised like the original.
//! - Config patterns use `*` for any run of characters. A pattern is split like an image:
//!   its repository part (with `docker.io/` and `library/` dropped) must match the image's
//!   repository in full; a tag part, when the pattern has one, must match the image's tag
//!   (`latest` when the image names neither tag nor digest); a digest part likewise. So
//!   `my/tool*` matches every tag and digest of `my/tool-x`, `python:*-slim` only those tags.

use crate::config::Config;

/// An image reference, split. Borrowed from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reference<'a> {
    /// `gcr.io`, or "" for Docker Hub.
    registry: &'a str,
    /// Path below the registry, without Docker Hub's `library/`.
    repository: &'a str,
    tag: Option<&'a str>,
    digest: Option<&'a str>,
}

impl<'a> Reference<'a> {
    fn parse(image: &'a str) -> Reference<'a> {
        let image = image.trim();
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => (rest, Some(digest)),
            None => (image, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        // Like Docker: the first component is a registry when it looks like a host.
        let (registry, repository) = match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first, rest)
            }
            _ => ("", path),
        };
        let registry = match registry {
            "docker.io" | "index.docker.io" | "registry-1.docker.io" => "",
            other => other,
        };
        let repository = if registry.is_empty() {
            repository.strip_prefix("library/").unwrap_or(repository)
        } else {
            repository
        };
        Reference {
            registry,
            repository,
            tag,
            digest,
        }
    }

    /// The last path component: `busybox` for `docker.io/library/busybox:1.36`.
    fn name(&self) -> &'a str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(self.repository)
    }

    /// The tag a pattern's tag is compared with: `latest` when nothing is named.
    fn effective_tag(&self) -> &'a str {
        match (self.tag, self.digest) {
            (Some(tag), _) => tag,
            (None, None) => "latest",
            (None, Some(_)) => "",
        }
    }

    /// Tag words split on `-`: `debug` in `debug-nonroot`, `nonroot-debug`, `debug`.
    fn tag_has_word(&self, word: &str) -> bool {
        self.tag
            .is_some_and(|tag| tag.split('-').any(|w| w == word))
    }

    fn in_distroless(&self) -> bool {
        self.repository.split('/').any(|part| part == "distroless")
    }
}

/// busybox, alpine, `*-alpine` tags and `config.images_without_bash` patterns.
pub fn lacks_bash(image: &str, config: &Config) -> bool {
    let reference = Reference::parse(image);
    let name = reference.name();
    let alpine_tag = reference
        .tag
        .is_some_and(|tag| tag.starts_with("alpine") || tag.contains("-alpine"));
    // Distroless `debug` images carry busybox sh for `kubectl exec`, and nothing else.
    let distroless_debug = reference.in_distroless() && reference.tag_has_word("debug");
    name == "busybox"
        || name == "alpine"
        || alpine_tag
        || distroless_debug
        || matches_any(&config.images_without_bash, &reference)
}

/// distroless, scratch-like static images and `config.images_without_shell` patterns.
pub fn lacks_shell(image: &str, config: &Config) -> bool {
    let reference = Reference::parse(image);
    let name = reference.name();
    let distroless = reference.in_distroless() && !reference.tag_has_word("debug");
    let chainguard_static =
        reference.registry == "cgr.dev" && reference.repository == "chainguard/static";
    let pause = name == "pause"
        && matches!(
            reference.registry,
            "registry.k8s.io" | "k8s.gcr.io" | "gcr.io"
        );
    distroless
        || chainguard_static
        || pause
        || reference.repository == "scratch"
        || matches_any(&config.images_without_shell, &reference)
}

fn matches_any(patterns: &[String], image: &Reference<'_>) -> bool {
    patterns.iter().any(|pattern| matches(pattern, image))
}

fn matches(pattern: &str, image: &Reference<'_>) -> bool {
    let pattern = Reference::parse(pattern);
    // A pattern without a registry is a Docker Hub name; a `*` cannot cross from the
    // registry into the path, which keeps matching allocation free.
    glob(pattern.registry, image.registry)
        && glob(pattern.repository, image.repository)
        && pattern
            .tag
            .is_none_or(|tag| glob(tag, image.effective_tag()))
        && pattern
            .digest
            .is_none_or(|digest| image.digest.is_some_and(|d| glob(digest, d)))
}

/// `*` matches any run of characters (including none); everything else literally.
/// Iterative with one backtrack point, so linear-ish and allocation free.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(without_bash: &[&str], without_shell: &[&str]) -> Config {
        Config {
            images_without_bash: without_bash.iter().map(|s| (*s).to_owned()).collect(),
            images_without_shell: without_shell.iter().map(|s| (*s).to_owned()).collect(),
            ..Config::default()
        }
    }

    #[test]
    fn parses_references() {
        let r = Reference::parse("docker.io/library/busybox:1.36@sha256:abc");
        assert_eq!(
            r,
            Reference {
                registry: "",
                repository: "busybox",
                tag: Some("1.36"),
                digest: Some("sha256:abc")
            }
        );
        let r = Reference::parse("localhost:5000/team/app");
        assert_eq!(
            (r.registry, r.repository, r.tag),
            ("localhost:5000", "team/app", None)
        );
        assert_eq!(Reference::parse("team/app:v1").repository, "team/app");
    }

    #[test]
    fn bash_table() {
        let cfg = config(&["my/tool*", "quay.io/org/*:*-slim"], &[]);
        let cases = [
            ("busybox", true),
            ("busybox:stable", true),
            ("docker.io/library/busybox:1.36", true),
            ("busybox@sha256:0123456789abcdef", true),
            ("mirror.example.com/hub/busybox:1.37.0", true),
            ("alpine:3.20", true),
            ("python:3.12-alpine", true),
            ("nginx:1.27-alpine3.20", true),
            ("node:alpine", true),
            ("gcr.io/distroless/base-debian12:debug", true),
            ("gcr.io/distroless/static:debug-nonroot", true),
            ("my/tool-x:1", true),
            ("quay.io/org/app:1.0-slim", true),
            ("quay.io/org/app:1.0", false),
            ("other.io/my/tool-x", false),
            ("ubuntu:24.04", false),
            ("python:3.12-slim", false),
            ("busyboxplus:latest", false),
            ("alpine-tools/bash:1", false),
            ("gcr.io/distroless/static", false),
            ("", false),
        ];
        for (image, want) in cases {
            assert_eq!(lacks_bash(image, &cfg), want, "{image}");
        }
    }

    #[test]
    fn shell_table() {
        let cfg = config(&[], &["ghcr.io/me/static-*", "tiny:*"]);
        let cases = [
            ("gcr.io/distroless/static-debian12", true),
            ("gcr.io/distroless/base:nonroot", true),
            ("gcr.io/distroless/base@sha256:abcd", true),
            ("gcr.io/distroless/base:debug", false),
            ("cgr.dev/chainguard/static:latest", true),
            ("scratch", true),
            ("registry.k8s.io/pause:3.10", true),
            ("ghcr.io/me/static-app:v2", true),
            ("tiny", true),
            ("tiny:1", true),
            ("ghcr.io/me/app", false),
            ("busybox", false),
            ("docker.io/someone/pause", false),
            ("", false),
        ];
        for (image, want) in cases {
            assert_eq!(lacks_shell(image, &cfg), want, "{image}");
        }
    }

    #[test]
    fn pattern_tags_and_digests() {
        let image = Reference::parse("app");
        assert!(matches("app:latest", &image));
        assert!(!matches("app:v1", &image));
        let pinned = Reference::parse("app@sha256:ff");
        assert!(matches("app", &pinned));
        assert!(matches("app@sha256:*", &pinned));
        assert!(!matches("app:latest", &pinned));
        assert!(matches("docker.io/library/app", &Reference::parse("app:1")));
    }

    #[test]
    fn glob_table() {
        let cases = [
            ("*", "", true),
            ("a*c", "abbbc", true),
            ("a*c", "abbbd", false),
            ("*-slim", "3.12-slim", true),
            ("a**b", "ab", true),
            ("abc", "ab", false),
            ("", "", true),
            ("*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaa", false),
        ];
        for (pattern, text, want) in cases {
            assert_eq!(glob(pattern, text), want, "{pattern} {text}");
        }
    }
}
