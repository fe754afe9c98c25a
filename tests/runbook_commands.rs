//! The runbooks' commands name what the installs create (issue 39: `SealMismatches`
//! named `prestop-reaper/prestop-reaper-seal`, `NodeAgentBusy` grepped `-o wide` for a
//! uid it does not print). Every `kubectl` and `helm` command of docs/RUNBOOKS.md's `sh`
//! blocks is read as the shell would split it and checked against the installs as
//! rendered (`kubectl kustomize` of cluster-wide-with-reaper plus the monitoring
//! component, `helm template` of the release prestop-injector with the reaper and the
//! monitoring objects; the cert-manager variants for commands marked `# cert-manager`):
//! its namespace holds objects of the install, each object it names exists there (a
//! Secret may be one the pods mount), each label selector selects something, each
//! container is a container of the pods there, each service account exists (and is
//! granted what `auth can-i` asks), each flag is one the local kubectl or helm accepts,
//! and a pipeline that greps for a uid prints uids. A line `# kustomize` or `# helm`
//! before a command checks it against that install only.
//!
//! A static check: running the commands against the e2e clusters is a later step.
//! Without kubectl or helm the test skips, or fails under PRESTOP_REQUIRE_TOOLS=1.

#[path = "support/chart.rs"]
mod chart;
#[path = "support/deploy.rs"]
mod common;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Which installs a command is for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tag {
    Both,
    Kustomize,
    Helm,
    CertManager,
}

#[derive(Debug)]
struct Runbook {
    section: String,
    tag: Tag,
    line: String,
}

/// Every command line of the `sh` blocks, with its section and tag.
fn commands(markdown: &str) -> Vec<Runbook> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut in_block = false;
    let mut tag = Tag::Both;
    let mut pending = String::new();
    for line in markdown.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.to_owned();
        }
        if line.starts_with("```") {
            assert!(
                in_block || line == "```sh" || line == "```",
                "{section}: a block of another language ({line}); commands go in ```sh"
            );
            in_block = line == "```sh" && !in_block;
            tag = Tag::Both;
            continue;
        }
        if !in_block {
            continue;
        }
        let trimmed = line.trim();
        if let Some(comment) = trimmed.strip_prefix('#') {
            tag = match comment.trim() {
                "kustomize" => Tag::Kustomize,
                "helm" => Tag::Helm,
                "cert-manager" => Tag::CertManager,
                other => panic!("{section}: a comment in a command block: {other}"),
            };
            continue;
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some(start) = trimmed.strip_suffix('\\') {
            pending.push_str(start);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        out.push(Runbook {
            section: section.clone(),
            tag,
            line: std::mem::take(&mut pending),
        });
        tag = Tag::Both;
    }
    out
}

/// The line's pipeline segments, each split into words as the shell would (quotes and
/// backslashes), `|` outside quotes separating them.
fn pipeline(line: &str) -> Vec<Vec<String>> {
    let mut segments = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (None, ' ') => {
                if in_word {
                    segments.last_mut().unwrap().push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, '|') => {
                if in_word {
                    segments.last_mut().unwrap().push(std::mem::take(&mut word));
                    in_word = false;
                }
                segments.push(Vec::new());
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    assert!(quote.is_none(), "unbalanced quotes: {line}");
    if in_word {
        segments.last_mut().unwrap().push(word);
    }
    segments
}

/// An install as rendered.
struct Install {
    what: &'static str,
    objects: Vec<Value>,
    /// `helm` only: the release, its namespace, and the chart.
    helm: Option<(&'static str, &'static str)>,
}

impl Install {
    fn in_namespace<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a Value> + 'a {
        let namespace = namespace.to_owned();
        self.objects
            .iter()
            .filter(move |o| o["metadata"]["namespace"].as_str() == Some(namespace.as_str()))
    }

    /// The pod templates of the workloads in `namespace`.
    fn pod_templates<'a>(&'a self, namespace: &str) -> Vec<&'a Value> {
        self.in_namespace(namespace)
            .filter(|o| {
                ["Deployment", "DaemonSet", "StatefulSet", "Job"]
                    .contains(&o["kind"].as_str().unwrap_or(""))
            })
            .map(|o| &o["spec"]["template"])
            .collect()
    }

    fn named<'a>(&'a self, kind: &str, namespace: Option<&str>, name: &str) -> Option<&'a Value> {
        self.objects.iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str() == Some(ns))
        })
    }
}

