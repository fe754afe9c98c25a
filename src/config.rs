//! The configuration file (docs/CONFIG.md). Every key is optional; unknown keys are an error
//! that names the key, so a typo cannot silently fall back to a default.

use crate::kube_version::KubeVersion;
use crate::policy;
use crate::seal_keys::SealKeys;
use serde::Deserialize;
use std::path::Path;

/// Where the cleanup runs for a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A `lifecycle.preStop` exec hook in the app container itself.
    #[default]
    Exec,
    /// A native sidecar (init container with `restartPolicy: Always`) that cleans on SIGTERM.
    Sidecar,
}

/// What `/validate` does with a DELETE that would orphan injected pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OrphanDelete {
    #[default]
    Warn,
    Deny,
    Allow,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Shell for injected hooks when the `shell` annotation is absent.
    pub default_shell: String,
    /// Image patterns (`*` wildcards) known to have `sh` but no `bash`, added to the built-in list.
    pub images_without_bash: Vec<String>,
    /// Image patterns known to have no shell at all, added to the built-in list.
    pub images_without_shell: Vec<String>,
    /// Host paths never cleaned by `auto`, added to the built-in list.
    pub protected_host_paths: Vec<String>,
    /// The host directories every cleanup may empty, at or below (docs/DESIGN.md#targets: the
    /// allow-list first). Empty, the default: nothing that deletes is injected until the operator
    /// names the node's scratch prefixes.
    pub allowed_host_path_prefixes: Vec<String>,
    /// Seconds a generated cleanup is given in the grace-period estimate.
    pub cleanup_budget_seconds: u64,
    /// Seconds an app needs after SIGTERM when the annotation does not say.
    pub shutdown_seconds: u64,
    /// The grace period is never raised above this.
    pub max_grace_seconds: u64,
    /// Mode used when the `mode` annotation is absent.
    pub default_mode: Mode,
    pub sidecar: SidecarConfig,
    pub cleaner: CleanerConfig,
    pub orphan_delete: OrphanDelete,
    /// The cluster's Kubernetes version (`"1.29"`): decides which features may be emitted
    /// (sidecar mode needs 1.29, a preStop `sleep` action 1.30). Set in the file, it
    /// overrides what `serve` learns from the API server; `None` sets no limit (the
    /// offline CLI without `--kubernetes-version`). See [`crate::kube_version`].
    pub kubernetes_version: Option<KubeVersion>,
    /// The seal's keys (docs/REAPER.md#the-seal), from `--seal-key-file`, never from this
    /// file: an input of the core like the rest of the config, read from disk by the
    /// commands. Empty: the webhook seals nothing, and the reaper empties nothing.
    #[serde(skip)]
    pub seal: SealKeys,
    /// `nodeAgent`: the node agent runs on the nodes (the `node-agent` container of the
    /// node DaemonSet that every install ships, deploy/base/node), and every cleaner
    /// program is given its socket, to ask whether the directory it opened is the node's
    /// directory at the expected host path. `None`, the default of a file without the key
    /// (the shipped configs set it): nothing of it is injected, and the cleaner keeps the
    /// strict rule.
    pub node_agent: Option<NodeAgentConfig>,
}

/// `nodeAgent` (docs/CONFIG.md#the-node-agent).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NodeAgentConfig {
    /// The directory on every node that holds the agent's socket (`agent.sock`), mounted
    /// read-only into each pod we inject the cleaner program into.
    pub host_directory: String,
}

/// Where the shipped DaemonSet puts the node agent's socket directory.
pub const DEFAULT_NODE_AGENT_DIRECTORY: &str = "/var/run/prestop-injector";

impl Default for NodeAgentConfig {
    fn default() -> Self {
        NodeAgentConfig {
            host_directory: DEFAULT_NODE_AGENT_DIRECTORY.to_owned(),
        }
    }
}

/// How the cleanup is carried out inside the pod (docs/DESIGN.md#the-hook-and-the-cleaner-program).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CleanerMode {
    /// The static `prestop-clean` program, delivered by an init container: no shell, no
    /// symlink, mount or swap crossed.
    #[default]
    Binary,
    /// The POSIX `sh` script of earlier releases, for clusters that forbid the extra
    /// image. Weaker: a concurrent symlink swap or a bind mount of the same filesystem is
    /// not caught, and the image needs a shell.
    Shell,
}

impl CleanerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CleanerMode::Binary => "binary",
            CleanerMode::Shell => "shell",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CleanerConfig {
    /// The image that carries `/usr/local/bin/prestop-clean`: the release's own image.
    pub image: String,
    pub mode: CleanerMode,
}

