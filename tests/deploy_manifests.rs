//! The kustomize overlays under deploy/: they render, validate against the Kubernetes
//! schemas in strict mode, and carry the settings docs/INSTALL.md promises.

#[path = "support/deploy.rs"]
mod common;

use common::{find, webhook};
use serde_json::json;
use std::process::Command;

#[test]
fn every_overlay_renders_and_validates_strictly() {
    let (Some(kubectl), Some(validator)) = (common::kubectl(), common::kubernetes_validate())
    else {
        return;
    };
    for overlay in common::OVERLAYS {
        let objects = common::render(&kubectl, overlay);
        common::validate(&validator, overlay, &objects);
        let expected = if overlay == "cert-manager" { 4 } else { 0 };
        assert_eq!(
            common::skipped(&objects),
            expected,
            "{overlay}: cert-manager objects"
        );
    }
}

/// `cleaner.image` in the shipped config is the Deployment's own image (kustomize's
/// `images:` rewrites the Deployment but not a file in a configMapGenerator) and the
/// binary's built-in default; and the config loads.
#[test]
fn the_cleaner_image_is_the_deployments_image() {
    let base = common::deploy_dir().join("base");
    let read = |name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(base.join(name)).unwrap();
        serde_yaml::from_str(&text).unwrap()
    };
    let kustomization = read("kustomization.yaml");
    let image = kustomization["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "prestop-injector")
        .expect("images: prestop-injector");
    let deployed = format!(
        "{}:{}",
        image["newName"].as_str().unwrap(),
        image["newTag"].as_str().unwrap()
    );
    let text = std::fs::read_to_string(base.join("config.yaml")).unwrap();
    let config = prestop_injector::config::Config::from_yaml(&text).unwrap();
    assert_eq!(config.cleaner.image, deployed);
    assert_eq!(
        config.cleaner.image,
        prestop_injector::config::DEFAULT_CLEANER_IMAGE
    );
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
    assert_eq!(
        read("webhook/deployment.yaml")["spec"]["template"]["spec"]["containers"][0]["image"],
        "prestop-injector",
        "the Deployment's image is the one kustomize rewrites"
    );

    // Rendered, when kubectl is there: the ConfigMap's config names the Deployment's image.
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    for overlay in common::OVERLAYS {
        let objects = common::render(&kubectl, overlay);
        let deployment = find(&objects, "Deployment", "prestop-injector");
        let image = &deployment["spec"]["template"]["spec"]["containers"][0]["image"];
        let config_map = objects
            .iter()
            .find(|o| {
                o["kind"] == "ConfigMap"
                    && o["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("prestop-injector-config"))
            })
            .expect("the config ConfigMap");
        let config = prestop_injector::config::Config::from_yaml(
            config_map["data"]["config.yaml"].as_str().unwrap(),
        )
        .unwrap();
        assert_eq!(json!(config.cleaner.image), *image, "{overlay}");
    }
}

#[test]
fn strict_validation_rejects_an_unknown_field() {
    let Some(validator) = common::kubernetes_validate() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {portz: []}\n",
    )
    .unwrap();
    let status = Command::new(validator)
        .arg("--strict")
        .arg(&file)
        .output()
        .unwrap()
        .status;
    assert!(!status.success(), "strict mode must reject spec.portz");
}