fn labels(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// `k=v,k2=v2` (equality selectors only: the runbooks need no more).
fn selects(selector: &str, object: &Value) -> bool {
    let have = labels(object);
    selector.split(',').all(|term| {
        let (key, value) = term
            .split_once('=')
            .unwrap_or_else(|| panic!("only k=v selectors are checked: {selector}"));
        have.get(key).map(String::as_str) == Some(value)
    })
}

fn is_placeholder(word: &str) -> bool {
    word.contains('<') && word.contains('>')
}

/// A kubectl resource type's kind.
fn kind_of(resource: &str) -> Option<&'static str> {
    Some(match resource {
        "deployment" | "deployments" | "deploy" => "Deployment",
        "daemonset" | "daemonsets" | "ds" => "DaemonSet",
        "pod" | "pods" | "po" => "Pod",
        "service" | "services" | "svc" => "Service",
        // A Service's Endpoints have its name.
        "endpoints" | "ep" => "Service",
        "secret" | "secrets" => "Secret",
        "servicemonitor" | "servicemonitors" => "ServiceMonitor",
        "certificate" | "certificates" => "Certificate",
        "mutatingwebhookconfiguration" | "mutatingwebhookconfigurations" => {
            "MutatingWebhookConfiguration"
        }
        "events" | "event" => "Event",
        _ => return None,
    })
}

/// Flags a command accepts, from its `--help` (and `kubectl options`), each with
/// whether it takes a value.
struct Flags(BTreeMap<String, bool>);

impl Flags {
    fn kubectl(kubectl: &Path, subcommand: &[String]) -> Flags {
        let mut flags = BTreeMap::new();
        for args in [
            vec!["options".to_owned()],
            [subcommand, &["--help".to_owned()]].concat(),
        ] {
            let output = Command::new(kubectl).args(&args).output().unwrap();
            assert!(output.status.success(), "kubectl {args:?}");
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                let line = line.trim();
                if !line.starts_with('-') || !line.ends_with(':') {
                    continue;
                }
                let Some((names, default)) = line.trim_end_matches(':').split_once('=') else {
                    continue;
                };
                let takes_value = !matches!(default, "false" | "true");
                for name in names.split(", ") {
                    flags.insert(name.to_owned(), takes_value);
                }
            }
        }
        Flags(flags)
    }

    fn helm(helm: &Path, subcommand: &str) -> Flags {
        let output = Command::new(helm)
            .args([subcommand, "--help"])
            .output()
            .unwrap();
        assert!(output.status.success(), "helm {subcommand} --help");
        let mut flags = BTreeMap::new();
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if !words.first().is_some_and(|w| w.starts_with('-')) {
                continue;
            }
            let mut names = Vec::new();
            let mut rest = words.iter();
            for word in rest.by_ref() {
                let name = word.trim_end_matches(',');
                if name.starts_with('-') {
                    names.push(name.to_owned());
                    if !word.ends_with(',') {
                        break;
                    }
                }
            }
            // A type word after the name: the flag takes a value.
            let takes_value = rest.next().is_some_and(|w| {
                [
                    "string",
                    "stringArray",
                    "strings",
                    "duration",
                    "int",
                    "uint",
                    "float",
                ]
                .contains(w)
            });
            for name in names {
                flags.insert(name, takes_value);
            }
        }
        Flags(flags)
    }

    /// Splits `words` into flags (name, value) and positional words.
    fn parse(&self, words: &[String], what: &str) -> (Vec<(String, Option<String>)>, Vec<String>) {
        let mut flags = Vec::new();
        let mut positional = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            if word.starts_with('-') && word.len() > 1 {
                let (name, inline) = match word.split_once('=') {
                    Some((name, value)) => (name.to_owned(), Some(value.to_owned())),
                    None => (word.clone(), None),
                };
                let takes_value = *self
                    .0
                    .get(&name)
                    .unwrap_or_else(|| panic!("{what}: no flag {name}"));
                let value = match (takes_value, inline) {
                    (_, Some(value)) => Some(value),
                    (true, None) => {
                        i += 1;
                        Some(
                            words
                                .get(i)
                                .cloned()
                                .unwrap_or_else(|| panic!("{what}: {name} needs a value")),
                        )
                    }
                    (false, None) => None,
                };
                flags.push((name, value));
            } else {
                positional.push(word.clone());
            }
            i += 1;
        }
        (flags, positional)
    }
}

struct Checker<'a> {
    kubectl: &'a Path,
    helm: &'a Path,
    kubectl_flags: BTreeMap<Vec<String>, Flags>,
    events: String,
}

