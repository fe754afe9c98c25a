//! What the cluster's Kubernetes version lets the core emit (docs/KUBERNETES.md). The version is
//! data in [`Config::kubernetes_version`]: `None` (offline use and tests) sets no limit;
//! the server always fills it in, with the oldest supported release when it cannot learn
//! the real one. Thresholds and their sources: [`crate::kube_version`].

use crate::config::Config;
use crate::kube_version::{self, KubeVersion};
use crate::mutation::hook::Before;

/// The version that rules out `feature`, if any.
fn lacking(config: &Config, feature: KubeVersion) -> Option<KubeVersion> {
    config
        .kubernetes_version
        .filter(|version| !version.has(feature))
}

/// The denial sentence for an explicit `mode: sidecar` on a cluster without native
/// sidecars, which would drop `restartPolicy: Always` and leave the pod waiting forever.
pub(in crate::mutation) fn sidecar_denial(config: &Config) -> Option<String> {
    lacking(config, kube_version::NATIVE_SIDECARS).map(|version| {
        format!(
            "sidecar mode needs Kubernetes ≥ {} (native sidecars); this cluster runs {version}; \
             use mode exec, or remove the annotation",
            kube_version::NATIVE_SIDECARS
        )
    })
}

/// Why sidecar mode cannot be chosen automatically, as a short phrase for a warning.
pub(in crate::mutation) fn sidecar_unavailable(config: &Config) -> Option<String> {
    if !config.sidecar.allowed {
        return Some("sidecar mode is not allowed".to_owned());
    }
    lacking(config, kube_version::NATIVE_SIDECARS).map(|version| {
        format!(
            "sidecar mode needs Kubernetes ≥ {}, cluster runs {version}",
            kube_version::NATIVE_SIDECARS
        )
    })
}

/// The user's handler as this cluster can store it: a `sleep` action below 1.30 becomes
/// `exec: [sleep, N]` (an empty handler would be rejected), and a zero sleep below 1.33,
/// which does nothing, becomes no handler at all.
pub(in crate::mutation) fn storable(
    before: Before,
    config: &Config,
    container: &str,
    warnings: &mut Vec<String>,
) -> Before {
    let Before::Sleep(seconds) = before else {
        return before;
    };
    if seconds == 0 && lacking(config, kube_version::SLEEP_ZERO).is_some() {
        return Before::Nothing;
    }
    match lacking(config, kube_version::SLEEP_ACTION) {
        None => Before::Sleep(seconds),
        Some(version) => {
            warnings.push(format!(
                "container {container:?}: preStop sleep needs Kubernetes ≥ {}, cluster runs {version}; now exec sleep {seconds}",
                kube_version::SLEEP_ACTION
            ));
            Before::Exec(vec!["sleep".to_owned(), seconds.to_string()])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(version: Option<&str>) -> Config {
        Config {
            kubernetes_version: version.map(|v| v.parse().unwrap()),
            ..Config::default()
        }
    }

    #[test]
    fn sidecars_from_1_29_or_without_a_known_limit() {
        for (version, denied) in [
            (Some("1.20"), true),
            (Some("1.28"), true),
            (Some("1.29"), false),
            (Some("1.33"), false),
            (None, false),
        ] {
            let config = on(version);
            assert_eq!(sidecar_denial(&config).is_some(), denied, "{version:?}");
            assert_eq!(
                sidecar_unavailable(&config).is_some(),
                denied,
                "{version:?}"
            );
        }
        let sentence = sidecar_denial(&on(Some("1.20"))).unwrap();
        assert!(
            sentence.starts_with(
                "sidecar mode needs Kubernetes ≥ 1.29 (native sidecars); this cluster runs 1.20"
            ),
            "{sentence}"
        );
        let config = Config {
            sidecar: crate::config::SidecarConfig {
                allowed: false,
                ..Default::default()
            },
            ..on(Some("1.30"))
        };
        assert_eq!(
            sidecar_unavailable(&config).unwrap(),
            "sidecar mode is not allowed"
        );
    }

    #[test]
    fn sleep_actions_only_where_the_server_takes_them() {
        let exec = |n: &str| Before::Exec(vec!["sleep".to_owned(), n.to_owned()]);
        for (version, before, expected, warns) in [
            (Some("1.29"), Before::Sleep(5), exec("5"), true),
            (Some("1.20"), Before::Sleep(5), exec("5"), true),
            (Some("1.30"), Before::Sleep(5), Before::Sleep(5), false),
            (None, Before::Sleep(5), Before::Sleep(5), false),
            (Some("1.32"), Before::Sleep(0), Before::Nothing, false),
            (Some("1.20"), Before::Sleep(0), Before::Nothing, false),
            (Some("1.33"), Before::Sleep(0), Before::Sleep(0), false),
            (Some("1.20"), Before::Nothing, Before::Nothing, false),
            (Some("1.20"), exec("3"), exec("3"), false),
        ] {
            let mut warnings = Vec::new();
            let got = storable(before.clone(), &on(version), "app", &mut warnings);
            assert_eq!(got, expected, "{version:?} {before:?}");
            assert_eq!(
                !warnings.is_empty(),
                warns,
                "{version:?} {before:?}: {warnings:?}"
            );
            assert!(
                warnings.iter().all(|w| w.chars().count() <= 120),
                "{warnings:?}"
            );
        }
    }
}