/// The release's own image, which ships both programs. deploy/base sets the same value
/// (`cleaner.image` in config.yaml, `images:` in kustomization.yaml); a test keeps the
/// three in step.
pub const DEFAULT_CLEANER_IMAGE: &str = concat!(
    "ghcr.io/prestop-injector/prestop-injector:",
    env!("CARGO_PKG_VERSION")
);

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            image: DEFAULT_CLEANER_IMAGE.to_owned(),
            mode: CleanerMode::Binary,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SidecarConfig {
    /// Whether sidecar mode may be used at all (explicitly or as a fallback).
    pub allowed: bool,
    /// Image of the shell sidecar of `cleaner.mode: shell` (it needs `/bin/sh`, `find` and
    /// `rm`; default [`DEFAULT_SIDECAR_IMAGE`]). With `cleaner.mode: binary` the sidecar
    /// runs `cleaner.image` and this key is ignored with a start-up warning.
    pub image: Option<String>,
    /// `resources` of the sidecar container, copied verbatim.
    pub resources: crate::json::Value,
}

/// Pinned so that a cluster never pulls a moving tag into every Job pod.
pub const DEFAULT_SIDECAR_IMAGE: &str = "busybox:1.37.0";

impl SidecarConfig {
    /// The image of the shell-mode sidecar.
    pub fn shell_image(&self) -> &str {
        self.image.as_deref().unwrap_or(DEFAULT_SIDECAR_IMAGE)
    }
}

impl Default for SidecarConfig {
    fn default() -> Self {
        SidecarConfig {
            allowed: true,
            image: None,
            resources: crate::json::json!({
                "requests": {"cpu": "10m", "memory": "16Mi"},
                "limits": {"cpu": "100m", "memory": "32Mi"}
            }),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            default_shell: "/bin/sh".to_owned(),
            images_without_bash: Vec::new(),
            images_without_shell: Vec::new(),
            protected_host_paths: Vec::new(),
            allowed_host_path_prefixes: Vec::new(),
            cleanup_budget_seconds: 30,
            shutdown_seconds: 10,
            max_grace_seconds: 3600,
            default_mode: Mode::Exec,
            sidecar: SidecarConfig::default(),
            cleaner: CleanerConfig::default(),
            orphan_delete: OrphanDelete::Warn,
            kubernetes_version: None,
            seal: SealKeys::default(),
            node_agent: None,
        }
    }
}

impl Config {
    /// Parses a YAML document. An empty document is the default configuration.
    pub fn from_yaml(text: &str) -> anyhow::Result<Config> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config: Config = serde_yaml::from_str(text)?;
        config.validate()?;
        Ok(config)
    }

    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        Config::from_yaml(&text)
            .map_err(|e| anyhow::anyhow!("invalid config {}: {e}", path.display()))
    }

    fn validate(&self) -> anyhow::Result<()> {
        if !self.default_shell.starts_with('/') {
            anyhow::bail!(
                "defaultShell must be an absolute path, got {:?}",
                self.default_shell
            );
        }
        for prefix in self
            .protected_host_paths
            .iter()
            .chain(&self.allowed_host_path_prefixes)
        {
            if !prefix.starts_with('/') {
                anyhow::bail!("host path {prefix:?} must be absolute");
            }
        }
        for prefix in &self.allowed_host_path_prefixes {
            if let Some(why) = policy::prefix_refusal(prefix) {
                anyhow::bail!(
                    "allowedHostPathPrefixes entry {prefix:?} {why}: name the node's scratch \
                     directories themselves, e.g. /mnt/scratch"
                );
            }
        }
        if let Some(agent) = &self.node_agent {
            let directory = &agent.host_directory;
            if let Some(why) = policy::node_agent_directory_refusal(
                directory,
                &self.protected_host_paths,
                &self.allowed_host_path_prefixes,
            ) {
                anyhow::bail!(
                    "nodeAgent.hostDirectory {directory:?} {why}: name a directory of the \
                     agent's own, e.g. {DEFAULT_NODE_AGENT_DIRECTORY}"
                );
            }
        }
        if self.max_grace_seconds == 0 {
            anyhow::bail!("maxGraceSeconds must be positive");
        }
        if self.cleaner.image.trim().is_empty() {
            anyhow::bail!(
                "cleaner.image must name an image, e.g. {DEFAULT_CLEANER_IMAGE:?}; \
                 or set cleaner.mode: shell"
            );
        }
        Ok(())
    }

    /// The start-up sentence about what the cleanup may delete (docs/DESIGN.md#targets): said once,
    /// so an operator who has not named any prefix learns why nothing is cleaned.
    pub fn allow_list_summary(&self) -> String {
        if self.allowed_host_path_prefixes.is_empty() {
            "no allowedHostPathPrefixes configured: nothing that deletes is injected until the \
             node's scratch directories are listed there"
                .to_owned()
        } else {
            format!(
                "cleanups delete only at or below allowedHostPathPrefixes: {}",
                self.allowed_host_path_prefixes.join(", ")
            )
        }
    }

    /// Settings that are accepted but have no effect, one sentence each, for the start-up log.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let (Some(image), CleanerMode::Binary) = (&self.sidecar.image, self.cleaner.mode) {
            warnings.push(format!(
                "sidecar.image {image:?} is ignored: the sidecar runs the cleaner program from \
                 cleaner.image; sidecar.image only applies with cleaner.mode: shell"
            ));
        }
        warnings
    }
}

#[cfg(test)]
mod tests;