impl Checker<'_> {
    fn check(&mut self, runbook: &Runbook, install: &Install) -> usize {
        let what = format!("{} ({}): `{}`", runbook.section, install.what, runbook.line);
        let segments = pipeline(&runbook.line);
        let mut checked = 0;
        for (i, words) in segments.iter().enumerate() {
            match words.first().map(String::as_str) {
                Some("kubectl") => {
                    let later = &segments[i + 1..];
                    self.kubectl(&words[1..], later, install, &what);
                    checked += 1;
                }
                Some("helm") => {
                    self.helm(&words[1..], install, &what);
                    checked += 1;
                }
                _ => {}
            }
        }
        checked
    }

    fn kubectl(&mut self, words: &[String], later: &[Vec<String>], install: &Install, what: &str) {
        // The subcommand: after the global flags (`-n NAMESPACE`), two words for
        // `auth can-i` and `rollout restart`.
        let kubectl = self.kubectl;
        let global = self
            .kubectl_flags
            .entry(Vec::new())
            .or_insert_with(|| Flags::kubectl(kubectl, &[]));
        let mut first = 0;
        while first < words.len() && words[first].starts_with('-') {
            let takes_value = global.0.get(&words[first]).copied().unwrap_or(false);
            first += if takes_value { 2 } else { 1 };
        }
        assert!(first < words.len(), "{what}: no subcommand");
        // Flags before the subcommand are global (-n NAMESPACE).
        let mut rest: Vec<String> = words[..first].to_vec();
        let depth = if ["auth", "rollout", "top"].contains(&words[first].as_str()) {
            2
        } else {
            1
        };
        let subcommand: Vec<String> = words[first..first + depth].to_vec();
        rest.extend(words[first + depth..].iter().cloned());
        let flags = self
            .kubectl_flags
            .entry(subcommand.clone())
            .or_insert_with(|| Flags::kubectl(kubectl, &subcommand));
        let (flags, mut positional) = flags.parse(&rest, what);
        if subcommand[0] == "top" {
            // `top pod NAME`: the resource is the subcommand's second word.
            positional.insert(0, subcommand[1].clone());
        }
        let flag = |names: &[&str]| {
            flags
                .iter()
                .find(|(n, _)| names.contains(&n.as_str()))
                .and_then(|(_, v)| v.clone())
        };
        let namespace = flag(&["-n", "--namespace"]);
        if let Some(namespace) = &namespace {
            assert!(
                install.in_namespace(namespace).next().is_some(),
                "{what}: the install has nothing in namespace {namespace}"
            );
        }
        let selector = flag(&["-l", "--selector"]);
        let container = flag(&["-c", "--container"]);
        for (name, value) in &flags {
            if name == "--field-selector" {
                for term in value.as_deref().unwrap_or("").split(',') {
                    if let Some(reason) = term.strip_prefix("reason=Scratch") {
                        assert!(
                            self.events.contains(&format!("\"Scratch{reason}\"")),
                            "{what}: the reaper records no Event reason Scratch{reason}"
                        );
                    }
                }
            }
            if name == "--as" {
                let account = value.as_deref().unwrap();
                self.service_account(account, &positional, install, what);
            }
        }
        // Greps for a uid need uids in what kubectl prints.
        if later.iter().flatten().any(|w| w.contains("<uid>")) {
            let output = flag(&["-o", "--output"]).unwrap_or_default();
            assert!(
                output.contains(".metadata.uid") || output == "json" || output == "yaml",
                "{what}: greps for a uid, but `-o {output}` prints none"
            );
        }
        let ns = namespace.as_deref();
        match subcommand[0].as_str() {
            "get" | "describe" | "delete" | "top" | "patch" => {
                let Some(resources) = positional.first() else {
                    panic!("{what}: no resource");
                };
                if let Some((resource, name)) = resources.split_once('/') {
                    self.object(resource, ns, name, install, what);
                    return;
                }
                let kinds: Vec<&str> = resources
                    .split(',')
                    .map(|r| kind_of(r).unwrap_or_else(|| panic!("{what}: unknown resource {r}")))
                    .collect();
                for name in &positional[1..] {
                    for resource in resources.split(',') {
                        self.object(resource, ns, name, install, what);
                    }
                }
                if let Some(selector) = &selector {
                    let ns = ns.unwrap_or_else(|| panic!("{what}: a selector without -n"));
                    for kind in &kinds {
                        self.selected(kind, ns, selector, install, what);
                    }
                }
                if subcommand[0] == "patch" {
                    let patch = flag(&["-p", "--patch"]).unwrap_or_default();
                    let object = install
                        .named(kinds[0], ns, &positional[1])
                        .unwrap_or_else(|| panic!("{what}: nothing to patch"));
                    let ops: Value = serde_json::from_str(&patch).expect("a JSON patch");
                    for op in ops.as_array().unwrap() {
                        let path = op["path"].as_str().unwrap();
                        assert!(
                            !object.pointer(path).unwrap_or(&Value::Null).is_null(),
                            "{what}: {path} is not in the object"
                        );
                    }
                }
            }
            "logs" => {
                let templates: Vec<&Value> = match (positional.first(), &selector) {
                    (Some(target), _) if !is_placeholder(target) => {
                        let (resource, name) = target
                            .split_once('/')
                            .unwrap_or_else(|| panic!("{what}: logs of {target}"));
                        let object = self.object(resource, ns, name, install, what);
                        vec![&object["spec"]["template"]]
                    }
                    (_, Some(selector)) => {
                        let ns = ns.unwrap();
                        let templates: Vec<&Value> = install
                            .pod_templates(ns)
                            .into_iter()
                            .filter(|t| selects(selector, t))
                            .collect();
                        assert!(
                            !templates.is_empty(),
                            "{what}: {selector} selects no pods in {ns}"
                        );
                        templates
                    }
                    _ => install
                        .pod_templates(ns.unwrap_or_else(|| panic!("{what}: logs without -n"))),
                };
                if let Some(container) = container {
                    assert!(
                        templates.iter().any(|t| t["spec"]["containers"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|c| c["name"] == container.as_str())),
                        "{what}: no container {container} in those pods"
                    );
                }
            }
            "rollout" => {
                let target = positional
                    .first()
                    .unwrap_or_else(|| panic!("{what}: no target"));
                let (resource, name) = target.split_once('/').unwrap();
                self.object(resource, ns, name, install, what);
            }
            "auth" => {}
            other => panic!("{what}: kubectl {other} is not checked yet: teach this test"),
        }
    }

    /// The object `resource/name` in `namespace` (placeholders pass).
    fn object<'i>(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        install: &'i Install,
        what: &str,
    ) -> &'i Value {
        static ANY: Value = Value::Null;
        let kind =
            kind_of(resource).unwrap_or_else(|| panic!("{what}: unknown resource {resource}"));
        if is_placeholder(name) {
            return &ANY;
        }
        if let Some(object) = install.named(kind, namespace, name) {
            return object;
        }
        // A Secret the installs do not create (the serving and seal keys of the
        // kustomize install) is one their pods mount.
        if kind == "Secret" {
            let ns = namespace.unwrap();
            let mounted = install.pod_templates(ns).iter().any(|t| {
                t["spec"]["volumes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|v| v["secret"]["secretName"] == name)
            });
            assert!(
                mounted,
                "{what}: no Secret {name} in {ns}, nor mounted by a pod there"
            );
            return &ANY;
        }
        panic!("{what}: no {kind} {name} in {namespace:?}");
    }

    fn selected(&self, kind: &str, namespace: &str, selector: &str, install: &Install, what: &str) {
        let found = if kind == "Pod" {
            install
                .pod_templates(namespace)
                .into_iter()
                .any(|t| selects(selector, t))
        } else {
            install
                .in_namespace(namespace)
                .any(|o| o["kind"] == kind && selects(selector, o))
        };
        assert!(
            found,
            "{what}: -l {selector} selects no {kind} in {namespace}"
        );
    }

    /// `--as=system:serviceaccount:NS:NAME` exists, and for `auth can-i VERB RESOURCE`
    /// a ClusterRole bound to it grants that verb on that resource.
    fn service_account(&self, account: &str, positional: &[String], install: &Install, what: &str) {
        let rest = account
            .strip_prefix("system:serviceaccount:")
            .unwrap_or_else(|| panic!("{what}: --as {account}"));
        let (ns, name) = rest.split_once(':').unwrap();
        assert!(
            install.named("ServiceAccount", Some(ns), name).is_some(),
            "{what}: no ServiceAccount {ns}/{name}"
        );
        let [verb, resource] = positional else {
            return;
        };
        let granted = install
            .objects
            .iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding")
            .filter(|b| {
                b["subjects"].as_array().into_iter().flatten().any(|s| {
                    s["kind"] == "ServiceAccount" && s["name"] == name && s["namespace"] == ns
                })
            })
            .filter_map(|b| {
                install.named("ClusterRole", None, b["roleRef"]["name"].as_str().unwrap())
            })
            .flat_map(|role| role["rules"].as_array().cloned().unwrap_or_default())
            .any(|rule| {
                let has = |key: &str, want: &str| {
                    rule[key]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|v| v == want || v == "*")
                };
                has("verbs", verb) && has("resources", resource)
            });
        assert!(granted, "{what}: {ns}/{name} may not {verb} {resource}");
    }

    fn helm(&self, words: &[String], install: &Install, what: &str) {
        let (release, namespace) = install.helm.unwrap_or_else(|| {
            panic!("{what}: a helm command checked against kustomize: mark it # helm")
        });
        let subcommand = &words[0];
        assert_eq!(
            subcommand, "upgrade",
            "{what}: only helm upgrade is checked yet"
        );
        let flags = Flags::helm(self.helm, subcommand);
        let (flags, positional) = flags.parse(&words[1..], what);
        assert_eq!(
            positional.first().map(String::as_str),
            Some(release),
            "{what}: the release"
        );
        let chart = positional
            .get(1)
            .unwrap_or_else(|| panic!("{what}: no chart"));
        assert_eq!(
            common::repo_root().join(chart),
            chart::chart_dir(),
            "{what}: the chart"
        );
        let ns = flags
            .iter()
            .find(|(n, _)| n == "-n" || n == "--namespace")
            .and_then(|(_, v)| v.clone());
        assert_eq!(ns.as_deref(), Some(namespace), "{what}: the namespace");
        // The values it sets render (the chart's schema accepts them).
        let sets: Vec<String> = flags
            .iter()
            .filter(|(n, _)| n == "--set" || n == "--set-string")
            .map(|(n, v)| format!("{n}={}", v.as_deref().unwrap()))
            .collect();
        let args: Vec<&str> = sets.iter().map(String::as_str).collect();
        chart::render(self.helm, &args);
    }
}

