//! The Kubernetes version of the cluster the webhook answers for, and which of our
//! features each version can run (docs/KUBERNETES.md).
//!
//! Only what the API server *accepts and keeps* matters: a 1.20 server silently drops a
//! patch's `restartPolicy: Always` on an init container (the cleanup sidecar then never
//! exits and the pod never starts) and rejects an empty preStop handler left by a dropped
//! `sleep` action. So each feature has the first minor version where it is on by default:
//!
//! | feature | first version | why |
//! |---|---|---|
//! | exec preStop (everything else) | 1.20 | oldest supported |
//! | `kubernetes.io/metadata.name` on every namespace (our namespaceSelector) | 1.21 | KEP-2161
//! NamespaceDefaultLabelName: beta on by default 1.21 | | `matchConditions` (webhook configuration)
//! | 1.28 | KEP-3716 AdmissionWebhookMatchConditions: alpha 1.27, beta on by default 1.28 | |
//! sidecar mode (native sidecars) | 1.29 | KEP-753 SidecarContainers: alpha 1.28, beta on by
//! default 1.29 | | preStop `sleep` action | 1.30 | KEP-3960 PodLifecycleSleepAction: alpha 1.29,
//! beta on by default 1.30 | | `sleep` of 0 seconds | 1.33 | KEP-4818
//! PodLifecycleSleepActionAllowZero: alpha 1.32, beta on by default 1.33 |

use serde::{Deserialize, Deserializer};
use std::fmt;
use std::str::FromStr;

/// `major.minor` of a Kubernetes release; patch levels never change which fields exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
}

/// The oldest release we support; assumed when the cluster's version is unknown.
pub const OLDEST_SUPPORTED: KubeVersion = KubeVersion::new(1, 20);
/// Every namespace carries `kubernetes.io/metadata.name`, which our namespaceSelector
/// uses to keep the system namespaces out.
pub const NAMESPACE_NAME_LABEL: KubeVersion = KubeVersion::new(1, 21);
/// Webhook configurations may carry `matchConditions`.
pub const MATCH_CONDITIONS: KubeVersion = KubeVersion::new(1, 28);
/// Init containers with `restartPolicy: Always` (sidecar mode).
pub const NATIVE_SIDECARS: KubeVersion = KubeVersion::new(1, 29);
/// `lifecycle.preStop.sleep`.
pub const SLEEP_ACTION: KubeVersion = KubeVersion::new(1, 30);
/// `lifecycle.preStop.sleep.seconds: 0`.
pub const SLEEP_ZERO: KubeVersion = KubeVersion::new(1, 33);

impl KubeVersion {
    pub const fn new(major: u32, minor: u32) -> KubeVersion {
        KubeVersion { major, minor }
    }

    /// From the `major` and `minor` fields of the API server's `/version`, which some
    /// distributions suffix (`"29+"` on GKE and EKS); falls back to `gitVersion`
    /// (`v1.29.3-gke.1`) when they are empty, as in builds without version metadata.
    pub fn from_version_info(major: &str, minor: &str, git_version: &str) -> Option<KubeVersion> {
        let number = |text: &str| {
            let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        };
        match (number(major), number(minor)) {
            (Some(major), Some(minor)) => Some(KubeVersion::new(major, minor)),
            _ => git_version.parse().ok(),
        }
    }

    /// Whether a cluster of this version has `feature` (one of the constants above).
    pub fn has(self, feature: KubeVersion) -> bool {
        self >= feature
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Accepts `1.29`, `v1.29`, `1.29.3` and `v1.29.3-gke.1`.
impl FromStr for KubeVersion {
    type Err = String;

    fn from_str(text: &str) -> Result<KubeVersion, String> {
        let bad =
            || format!("{text:?} is not a Kubernetes version; write it as 1.29 (major.minor)");
        let rest = text.trim().strip_prefix('v').unwrap_or(text.trim());
        let mut parts = rest.splitn(3, '.');
        let major = parts.next().and_then(|p| p.parse::<u32>().ok());
        let minor = parts.next().map(|p| {
            let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
            let suffix = &p[digits.len()..];
            (digits.parse::<u32>().ok(), suffix)
        });
        match (major, minor, parts.next()) {
            // A build suffix on the minor (`29+`, `29-gke.1`) only when no patch follows.
            (Some(major), Some((Some(minor), suffix)), rest)
                if suffix.is_empty() || (rest.is_none() && suffix.starts_with(['+', '-'])) =>
            {
                if major != 1 {
                    return Err(bad());
                }
                Ok(KubeVersion::new(major, minor))
            }
            _ => Err(bad()),
        }
    }
}

/// Only strings: YAML reads `kubernetesVersion: 1.30` as the number 1.3.
impl<'de> Deserialize<'de> for KubeVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<KubeVersion, D::Error> {
        let value = serde_yaml::Value::deserialize(deserializer)?;
        match value {
            serde_yaml::Value::String(text) => text.parse().map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "kubernetesVersion must be a quoted string such as \"1.30\" (got {}; a YAML number 1.30 reads as 1.3)",
                serde_yaml::to_string(&other).unwrap_or_default().trim()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms_users_and_servers_write() {
        for (text, expected) in [
            ("1.29", (1, 29)),
            ("v1.20", (1, 20)),
            ("1.30.2", (1, 30)),
            ("v1.29.3-gke.1", (1, 29)),
            ("v1.28.5+k3s1", (1, 28)),
            (" 1.31 ", (1, 31)),
            ("1.29+", (1, 29)),
        ] {
            let version: KubeVersion = text.parse().unwrap();
            assert_eq!((version.major, version.minor), expected, "{text}");
        }
        for bad in [
            "", "1", "1.", "one.two", "2.0", "1.x", "1.29x.3", "1.3o", "latest",
        ] {
            assert!(bad.parse::<KubeVersion>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reads_version_info_with_suffixed_minor_or_only_git_version() {
        assert_eq!(
            KubeVersion::from_version_info("1", "29+", "v1.29.1-eks-1"),
            Some(KubeVersion::new(1, 29))
        );
        assert_eq!(
            KubeVersion::from_version_info("", "", "v1.20.2"),
            Some(KubeVersion::new(1, 20))
        );
        assert_eq!(
            KubeVersion::from_version_info("", "", "v0.0.0-master+$Format:%h$"),
            None
        );
    }

    #[test]
    fn orders_by_minor_and_gates_features() {
        assert!(KubeVersion::new(1, 9) < KubeVersion::new(1, 10));
        assert!(!OLDEST_SUPPORTED.has(NATIVE_SIDECARS));
        assert!(!KubeVersion::new(1, 28).has(NATIVE_SIDECARS));
        assert!(KubeVersion::new(1, 29).has(NATIVE_SIDECARS));
        assert!(!KubeVersion::new(1, 29).has(SLEEP_ACTION));
        assert!(KubeVersion::new(1, 30).has(SLEEP_ACTION));
        assert_eq!(NATIVE_SIDECARS.to_string(), "1.29");
    }

    #[test]
    fn yaml_numbers_are_refused_with_the_fix() {
        let error = serde_yaml::from_str::<KubeVersion>("1.30").unwrap_err();
        assert!(error.to_string().contains("quoted string"), "{error}");
        assert_eq!(
            serde_yaml::from_str::<KubeVersion>("'1.30'").unwrap(),
            KubeVersion::new(1, 30)
        );
    }
}
