//! charts/prestop-injector with real Helm: it lints strictly, renders objects that
//! validate against the Kubernetes 1.30 and 1.37 schemas, its schema rejects bad values,
//! and its default render agrees with the kustomize overlays on every security-relevant
//! field, so the two installs cannot drift. Without helm the tests skip, or fail under
//! PRESTOP_REQUIRE_TOOLS=1 (CI runs .ci/deploy-tools.sh, which installs it).

#[path = "support/chart.rs"]
mod chart;
#[path = "support/deploy.rs"]
mod common;

use chart::{one, render};
use serde_json::{json, Value};

/// Value sets that between them switch every template on: the default install (with the
/// node agent), the other mode with cert-manager, the reaper and the monitoring objects,
/// and overrides (the node agent off).
const VALUE_SETS: [&[&str]; 3] = [
    &[],
    &[
        "--set=mode=namespace-opt-in",
        "--set=certificates.source=cert-manager",
        "--set=reaper.enabled=true",
        "--set=reaper.dryRun=false",
        "--set=config.allowedHostPathPrefixes={/mnt/scratch,/data/tmp}",
        "--set=config.protectedHostPaths={/data/keep}",
        "--set=serviceMonitor.enabled=true",
        "--set=prometheusRule.enabled=true",
        "--set=dashboards.enabled=true",
        "--set=priorityClassName=high",
        "--set=podDisruptionBudget.minAvailable=50%",
        "--set=nodeDaemonSet.nodeSelector.pool=batch",
        "--set=nodeDaemonSet.priorityClassName=batch-node",
        "--set=nodeDaemonSet.namespace.name=prestop-nodes",
    ],
    &[
        "--set=image.repository=registry.example.com/prestop",
        "--set=image.tag=dev",
        "--set=image.pullPolicy=Never",
        "--set=replicaCount=3",
        "--set=webhook.failurePolicy=Ignore",
        "--set=webhook.excludedNamespaces={ci,kube-system}",
        "--set=podDisruptionBudget.enabled=false",
        "--set=nodeSelector.pool=system",
        "--set=certificates.rotation=2",
        "--set=nodeAgent.enabled=false",
    ],
];