fn kustomize(kubectl: &Path, overlay: &str, components: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let up = dir.path().components().count() - 1;
    let deploy = format!(
        "{}{}",
        "../".repeat(up),
        common::deploy_dir()
            .display()
            .to_string()
            .trim_start_matches('/')
    );
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources:\n  - {deploy}/overlays/{overlay}\n"
    );
    if !components.is_empty() {
        text.push_str("components:\n");
        for component in components {
            text.push_str(&format!("  - {deploy}/components/{component}\n"));
        }
    }
    std::fs::write(dir.path().join("kustomization.yaml"), text).unwrap();
    common::render_dir(kubectl, dir.path())
}

const HELM_ON: [&str; 4] = [
    "--set=reaper.enabled=true",
    "--set=config.allowedHostPathPrefixes={/mnt/scratch}",
    "--set=serviceMonitor.enabled=true",
    "--set=prometheusRule.enabled=true",
];

fn runbooks() -> String {
    std::fs::read_to_string(common::repo_root().join("docs/RUNBOOKS.md")).unwrap()
}

#[test]
fn every_runbook_command_names_what_the_installs_create() {
    let (Some(kubectl), Some(helm)) = (common::kubectl(), common::helm()) else {
        return;
    };
    let installs = [
        Install {
            what: "kustomize",
            objects: kustomize(&kubectl, "cluster-wide-with-reaper", &["monitoring"]),
            helm: None,
        },
        Install {
            what: "helm",
            objects: chart::render(&helm, &HELM_ON),
            helm: Some((chart::RELEASE, chart::NAMESPACE)),
        },
        Install {
            what: "kustomize cert-manager",
            objects: kustomize(&kubectl, "cert-manager", &["reaper", "monitoring"]),
            helm: None,
        },
        Install {
            what: "helm cert-manager",
            objects: chart::render(
                &helm,
                &[&HELM_ON[..], &["--set=certificates.source=cert-manager"]].concat(),
            ),
            helm: Some((chart::RELEASE, chart::NAMESPACE)),
        },
    ];
    let mut checker = Checker {
        kubectl: &kubectl,
        helm: &helm,
        kubectl_flags: BTreeMap::new(),
        events: std::fs::read_to_string(common::repo_root().join("src/reaper/events.rs")).unwrap(),
    };
    let markdown = runbooks();
    let commands = commands(&markdown);
    let mut sections_with_commands = BTreeSet::new();
    let mut checked = 0;
    for runbook in &commands {
        let targets: &[usize] = match runbook.tag {
            Tag::Both => &[0, 1],
            Tag::Kustomize => &[0],
            Tag::Helm => &[1],
            Tag::CertManager => &[2, 3],
        };
        for &i in targets {
            let n = checker.check(runbook, &installs[i]);
            assert!(
                n > 0,
                "{}: `{}` runs neither kubectl nor helm",
                runbook.section,
                runbook.line
            );
            checked += n;
        }
        sections_with_commands.insert(runbook.section.clone());
    }
    assert!(checked >= 60, "only {checked} commands checked");
    // Every alert's section that tells the on-call to look at something has commands.
    for heading in markdown
        .lines()
        .filter_map(|l| l.strip_prefix("## Prestop"))
    {
        let section = format!("Prestop{heading}");
        if section == "PrestopInjectorWebhookErrors" {
            continue; // Its checks are PromQL.
        }
        assert!(
            sections_with_commands.contains(&section),
            "{section} has no command block"
        );
    }
}