#[test]
fn deployment_is_highly_available_and_restricted() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, "cluster-wide");
    let deployment = find(&objects, "Deployment", "prestop-injector");
    assert_eq!(deployment["metadata"]["namespace"], "prestop-system");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    let anti =
        &pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        anti["podAffinityTerm"]["topologyKey"],
        "kubernetes.io/hostname"
    );
    assert_eq!(
        pod["topologySpreadConstraints"][0]["topologyKey"],
        "topology.kubernetes.io/zone"
    );
    // Only to read /version (no RBAC); the ServiceAccount itself mounts nothing.
    assert_eq!(pod["automountServiceAccountToken"], true);
    assert_eq!(pod["serviceAccountName"], "prestop-injector");
    let security = &pod["securityContext"];
    assert_eq!(security["runAsNonRoot"], true);
    assert_eq!(security["runAsUser"], 65532);
    assert_eq!(security["seccompProfile"]["type"], "RuntimeDefault");

    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        container["readinessProbe"]["httpGet"],
        json!({"path": "/readyz", "port": "probes"})
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"],
        json!({"path": "/healthz", "port": "probes"})
    );
    let ports: Vec<(&str, i64)> = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["containerPort"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ports, [("https", 8443), ("probes", 8080)]);
    assert_eq!(
        container["resources"]["requests"],
        json!({"cpu": "50m", "memory": "32Mi"})
    );
    assert_eq!(container["resources"]["limits"], json!({"memory": "64Mi"}));

    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "serve");
    let flag = |name: &str| -> &str {
        let prefix = format!("--{name}=");
        args.iter()
            .find_map(|a| a.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no --{name} in {args:?}"))
    };
    assert_eq!(flag("listen"), "0.0.0.0:8443");
    assert_eq!(flag("probe-listen"), "0.0.0.0:8080");
    // Our own preStop sleep matches --shutdown-delay, and the grace period covers both
    // plus the drain of in-flight reviews, which needs at least the webhook timeout.
    let sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_i64()
        .unwrap();
    assert_eq!(flag("shutdown-delay"), format!("{sleep}s"));
    let timeout = webhook(&objects, "MutatingWebhookConfiguration")["timeoutSeconds"]
        .as_i64()
        .unwrap();
    let drain: i64 = flag("drain-timeout").trim_end_matches('s').parse().unwrap();
    assert!(
        drain >= timeout,
        "drain {drain}s shorter than a review ({timeout}s)"
    );
    let grace = pod["terminationGracePeriodSeconds"].as_i64().unwrap();
    assert!(
        grace > 2 * sleep + drain,
        "grace {grace}s must cover {sleep}s + {sleep}s + {drain}s"
    );

    // Secret and ConfigMap mounted as directories (no subPath) so updates arrive.
    let mounts = container["volumeMounts"].as_array().unwrap();
    assert!(mounts
        .iter()
        .all(|m| m.get("subPath").is_none() && m["readOnly"] == true));
    let mount_of = |volume: &str| {
        let mount = mounts.iter().find(|m| m["name"] == volume).unwrap();
        mount["mountPath"].as_str().unwrap().to_owned()
    };
    assert_eq!(flag("tls-cert"), format!("{}/tls.crt", mount_of("tls")));
    assert_eq!(flag("tls-key"), format!("{}/tls.key", mount_of("tls")));
    assert_eq!(
        flag("config"),
        format!("{}/config.yaml", mount_of("config"))
    );
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).unwrap();
    assert_eq!(
        volume("tls")["secret"]["secretName"],
        "prestop-injector-tls"
    );
    let config_map = volume("config")["configMap"]["name"].as_str().unwrap();
    let config = find(&objects, "ConfigMap", config_map);
    let text = config["data"]["config.yaml"].as_str().unwrap();
    prestop_injector::config::Config::from_yaml(text).expect("the shipped config is valid");

    let pdb = find(&objects, "PodDisruptionBudget", "prestop-injector");
    assert_eq!(pdb["spec"]["minAvailable"], 1);
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
    let service = find(&objects, "Service", "prestop-injector");
    assert_eq!(&service["spec"]["selector"], labels);
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    assert_eq!(
        find(&objects, "ServiceAccount", "prestop-injector")["automountServiceAccountToken"],
        false
    );
    find(&objects, "Namespace", "prestop-system");
    // The only RBAC is the node agent's (list Pods, tests/deploy_node_agent.rs).
    let rbac: Vec<&str> = objects
        .iter()
        .filter(|o| o["kind"].as_str().unwrap().contains("Role"))
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        rbac,
        ["prestop-node", "prestop-node"],
        "the webhook needs no API permissions"
    );
}

