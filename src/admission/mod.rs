//! `admission.k8s.io/v1` AdmissionReview on the wire, and the one function both the
//! server and the offline CLI call: bytes of a review in, bytes of a review out.
//!
//! We keep our own small types instead of kube-core's: its `AdmissionRequest<T>` needs a
//! typed `ObjectMeta` (which drops metadata fields our types don't know) and its response
//! serializes the patch as an array of numbers instead of the base64 string the API
//! server expects (kube-rs issue 1781).

use crate::config::Config;
use crate::mutation::{self, Decision, Endpoint};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

pub const API_VERSION: &str = "admission.k8s.io/v1";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(borrow)]
    request: Option<RequestIn<'a>>,
}

/// A request as read off the wire: the objects stay raw until we know they are needed,
/// so that the common no-op answers never build a `Value` of the whole object.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn<'a> {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    kind: GroupVersionKind,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    operation: Operation,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    old_object: Option<&'a RawValue>,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(borrow, default)]
    options: Option<&'a RawValue>,
}

/// Our annotation prefix without the `/`, which JSON may escape. The API server's encoder
/// escapes neither letters, `-` nor `.`, so an object whose text lacks it carries none of
/// our annotations.
const ANNOTATION_MARK: &str = "prestop-injector.io";

impl RequestIn<'_> {
    /// Builds the core's request, parsing only what the endpoint can look at.
    fn into_request(self, endpoint: Endpoint) -> Result<Request, BadReview> {
        let parse = |raw: Option<&RawValue>| -> Result<Option<Value>, BadReview> {
            raw.map(|raw| serde_json::from_str(raw.get()))
                .transpose()
                .map_err(|e| BadReview(format!("request object is not valid JSON: {e}")))
        };
        let supported = mutation::workload::find(&self.kind, self.operation).is_some();
        let (object, old_object, options) = match endpoint {
            Endpoint::Validate if self.operation == Operation::Delete => {
                (None, parse(self.old_object)?, parse(self.options)?)
            }
            Endpoint::Validate => (None, None, None),
            _ if !supported => (None, None, None),
            Endpoint::Mutate
                if !self
                    .object
                    .is_some_and(|raw| raw.get().contains(ANNOTATION_MARK)) =>
            {
                (None, None, None)
            }
            _ => (parse(self.object)?, None, None),
        };
        Ok(Request {
            uid: self.uid,
            kind: self.kind,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            object,
            old_object,
            dry_run: self.dry_run,
            options,
        })
    }
}

/// The parts of an AdmissionRequest we read. Everything else in the review is ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub operation: Operation,
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: Option<bool>,
    #[serde(default)]
    pub options: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
    #[default]
    #[serde(other)]
    Unknown,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
            Operation::Unknown => "UNKNOWN",
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    /// base64 of the JSON Patch document, as the API server expects.
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

#[derive(Serialize)]
struct StatusOut<'a> {
    code: u16,
    message: &'a str,
}

/// A request body that is not a usable AdmissionReview: answered with HTTP 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadReview(pub String);

/// How a review ended, for logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed without a patch.
    Unchanged,
    /// Allowed with a patch.
    Patched,
    /// Refused with a message.
    Denied,
    /// The core failed; answered with code 500 and the request's uid.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Unchanged => "unchanged",
            Outcome::Patched => "patched",
            Outcome::Denied => "denied",
            Outcome::Error => "error",
        }
    }
}

/// The answer to one review, plus what the server logs and counts about it.
#[derive(Debug)]
pub struct Reviewed {
    /// The serialized AdmissionReview response.
    pub body: Vec<u8>,
    pub request: Request,
    pub decision: Decision,
    pub outcome: Outcome,
}