#[test]
fn chart_lints_strictly_with_default_and_other_values() {
    let Some(helm) = common::helm() else {
        return;
    };
    for values in VALUE_SETS {
        for kube in ["1.20.0", "1.30.0", "1.37.0"] {
            let mut args = values.to_vec();
            args.extend(["--kube-version", kube]);
            let output = chart::helm_run(&helm, "lint", &[&["--strict"], &args[..]].concat());
            assert!(
                output.status.success(),
                "helm lint --strict {args:?}:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

#[test]
fn chart_renders_and_validates_strictly_for_1_30_and_1_37() {
    let (Some(helm), Some(validator)) = (common::helm(), common::kubernetes_validate()) else {
        return;
    };
    for (i, values) in VALUE_SETS.iter().enumerate() {
        for kube in [common::OLDEST_KUBERNETES, "1.37.0"] {
            let objects = render(&helm, &[values, &["--kube-version", kube][..]].concat());
            // validate() checks the file against 1.30 and the validator's newest (1.37).
            common::validate(&validator, &format!("chart-{i}-{kube}"), &objects);
        }
    }
}

/// Each bad value is refused by `helm template` with the offending value named, before
/// anything reaches a cluster (the server would only fail at start-up, or never).
#[test]
fn chart_schema_rejects_bad_values() {
    let Some(helm) = common::helm() else {
        return;
    };
    let cases: [(&str, &str); 20] = [
        ("mode=everywhere", "/mode"),
        (
            "config.allowedHostPathPrefixes={mnt/scratch}",
            "allowedHostPathPrefixes",
        ),
        (
            "config.allowedHostPathPrefixes={/mnt/scratch/}",
            "allowedHostPathPrefixes",
        ),
        (
            "config.allowedHostPathPrefixes={/mnt/../etc}",
            "allowedHostPathPrefixes",
        ),
        ("config.protectedHostPaths={relative}", "protectedHostPaths"),
        (
            "config.allowedHostPathPrefix={/mnt/scratch}",
            "allowedHostPathPrefix",
        ),
        ("config.cleaner.mode=script", "/config/cleaner/mode"),
        ("webhook.failurePolicy=Never", "/webhook/failurePolicy"),
        ("webhook.timeoutSeconds=30", "/webhook/timeoutSeconds"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("replicaCount=0", "/replicaCount"),
        ("certificates.source=vault", "/certificates/source"),
        ("certificates.rotation=true", "/certificates/rotation"),
        ("reapr.enabled=true", "reapr"),
        (
            "nodeAgent.hostDirectory=run/agent",
            "/nodeAgent/hostDirectory",
        ),
        (
            "nodeAgent.hostDirectory=/run/agent/",
            "/nodeAgent/hostDirectory",
        ),
        (
            "nodeAgent.hostDirectory=/run/../agent",
            "/nodeAgent/hostDirectory",
        ),
        ("nodeAgent.hostDir=/run/agent", "hostDir"),
        // The values that moved to nodeDaemonSet (one pod for the agent and the reaper)
        // are refused where they were, not ignored.
        ("reaper.namespace.name=prestop-reaper", "namespace"),
        // Not the schema but the template: the reaper mounts exactly the prefixes.
        ("reaper.enabled=true", "config.allowedHostPathPrefixes"),
    ];
    for (value, named) in cases {
        let output = chart::helm_run(&helm, "template", &["--set", value]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "--set {value} was accepted");
        assert!(stderr.contains(named), "--set {value}: {stderr}");
    }
}

/// One reading of a prefix for the webhook, the reaper and the node agent (issue 32: the
/// chart took `/mnt/scratch/`, the webhook read it, the agent refused it and exited on
/// every node): the chart takes exactly the values that are already in the one normal
/// form (`prestop_clean::host_path::normalize`), which every component reads as written.
#[test]
fn chart_takes_only_prefixes_every_component_reads_alike() {
    let Some(helm) = common::helm() else {
        return;
    };
    for prefix in [
        "/mnt/scratch",
        "/mnt/scratch/",
        "//mnt/scratch",
        "/mnt/./scratch",
        "/mnt/../etc",
        "/mnt/..",
        "/mnt/...",
        "/mnt/.cache",
        "/mnt/..x",
        "/",
        "/a b",
    ] {
        let normal = prestop_clean::host_path::normalize(prefix).as_deref() == Some(prefix);
        let output = chart::helm_run(
            &helm,
            "template",
            &[
                "--set",
                &format!("config.allowedHostPathPrefixes={{{prefix}}}"),
            ],
        );
        assert_eq!(
            output.status.success(),
            normal,
            "{prefix:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The chart's default render and the kustomize overlay agree on every security-relevant
/// field (webhooks in full: rules, failurePolicy, matchConditions, namespace exclusions;
/// the pods' security contexts, arguments, probes, mounts and volumes, the node agent's
/// included; where the webhook's config sends the cleaners; RBAC; NetworkPolicies), for
/// both modes, with the reaper, and with the node agent off.
#[test]
fn chart_and_kustomize_agree_on_security_fields() {
    let (Some(helm), Some(kubectl)) = (common::helm(), common::kubectl()) else {
        return;
    };
    let reaper: &[&str] = &[
        "--set=reaper.enabled=true",
        "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
    ];
    let without_agent = "resources: [{deploy}/overlays/cluster-wide]\n\
                         components: [{deploy}/components/without-node-agent]\n";
    let pairs: [(&[&str], &str, Vec<Value>); 4] = [
        (
            &[],
            "cluster-wide",
            common::render(&kubectl, "cluster-wide"),
        ),
        (
            &["--set=mode=namespace-opt-in"],
            "namespace-opt-in",
            common::render(&kubectl, "namespace-opt-in"),
        ),
        (
            reaper,
            "cluster-wide-with-reaper",
            common::render(&kubectl, "cluster-wide-with-reaper"),
        ),
        (
            &["--set=nodeAgent.enabled=false"],
            "cluster-wide + components/without-node-agent",
            common::render_kustomization(&kubectl, without_agent),
        ),
    ];
    for (values, install, objects) in pairs {
        let mut from_chart = chart::security_view(&render(&helm, values));
        let mut from_kustomize = chart::security_view(&objects);
        if install == "cluster-wide-with-reaper" {
            // The one input the two cannot share: the chart's reaper needs the webhook's
            // prefixes, which the agent's --allow follows; the overlay's webhook ships with
            // none (only the reaper's dry-run config names /mnt/scratch), so its agent has
            // no --allow. tests/deploy_node_agent.rs checks --allow against the webhook's
            // prefixes in both.
            for view in [&mut from_chart, &mut from_kustomize] {
                chart::drop_node_agent_allow(view);
            }
        }
        if let Some(difference) = chart::first_difference(install, &from_chart, &from_kustomize) {
            panic!("chart {values:?} and {install} differ at {difference}");
        }
    }
}

/// The comparison above is not vacuous: a chart value that widens what the webhook sees
/// or what its pod may do shows up as a difference.
#[test]
fn chart_security_view_sees_a_widening() {
    let (Some(helm), Some(kubectl)) = (common::helm(), common::kubectl()) else {
        return;
    };
    let kustomize = chart::security_view(&common::render(&kubectl, "cluster-wide"));
    for value in [
        "webhook.failurePolicy=Ignore",
        "webhook.excludedNamespaces={team-a}",
        "mode=namespace-opt-in",
        "nodeAgent.enabled=false",
        "nodeAgent.hostDirectory=/var/run/elsewhere",
        "nodeDaemonSet.tolerations=null",
        "networkPolicy.enabled=false",
        "networkPolicy.apiServer.cidrs={10.0.0.0/8}",
        "networkPolicy.prometheus.namespace=everyone",
    ] {
        let view = chart::security_view(&render(&helm, &["--set", value]));
        assert!(
            chart::first_difference("", &view, &kustomize).is_some(),
            "--set {value} went unnoticed"
        );
    }
}

#[test]
fn chart_cert_manager_objects_match_the_component() {
    let (Some(helm), Some(kubectl)) = (common::helm(), common::kubectl()) else {
        return;
    };
    let from_chart = render(&helm, &["--set=certificates.source=cert-manager"]);
    let from_kustomize = common::render(&kubectl, "cert-manager");
    // cert-manager writes the TLS Secret; the chart writes only the seal key's.
    let secrets: Vec<&str> = chart::of_kind(&from_chart, "Secret")
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        secrets,
        ["prestop-injector-seal"],
        "cert-manager writes the TLS Secret"
    );
    for name in ["prestop-injector-ca", "prestop-injector-serving"] {
        assert_eq!(
            common::find(&from_chart, "Certificate", name)["spec"],
            common::find(&from_kustomize, "Certificate", name)["spec"],
            "{name}"
        );
    }
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert_eq!(
            one(&from_chart, kind)["metadata"]["annotations"],
            one(&from_kustomize, kind)["metadata"]["annotations"]
        );
        assert!(common::webhook(&from_chart, kind)["clientConfig"]
            .get("caBundle")
            .is_none());
    }
}

/// Kubernetes 1.20 (the real node's API server) gets nothing it does not know: no
/// matchConditions (1.28), no preStop sleep action (1.30; the server's own shutdown delay
/// covers both), PDB policy/v1beta1 (policy/v1 is 1.21), no DaemonSet maxSurge (1.22).
/// Helm 4 applies server-side, which rejects unknown fields instead of dropping them.
#[test]
fn chart_for_kubernetes_1_20_leaves_out_what_it_does_not_know() {
    let Some(helm) = common::helm() else {
        return;
    };
    let args = [
        "--kube-version=1.20.0",
        "--set=reaper.enabled=true",
        "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
    ];
    let objects = render(&helm, &args);
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(common::webhook(&objects, kind)
            .get("matchConditions")
            .is_none());
    }
    let container = &one(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert!(container.get("lifecycle").is_none(), "{container}");
    assert!(container["args"]
        .as_array()
        .unwrap()
        .contains(&json!("--shutdown-delay=10s")));
    assert_eq!(
        one(&objects, "PodDisruptionBudget")["apiVersion"],
        "policy/v1beta1"
    );
    let strategy = &one(&objects, "DaemonSet")["spec"]["updateStrategy"]["rollingUpdate"];
    assert!(strategy.get("maxSurge").is_none(), "{strategy}");
    // And 1.30 gets them all, as deploy/ has them.
    let objects = render(&helm, &["--kube-version=1.30.0"]);
    let container = &one(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["lifecycle"]["preStop"]["sleep"]["seconds"], 5);
    let mutating = common::webhook(&objects, "MutatingWebhookConfiguration");
    assert_eq!(mutating["matchConditions"].as_array().unwrap().len(), 2);
}

/// The rendered config loads, names the Deployment's own image as cleaner.image (the
/// kustomize install keeps those equal by hand; the chart derives one from the other),
/// allows no host path by default, and NOTES says that nothing is cleaned until set.
#[test]
fn chart_config_loads_and_allows_nothing_until_prefixes_are_set() {
    let Some(helm) = common::helm() else {
        return;
    };
    for (values, image, prefixes) in [
        (
            &[][..],
            prestop_injector::config::DEFAULT_CLEANER_IMAGE,
            json!([]),
        ),
        (
            &[
                "--set=image.repository=registry.example.com/p",
                "--set=image.tag=dev",
                "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
            ][..],
            "registry.example.com/p:dev",
            json!(["/mnt/scratch"]),
        ),
    ] {
        let objects = render(&helm, values);
        let deployment = one(&objects, "Deployment");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["image"],
            image
        );
        let text = one(&objects, "ConfigMap")["data"]["config.yaml"]
            .as_str()
            .unwrap();
        let config = prestop_injector::config::Config::from_yaml(text).expect("config loads");
        assert_eq!(config.cleaner.image, image);
        assert!(config.warnings().is_empty(), "{:?}", config.warnings());
        let parsed: Value = serde_yaml::from_str(text).unwrap();
        assert_eq!(parsed["allowedHostPathPrefixes"], prefixes, "{values:?}");
        let notes = chart::helm_run(&helm, "install", &[&["--dry-run=client"], values].concat());
        let notes = String::from_utf8_lossy(&notes.stdout);
        let warned =
            notes.contains("NOTHING WILL BE CLEANED until you set config.allowedHostPathPrefixes");
        assert_eq!(warned, prefixes == json!([]), "{values:?}: {notes}");
    }
}

/// The chart's Deployment arguments start the real server with the chart's config and
/// the certificate Helm generated (an RSA key from genSignedCert), and that certificate
/// verifies, for the Service's name, against the caBundle both webhooks carry.
#[test]
fn chart_certificates_and_arguments_serve_the_webhook() {
    use base64::Engine as _;
    let Some(helm) = common::helm() else {
        return;
    };
    let Some(openssl) = common::tool("openssl", "version", "apt-get install openssl") else {
        return;
    };
    let objects = render(&helm, &[]);
    let dir = tempfile::tempdir().unwrap();
    let secret = common::find(&objects, "Secret", "prestop-injector-tls");
    for file in ["tls.crt", "tls.key", "ca.crt"] {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(secret["data"][file].as_str().unwrap())
            .unwrap();
        std::fs::write(dir.path().join(file), bytes).unwrap();
    }
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let webhook = common::webhook(&objects, kind);
        assert_eq!(
            webhook["clientConfig"]["caBundle"],
            secret["data"]["ca.crt"]
        );
    }
    let config = dir.path().join("config.yaml");
    let text = one(&objects, "ConfigMap")["data"]["config.yaml"]
        .as_str()
        .unwrap();
    std::fs::write(&config, text).unwrap();
    let container = &one(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args = common::local_serve_args(container, dir.path(), &config);
    // The seal key the chart generated, in place of the test's: one key the server loads.
    let seal = common::find(&objects, "Secret", "prestop-injector-seal");
    let key = base64::engine::general_purpose::STANDARD
        .decode(seal["data"]["seal.key"].as_str().unwrap())
        .unwrap();
    let keys = prestop_injector::seal_keys::SealKeys::parse(std::str::from_utf8(&key).unwrap());
    assert_eq!(keys.map(|k| k.len()), Ok(1), "32 random bytes, one line");
    std::fs::write(dir.path().join("seal.key"), &key).unwrap();
    let local = |name: &str| dir.path().join(name).display().to_string();
    let server = common::start_server(&args);
    let service = format!("{}.{}.svc", chart::RELEASE, chart::NAMESPACE);
    let output = std::process::Command::new(openssl)
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{}", server.listen))
        .args(["-servername", &service, "-verify_hostname", &service])
        .args(["-verify_return_error", "-CAfile", &local("ca.crt")])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && report.contains("Verify return code: 0 (ok)"),
        "{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The seal key (docs/REAPER.md#the-seal): one generated key, 32 bytes, in the webhook's
/// Secret and in the reaper's copy in its own namespace, each mounted where its command
/// reads it. (Kept across upgrades by `lookup`, which only a cluster answers: e2e/install.)
#[test]
fn chart_seal_key_is_one_key_for_the_webhook_and_the_reaper() {
    use base64::Engine as _;
    let Some(helm) = common::helm() else {
        return;
    };
    let objects = render(
        &helm,
        &[
            "--set=reaper.enabled=true",
            "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
        ],
    );
    let webhook = common::find(&objects, "Secret", "prestop-injector-seal");
    let reaper = common::find(&objects, "Secret", "prestop-injector-reaper-seal");
    assert_eq!(webhook["metadata"]["namespace"], chart::NAMESPACE);
    assert_eq!(reaper["metadata"]["namespace"], "prestop-node");
    assert_eq!(webhook["data"], reaper["data"], "one key");
    let key = base64::engine::general_purpose::STANDARD
        .decode(webhook["data"]["seal.key"].as_str().unwrap())
        .unwrap();
    let keys = prestop_injector::seal_keys::SealKeys::parse(std::str::from_utf8(&key).unwrap());
    assert_eq!(keys.map(|k| k.len()), Ok(1));
    // `helm template` has no cluster to look the Secret up in: a new key each time.
    let again = render(&helm, &[]);
    assert_ne!(
        common::find(&again, "Secret", "prestop-injector-seal")["data"],
        webhook["data"]
    );
    for (kind, name, secret, flag) in [
        (
            "Deployment",
            "prestop-injector",
            "prestop-injector-seal",
            "--seal-key-file=",
        ),
        (
            "DaemonSet",
            "prestop-injector-node",
            "prestop-injector-reaper-seal",
            "--seal-key-file=",
        ),
    ] {
        let pod = &common::find(&objects, kind, name)["spec"]["template"]["spec"];
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["secret"]["secretName"] == secret)
            .unwrap_or_else(|| panic!("{kind} mounts {secret}"));
        let container = &pod["containers"][0];
        let mount = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == volume["name"])
            .unwrap();
        assert_eq!(mount["readOnly"], true, "{kind}");
        let file = format!("{}/seal.key", mount["mountPath"].as_str().unwrap());
        let args: Vec<&str> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            args.contains(&format!("{flag}{file}").as_str()),
            "{kind}: {args:?}"
        );
    }
}

/// The node agent and the webhook's config follow one value, `nodeAgent.hostDirectory`
/// (so they cannot drift), with the reaper or without it; its `--allow` are the webhook's
/// own prefixes, after its other flags (where kustomize's documented patch appends them).
/// Turning it off: tests/deploy_node_agent.rs.
#[test]
fn chart_node_agent_and_the_webhook_config_follow_one_value() {
    let Some(helm) = common::helm() else {
        return;
    };
    let config_of = |objects: &[Value]| {
        let text = serde_yaml::to_string(&chart::webhook_config(objects)).unwrap();
        prestop_injector::config::Config::from_yaml(&text).expect("config loads")
    };
    let prefixes = "--set=config.allowedHostPathPrefixes={/mnt/scratch,/data/tmp}";
    for (values, directory, allow) in [
        (&[][..], "/var/run/prestop-injector", &[][..]),
        (
            &[prefixes][..],
            "/var/run/prestop-injector",
            &["/mnt/scratch", "/data/tmp"][..],
        ),
        (
            &[prefixes, "--set=reaper.enabled=true"][..],
            "/var/run/prestop-injector",
            &["/mnt/scratch", "/data/tmp"][..],
        ),
        (
            &["--set=nodeAgent.hostDirectory=/run/prestop-agent"][..],
            "/run/prestop-agent",
            &[][..],
        ),
    ] {
        let objects = render(&helm, values);
        let config = config_of(&objects);
        assert_eq!(
            config.node_agent.map(|a| a.host_directory).as_deref(),
            Some(directory),
            "{values:?}"
        );
        let pod = &one(&objects, "DaemonSet")["spec"]["template"]["spec"];
        let agent = pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "node-agent")
            .expect("the node agent");
        let mut command = vec![
            "/usr/local/bin/prestop-injector",
            "node-agent",
            "--host-root",
            "/node",
            "--socket",
            "/run/prestop-injector/agent.sock",
            "--metrics-listen",
            "0.0.0.0:9103",
        ];
        for prefix in allow {
            command.extend(["--allow", prefix]);
        }
        assert_eq!(agent["command"], json!(command), "{values:?}");
        let socket = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "node-agent-socket")
            .expect("the socket's volume");
        assert_eq!(
            socket["hostPath"],
            json!({"path": directory, "type": "DirectoryOrCreate"}),
            "{values:?}"
        );
    }
}