#[test]
fn generate_script_installs_an_overlay_with_secret_and_ca_bundle() {
    use base64::Engine as _;
    let (Some(kubectl), Some(validator)) = (common::kubectl(), common::kubernetes_validate())
    else {
        return;
    };
    let out = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let run = || {
        let output = Command::new("bash")
            .arg(common::repo_root().join("certs/generate.sh"))
            .arg("namespace-opt-in")
            .env("OUT", out.path())
            .env("PRESTOP_INJECTOR", env!("CARGO_BIN_EXE_prestop-injector"))
            .output()
            .expect("run certs/generate.sh");
        assert!(output.status.success(), "generate.sh: {output:?}");
    };
    run();
    let key = std::fs::read(out.path().join("tls/tls.key")).unwrap();
    let seal_key = std::fs::read(out.path().join("tls/seal.key")).unwrap();
    run();
    assert_eq!(
        std::fs::read(out.path().join("tls/tls.key")).unwrap(),
        key,
        "a re-run keeps the keys"
    );
    assert_eq!(
        std::fs::read(out.path().join("tls/seal.key")).unwrap(),
        seal_key,
        "a re-run keeps the seal key"
    );
    // One key the server and the reaper accept: 32 random bytes in hex, private.
    let keys =
        prestop_injector::seal_keys::SealKeys::parse(std::str::from_utf8(&seal_key).unwrap());
    assert_eq!(keys.map(|k| k.len()), Ok(1));
    assert_eq!(seal_key.len(), 65, "64 hex digits and a newline");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(out.path().join("tls/seal.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the seal key is private: {mode:o}");

    let objects = common::render_dir(&kubectl, &out.path().join("namespace-opt-in"));
    common::validate(&validator, "generated", &objects);
    let b64 = |file: &str| {
        base64::engine::general_purpose::STANDARD
            .encode(std::fs::read(out.path().join("tls").join(file)).unwrap())
    };
    let secret = find(&objects, "Secret", "prestop-injector-tls");
    assert_eq!(secret["metadata"]["namespace"], "prestop-system");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(secret["data"]["tls.crt"], b64("tls.crt"));
    assert_eq!(secret["data"]["tls.key"], b64("tls.key"));
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert_eq!(
            webhook(&objects, kind)["clientConfig"]["caBundle"],
            b64("ca.crt"),
            "{kind}"
        );
    }
    assert_eq!(
        webhook(&objects, "MutatingWebhookConfiguration")["clientConfig"]["service"]["path"],
        "/mutate/auto"
    );
    // The seal key's Secret, where the Deployment mounts it from.
    let seal = find(&objects, "Secret", "prestop-injector-seal");
    assert_eq!(seal["metadata"]["namespace"], "prestop-system");
    assert_eq!(seal["data"]["seal.key"], b64("seal.key"));
    let deployment = find(&objects, "Deployment", "prestop-injector");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "prestop-injector-seal"),
        "{volumes:?}"
    );

    // With the reaper: the lines the generated kustomization names, uncommented, add the
    // reaper and its copy of the same key in the node's namespace, where its pod is.
    let dir = out.path().join("namespace-opt-in");
    let text = std::fs::read_to_string(dir.join("kustomization.yaml")).unwrap();
    let with_reaper = text
        .replace("# components:", "components:")
        .replace("#   - ", "  - ");
    assert_ne!(
        with_reaper, text,
        "the kustomization names the reaper's lines"
    );
    std::fs::write(dir.join("kustomization.yaml"), with_reaper).unwrap();
    let objects = common::render_dir(&kubectl, &dir);
    common::validate(&validator, "generated with the reaper", &objects);
    let copy = find(&objects, "Secret", "prestop-reaper-seal");
    assert_eq!(copy["metadata"]["namespace"], "prestop-node");
    assert_eq!(copy["data"], json!({"seal.key": b64("seal.key")}));
    let daemonset = find(&objects, "DaemonSet", "prestop-node");
    assert_eq!(daemonset["metadata"]["namespace"], "prestop-node");
    let volumes = daemonset["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "prestop-reaper-seal"),
        "{volumes:?}"
    );
}

#[test]
fn the_deployment_arguments_start_the_real_server() {
    let Some(kubectl) = common::kubectl() else {
        return;
    };
    let objects = common::render(&kubectl, "cluster-wide");
    let deployment = find(&objects, "Deployment", "prestop-injector");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    // The shipped config and a certificate, at temporary paths instead of the mounts.
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_prestop-injector"))
        .args(["certs", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let config = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the config ConfigMap");
    let config_file = dir.path().join("config.yaml");
    std::fs::write(
        &config_file,
        config["data"]["config.yaml"].as_str().unwrap(),
    )
    .unwrap();
    let args = common::local_serve_args(container, dir.path(), &config_file);
    // Every flag the Deployment passes is one the server accepts, with the shipped config.
    let server = common::start_server(&args);
    // And it seals with the key it was given (docs/REAPER.md#the-seal).
    let metrics = common::http_get(server.probe, "/metrics").unwrap_or_default();
    assert!(
        metrics
            .lines()
            .any(|line| line == "prestop_injector_seal_keys 1"),
        "{metrics}"
    );
}
