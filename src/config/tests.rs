//! The configuration file's unit tests: defaults, every key, and the errors that name a
//! bad key or value.

use super::*;

#[test]
fn empty_is_default() {
    let config = Config::from_yaml("").unwrap();
    assert_eq!(config.cleanup_budget_seconds, 30);
    assert_eq!(config.shutdown_seconds, 10);
    assert_eq!(config.max_grace_seconds, 3600);
    assert_eq!(config.default_shell, "/bin/sh");
    assert!(config.sidecar.allowed);
    assert_eq!(config.orphan_delete, OrphanDelete::Warn);
}

#[test]
fn reads_every_key() {
    let config = Config::from_yaml(
        "defaultShell: /bin/ash\nimagesWithoutBash: [my/tool*]\nimagesWithoutShell: [my/static]\n\
         protectedHostPaths: [/data/keep]\nallowedHostPathPrefixes: [/scratch]\ncleanupBudgetSeconds: 5\n\
         shutdownSeconds: 3\nmaxGraceSeconds: 600\ndefaultMode: sidecar\n\
         sidecar: {allowed: false, image: 'busybox:1.36', resources: {}}\norphanDelete: deny\n\
         kubernetesVersion: '1.28'\n",
    )
    .unwrap();
    assert_eq!(config.default_shell, "/bin/ash");
    assert_eq!(config.images_without_bash, ["my/tool*"]);
    assert_eq!(config.allowed_host_path_prefixes, ["/scratch"]);
    assert_eq!(config.default_mode, Mode::Sidecar);
    assert!(!config.sidecar.allowed);
    assert_eq!(config.sidecar.shell_image(), "busybox:1.36");
    assert_eq!(config.orphan_delete, OrphanDelete::Deny);
    assert_eq!(config.kubernetes_version, Some(KubeVersion::new(1, 28)));
    assert_eq!(config.cleaner.image, DEFAULT_CLEANER_IMAGE);
    assert_eq!(config.cleaner.mode, CleanerMode::Binary);
}

#[test]
fn cleaner_keys() {
    let config =
        Config::from_yaml("cleaner: {image: 'registry.example/p:1', mode: shell}\n").unwrap();
    assert_eq!(config.cleaner.image, "registry.example/p:1");
    assert_eq!(config.cleaner.mode, CleanerMode::Shell);
    assert_eq!(config.sidecar.shell_image(), DEFAULT_SIDECAR_IMAGE);
    assert!(config.warnings().is_empty());
    assert!(Config::from_yaml("cleaner: {mode: sh}\n").is_err());
    assert!(Config::from_yaml("cleaner: {image: ''}\n").is_err());
    let error = Config::from_yaml("cleaner: {imag: x}\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("imag"), "{error}");
}

#[test]
fn a_sidecar_image_of_an_older_config_is_accepted_with_a_warning() {
    let config = Config::from_yaml("sidecar: {image: 'busybox:1.36'}\n").unwrap();
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("cleaner.mode: shell"), "{warnings:?}");
    let config =
        Config::from_yaml("sidecar: {image: 'busybox:1.36'}\ncleaner: {mode: shell}\n").unwrap();
    assert!(config.warnings().is_empty());
    assert_eq!(config.sidecar.shell_image(), "busybox:1.36");
}

#[test]
fn node_agent_key() {
    assert_eq!(Config::from_yaml("").unwrap().node_agent, None);
    let config = Config::from_yaml("nodeAgent: {hostDirectory: /run/prestop-agent}\n").unwrap();
    assert_eq!(
        config.node_agent.map(|a| a.host_directory).as_deref(),
        Some("/run/prestop-agent")
    );
    let config = Config::from_yaml("nodeAgent: {}\n").unwrap();
    assert_eq!(
        config.node_agent.map(|a| a.host_directory).as_deref(),
        Some(DEFAULT_NODE_AGENT_DIRECTORY)
    );
    for (yaml, named) in [
        ("nodeAgent: {hostDirectory: /var/run}\n", "itself protected"),
        ("nodeAgent: {hostDirectory: run/agent}\n", "normalized"),
        ("nodeAgent: {hostDir: /run/x}\n", "hostDir"),
        (
            "allowedHostPathPrefixes: [/mnt/scratch]\nnodeAgent: {hostDirectory: /mnt/scratch/agent}\n",
            "allowedHostPathPrefixes",
        ),
    ] {
        let error = Config::from_yaml(yaml).unwrap_err().to_string();
        assert!(error.contains(named), "{yaml}: {error}");
    }
}

#[test]
fn unknown_keys_are_named() {
    let error = Config::from_yaml("cleanupBudget: 5\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("cleanupBudget"), "{error}");
    let error = Config::from_yaml("sidecar: {imag: x}\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("imag"), "{error}");
}

#[test]
fn bad_values_are_errors() {
    assert!(Config::from_yaml("defaultShell: sh\n").is_err());
    assert!(Config::from_yaml("defaultMode: both\n").is_err());
    assert!(Config::from_yaml("maxGraceSeconds: 0\n").is_err());
    assert!(Config::from_yaml("allowedHostPathPrefixes: [scratch]\n").is_err());
    let error = Config::from_yaml("kubernetesVersion: 1.30\n")
        .unwrap_err()
        .to_string();
    assert!(error.contains("quoted string"), "{error}");
    assert!(Config::from_yaml("kubernetesVersion: 'latest'\n").is_err());
}
