//! `prestop-injector mutate`: the webhook's decision, offline (docs/DESIGN.md#cli).
//!
//! Each manifest is sent to the same core as the server, as the API server would send it
//! for a dry-run CREATE; an `AdmissionReview` document is decided as given. The patch is
//! applied to a copy of the document, which also proves that it applies.
//!
//! Exit codes: 0 all allowed; 1 at least one document denied (the others are still
//! printed); 2 unreadable input or config, or an internal failure.

mod input;
mod output;
mod reach;
mod yaml;
mod yaml11;

use crate::admission::{self, GroupVersionKind, Operation, Outcome, Request, Reviewed};
use crate::config::Config;
use crate::kube_version::KubeVersion;
use crate::mutation::Endpoint;
use anyhow::{anyhow, bail, Context, Result};
use input::{Body, Document};
use output::Decided;
pub use output::Format;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each manifest is decided as a dry-run CREATE sent to /mutate (or /mutate/auto with --auto); \
an AdmissionReview document is decided as given. Warnings and denials go to stderr.

Exit status: 0 all allowed, 1 at least one document denied (the others are still printed), \
2 unreadable input or config, or an internal error.")]
pub struct MutateArgs {
    /// Manifests to read (multi-document YAML, JSON, a List or an AdmissionReview); `-` is stdin.
    #[arg(
        short = 'f',
        long = "filename",
        visible_alias = "file",
        value_name = "FILE",
        default_value = "-"
    )]
    pub file: String,
    /// Decide as `/mutate/auto`: every supported object is in scope and cleanup defaults to `auto`.
    #[arg(long)]
    pub auto: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
    /// Configuration file (YAML, as for `serve`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Decide as for a cluster of this Kubernetes version (e.g. 1.28: no sidecar mode,
    /// no preStop sleep action); overrides the config's kubernetesVersion. Without either,
    /// every feature is available.
    #[arg(long, value_name = "VERSION")]
    pub kubernetes_version: Option<KubeVersion>,
}

pub fn run(args: MutateArgs) -> Result<ExitCode> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(version) = args.kubernetes_version {
        config.kubernetes_version = Some(version);
    }
    for warning in config.warnings() {
        eprintln!("Warning: config: {warning}");
    }
    let (text, source) = read_input(&args.file)?;
    let input = input::read(&text, &source)?;
    let endpoint = if args.auto {
        Endpoint::MutateAuto
    } else {
        Endpoint::Mutate
    };
    let mut decided = Vec::with_capacity(input.documents.len());
    let mut denied = false;
    let mut stderr = std::io::stderr().lock();
    for warning in &input.warnings {
        writeln!(stderr, "Warning: {warning}")?;
    }
    for (index, document) in input.documents.into_iter().enumerate() {
        let reviewed = decide(document, index + 1, endpoint, &config)?;
        let (document, was_denied) = report(&reviewed, &mut stderr)?;
        denied |= was_denied;
        decided.push(document);
    }
    let rendered = output::render(args.output, &decided)?;
    if let Err(error) = std::io::stdout().lock().write_all(rendered.as_bytes()) {
        // `mutate ... | head` closing the pipe early is not a failure of ours.
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(error).context("cannot write to stdout");
        }
    }
    Ok(if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn read_input(file: &str) -> Result<(String, String)> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read manifests from stdin (is it UTF-8 text?)")?;
        return Ok((text, "stdin".to_owned()));
    }
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
    Ok((text, file.to_owned()))
}

/// A decision on one document, with the label to blame if something is wrong with it.
struct Pending {
    label: String,
    reviewed: Reviewed,
}