/// Parses a review, decides, and serializes the answer.
///
/// Transport-level faults (not JSON, not a v1 review, no request, no uid) are `BadReview`.
/// A panic in the core after the uid is known becomes a response with that uid and code 500,
/// so the API server reports an internal error instead of a broken connection.
///
/// Objects the endpoint cannot act on are not parsed at all (an object on `/mutate` that
/// never mentions our annotations, the object on `/validate`), so `Reviewed::request` may
/// lack them: tools that need the whole request use [`parse_request`] and [`respond`].
pub fn review(body: &[u8], endpoint: Endpoint, config: &Config) -> Result<Reviewed, BadReview> {
    let request = envelope(body)?.into_request(endpoint)?;
    Ok(respond(request, endpoint, config))
}

/// Parses a whole AdmissionReview request, objects included, with the checks of [`review`].
pub fn parse_request(body: &[u8]) -> Result<Request, BadReview> {
    let envelope = envelope(body)?;
    let parse = |raw: Option<&RawValue>| raw.map(|raw| serde_json::from_str(raw.get())).transpose();
    let objects = (
        parse(envelope.object),
        parse(envelope.old_object),
        parse(envelope.options),
    );
    let (Ok(object), Ok(old_object), Ok(options)) = objects else {
        return Err(BadReview("request object is not valid JSON".to_owned()));
    };
    Ok(Request {
        uid: envelope.uid,
        kind: envelope.kind,
        sub_resource: envelope.sub_resource,
        name: envelope.name,
        namespace: envelope.namespace,
        operation: envelope.operation,
        object,
        old_object,
        dry_run: envelope.dry_run,
        options,
    })
}

/// The checks every review passes: JSON, `admission.k8s.io/v1` AdmissionReview, a request
/// with a uid.
fn envelope(body: &[u8]) -> Result<RequestIn<'_>, BadReview> {
    let review: ReviewIn = serde_json::from_slice(body)
        .map_err(|e| BadReview(format!("request body is not a valid AdmissionReview: {e}")))?;
    if review.kind != "AdmissionReview" || review.api_version != API_VERSION {
        return Err(BadReview(format!(
            "expected kind AdmissionReview with apiVersion {API_VERSION}, got kind {:?} apiVersion {:?}",
            review.kind, review.api_version
        )));
    }
    let request = review
        .request
        .ok_or_else(|| BadReview("AdmissionReview has no request".to_owned()))?;
    if request.uid.is_empty() {
        return Err(BadReview("AdmissionReview request has no uid".to_owned()));
    }
    Ok(request)
}

/// Decides on an already parsed request and serializes the answer.
pub fn respond(request: Request, endpoint: Endpoint, config: &Config) -> Reviewed {
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        mutation::decide(&request, endpoint, config)
    }));
    let (decision, outcome) = match decided {
        Ok(decision) => {
            let outcome = match (&decision.denial, &decision.patch) {
                (Some(_), _) => Outcome::Denied,
                (None, Some(_)) => Outcome::Patched,
                (None, None) => Outcome::Unchanged,
            };
            (decision, outcome)
        }
        Err(_) => (
            Decision::deny(mutation::Denial {
                code: 500,
                reason: "internal",
                message: "prestop-injector failed internally while deciding; see its logs"
                    .to_owned(),
            }),
            Outcome::Error,
        ),
    };
    let body = encode(&request.uid, &decision);
    Reviewed {
        body,
        request,
        decision,
        outcome,
    }
}

/// Serializes a decision as an AdmissionReview response.
pub fn encode(uid: &str, decision: &Decision) -> Vec<u8> {
    // Serializing a JSON Patch built from `Value`s cannot fail.
    let patch = decision.patch.as_ref().map(|patch| {
        let json = serde_json::to_vec(patch).unwrap_or_default();
        base64::engine::general_purpose::STANDARD.encode(json)
    });
    let response = ReviewOut {
        api_version: API_VERSION,
        kind: "AdmissionReview",
        response: ResponseOut {
            uid,
            allowed: decision.denial.is_none(),
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            status: decision.denial.as_ref().map(|denial| StatusOut {
                code: denial.code,
                message: &denial.message,
            }),
            warnings: &decision.warnings,
        },
    };
    // Serializing plain strings, bools and numbers into a Vec cannot fail.
    serde_json::to_vec(&response).unwrap_or_default()
}