/// The checks catch what issue 39 found: the reaper's Secret in a namespace no install
/// uses, a uid grepped out of `-o wide`, a container and a label no pod has.
#[test]
fn the_checks_catch_the_names_issue_39_found() {
    let (Some(kubectl), Some(helm)) = (common::kubectl(), common::helm()) else {
        return;
    };
    let install = Install {
        what: "kustomize",
        objects: kustomize(&kubectl, "cluster-wide-with-reaper", &["monitoring"]),
        helm: None,
    };
    for (wrong, why) in [
        (
            "kubectl -n prestop-reaper get secret prestop-reaper-seal",
            "nothing in namespace prestop-reaper",
        ),
        (
            "kubectl -n prestop-node get secret prestop-injector-reaper-seal",
            "no Secret prestop-injector-reaper-seal",
        ),
        ("kubectl get pods -A -o wide | grep <uid>", "prints none"),
        (
            "kubectl -n prestop-node logs <pod> -c cleaner",
            "no container cleaner",
        ),
        (
            "kubectl -n prestop-node get pods -l app.kubernetes.io/name=prestop-reaper",
            "selects no Pod",
        ),
        (
            "kubectl -n prestop-system logs deployment/prestop-injector --tail-lines=5",
            "no flag --tail-lines",
        ),
        (
            "kubectl -n default get events --field-selector reason=ScratchDirectoryKept",
            "no Event reason ScratchDirectoryKept",
        ),
        (
            "kubectl auth can-i watch pods --as=system:serviceaccount:prestop-reaper:prestop-reaper",
            "no ServiceAccount prestop-reaper/prestop-reaper",
        ),
        (
            "kubectl auth can-i delete pods --as=system:serviceaccount:prestop-node:prestop-reaper",
            "may not delete pods",
        ),
    ] {
        let runbook = Runbook {
            section: "self-test".to_owned(),
            tag: Tag::Both,
            line: wrong.to_owned(),
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut checker = Checker {
                kubectl: &kubectl,
                helm: &helm,
                kubectl_flags: BTreeMap::new(),
                events: std::fs::read_to_string(common::repo_root().join("src/reaper/events.rs"))
                    .unwrap(),
            };
            checker.check(&runbook, &install)
        }));
        let message = match outcome {
            Ok(_) => panic!("`{wrong}` passed the checks"),
            Err(payload) => payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default(),
        };
        assert!(message.contains(why), "`{wrong}`: {message}");
    }
}

/// WebhookDown's emergency lever says what it silences and what to watch instead.
#[test]
fn the_ignore_lever_says_what_it_silences() {
    let markdown = runbooks();
    let start = markdown.find("## PrestopInjectorWebhookDown").unwrap();
    let end = markdown[start + 3..].find("\n## ").unwrap() + start;
    let section = &markdown[start..end];
    for needed in [
        "failurePolicy: Ignore",
        r#"failure_policy="Fail""#,
        r#"failure_policy="Ignore""#,
        "apiserver_admission_webhook_fail_open_count",
        "Switch back to `Fail`",
    ] {
        assert!(
            section.contains(needed),
            "WebhookDown's runbook lacks {needed}"
        );
    }
}

#[test]
fn the_shell_split_is_the_shells() {
    assert_eq!(
        pipeline(r#"kubectl -o jsonpath='{.data.seal\.key}' | base64 -d | grep "a b""#),
        vec![
            vec!["kubectl", "-o", r"jsonpath={.data.seal\.key}"],
            vec!["base64", "-d"],
            vec!["grep", "a b"],
        ]
    );
}