fn decide(
    document: Document,
    number: usize,
    endpoint: Endpoint,
    config: &Config,
) -> Result<Pending> {
    let Document { label, body } = document;
    let reviewed = match body {
        Body::Manifest(object) => {
            let request = create_request(object, number).with_context(|| label.clone())?;
            admission::respond(request, endpoint, config)
        }
        Body::Review(review) => {
            let bytes = serde_json::to_vec(&review)?;
            let request = admission::parse_request(&bytes).map_err(|e| anyhow!("{label}: {e}"))?;
            admission::respond(request, endpoint, config)
        }
    };
    if reviewed.outcome == Outcome::Error {
        let message = reviewed
            .decision
            .denial
            .as_ref()
            .map(|d| d.message.as_str());
        bail!(
            "{label}: internal error: {}; please report it with this document",
            message.unwrap_or("the mutation core failed")
        );
    }
    Ok(Pending { label, reviewed })
}

/// The request the API server would send for a dry-run CREATE of `object`.
fn create_request(object: Value, number: usize) -> Result<Request> {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let api_version = text("/apiVersion").unwrap_or_default();
    let (group, version) = match api_version.split_once('/') {
        None => (String::new(), api_version.clone()),
        Some((group, version))
            if !group.is_empty() && !version.is_empty() && !version.contains('/') =>
        {
            (group.to_owned(), version.to_owned())
        }
        Some(_) => {
            bail!("apiVersion {api_version:?} is not of the form \"group/version\" or \"version\"")
        }
    };
    Ok(Request {
        uid: format!("mutate-cli-{number}"),
        kind: GroupVersionKind {
            group,
            version,
            kind: text("/kind").unwrap_or_default(),
        },
        sub_resource: None,
        name: text("/metadata/name"),
        namespace: text("/metadata/namespace"),
        operation: Operation::Create,
        // The core reads its own model (`crate::json`); the CLI's documents are serde_json's.
        object: Some(object.into()),
        old_object: None,
        dry_run: Some(true),
        options: Some(
            crate::json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "dryRun": ["All"]}),
        ),
    })
}

/// Writes warnings and the denial to stderr and applies the patch. Returns the rendered
/// unit and whether it was denied.
fn report(pending: &Pending, stderr: &mut impl Write) -> Result<(Decided, bool)> {
    let Pending { label, reviewed } = pending;
    let request = &reviewed.request;
    let object: Option<Value> = request
        .object
        .as_ref()
        .filter(|object| !object.is_null())
        .map(|object| object.clone().into());
    let object = object.as_ref();
    let name = request
        .name
        .clone()
        .or_else(|| object.and_then(|o| o.pointer("/metadata/name")?.as_str().map(str::to_owned)))
        .or_else(|| {
            object.and_then(|o| {
                o.pointer("/metadata/generateName")?
                    .as_str()
                    .map(|g| format!("{g}*"))
            })
        })
        .unwrap_or_else(|| "<no name>".to_owned());
    let kind = &request.kind.kind;
    let decision = &reviewed.decision;
    for warning in decision.warnings.iter().chain(&reach::notes(request)) {
        writeln!(stderr, "Warning: {kind}/{name}: {warning}")?;
    }
    let path = match &request.namespace {
        Some(namespace) if !namespace.is_empty() => format!("{kind}/{namespace}/{name}"),
        _ => format!("{kind}/{name}"),
    };
    if let Some(denial) = &decision.denial {
        writeln!(stderr, "Error: {kind}/{name} denied: {}", denial.message)?;
        let decided = Decided {
            path,
            before: object.cloned(),
            after: None,
            patch: Vec::new(),
        };
        return Ok((decided, true));
    }
    let operations = decision
        .patch
        .as_ref()
        .map(|patch| patch.to_json_patch().0)
        .unwrap_or_default();
    let after = match object {
        Some(object) => {
            let mut after = object.clone();
            json_patch::patch(&mut after, &operations).map_err(|e| {
                anyhow!("{label}: internal error: the patch for {kind}/{name} does not apply ({e}); please report it with this document")
            })?;
            Some(after)
        }
        None if operations.is_empty() => None,
        None => bail!(
            "{label}: internal error: a patch was produced for {kind}/{name}, which has no object"
        ),
    };
    let decided = Decided {
        path,
        before: object.cloned(),
        after,
        patch: operations,
    };
    Ok((decided, false))
}
