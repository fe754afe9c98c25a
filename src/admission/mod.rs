//! `admission.k8s.io/v1` AdmissionReview on the wire, and the one function both the
//! server and the offline CLI call: bytes of a review in, bytes of a review out.
//!
//! We keep our own small types instead of kube-core's: its `AdmissionRequest<T>` needs a
//! typed `ObjectMeta` (which drops metadata fields our types don't know) and its response
//! serializes the patch as an array of numbers instead of the base64 string the API
//! server expects (kube-rs issue 1781).

use crate::config::Config;
use crate::json::Value;
use crate::mutation::{self, Decision, Endpoint};
/// The request as the review carries it; the core owns the type it decides on.
pub use crate::mutation::{GroupVersionKind, Operation, Request};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use std::io::Write as _;

mod object;
mod wire;

pub const API_VERSION: &str = "admission.k8s.io/v1";

#[derive(Debug, Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "O: Deserialize<'de>, Old: Deserialize<'de>")
)]
struct ReviewIn<O, Old> {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<RequestIn<O, Old>>,
}

/// A request as read off the wire, generic over how its objects are read: into a `Value`
/// when the endpoint acts on them, or skipped with `IgnoredAny` — no tree is built for
/// an object nobody looks at (an UPDATE's oldObject on `/mutate`, say).
#[derive(Debug, Deserialize)]
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "O: Deserialize<'de>, Old: Deserialize<'de>")
)]
struct RequestIn<O, Old> {
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
    #[serde(default)]
    object: Option<O>,
    #[serde(default)]
    old_object: Option<Old>,
    #[serde(default)]
    dry_run: Option<bool>,
    #[serde(default)]
    options: Option<Value>,
}

/// How an object was read: kept, or skipped.
trait ObjectRead {
    fn kept(self) -> Option<Value>;
}

impl ObjectRead for Value {
    fn kept(self) -> Option<Value> {
        Some(self)
    }
}

impl ObjectRead for object::CoreObject {
    fn kept(self) -> Option<Value> {
        Some(self.0)
    }
}

impl ObjectRead for IgnoredAny {
    fn kept(self) -> Option<Value> {
        None
    }
}

impl<O: ObjectRead, Old: ObjectRead> RequestIn<O, Old> {
    fn into_request(self) -> Request {
        Request {
            uid: self.uid,
            kind: self.kind,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            object: self.object.and_then(ObjectRead::kept),
            old_object: self.old_object.and_then(ObjectRead::kept),
            dry_run: self.dry_run,
            options: self.options,
        }
    }
}

/// Our annotation prefix without the `/`, which JSON may escape. The API server's encoder
/// escapes neither letters, `-` nor `.`, so a review whose text lacks it carries none of
/// our annotations.
const ANNOTATION_MARK: &[u8] = b"prestop-injector.io";

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
/// Objects the endpoint cannot act on are not parsed at all (the object on `/mutate` when
/// the review never mentions our annotations, oldObject on the mutating endpoints, the
/// object on `/validate`), and those it reads lack `status` and `metadata.managedFields`
/// (see `object.rs`), so `Reviewed::request` holds partial objects: tools that need the
/// whole request use [`parse_request`] and [`respond`].
pub fn review(body: &[u8], endpoint: Endpoint, config: &Config) -> Result<Reviewed, BadReview> {
    let request = match endpoint {
        Endpoint::Mutate if memchr::memmem::find(body, ANNOTATION_MARK).is_none() => {
            envelope::<IgnoredAny, IgnoredAny>(body)?
        }
        Endpoint::Mutate | Endpoint::MutateAuto => {
            envelope::<object::CoreObject, IgnoredAny>(body)?
        }
        Endpoint::Validate => envelope::<IgnoredAny, object::CoreObject>(body)?,
    };
    Ok(respond(request, endpoint, config))
}

/// Parses a whole AdmissionReview request, objects included, with the checks of [`review`].
pub fn parse_request(body: &[u8]) -> Result<Request, BadReview> {
    envelope::<Value, Value>(body)
}

/// The checks every review passes: JSON, `admission.k8s.io/v1` AdmissionReview, a request
/// with a uid.
fn envelope<O, Old>(body: &[u8]) -> Result<Request, BadReview>
where
    O: DeserializeOwned + ObjectRead,
    Old: DeserializeOwned + ObjectRead,
{
    // JSON is UTF-8 (RFC 8259). Checked once for the whole body, so that serde_json does
    // not check every string again as it reads it (~8 k instructions a seed review); a
    // body with bytes that are not UTF-8 anywhere, even in a part the core skips, is
    // refused rather than read in part.
    let text = std::str::from_utf8(body).map_err(|e| {
        BadReview(format!(
            "request body is not a valid AdmissionReview: not UTF-8 at byte {}",
            e.valid_up_to()
        ))
    })?;
    let review: ReviewIn<O, Old> = serde_json::from_str(text)
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
    Ok(request.into_request())
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
    // Written by hand: the base64 patch (most of the bytes) is encoded straight into the
    // body and never scanned for escapes (see `wire`). Writing into a Vec cannot fail,
    // nor can serializing strings.
    // The patch's JSON first, so that the body is allocated once at its final size.
    let patch = decision.patch.as_ref().map(|patch| {
        let mut json = Vec::with_capacity(patch.0.len() * 256);
        wire::write_patch(&mut json, &patch.0);
        json
    });
    let texts = decision.warnings.iter().map(String::len).sum::<usize>()
        + decision
            .denial
            .as_ref()
            .map_or(0, |denial| denial.message.len());
    let encoded = patch.as_ref().map_or(0, |json| json.len().div_ceil(3) * 4);
    // Room for the fixed text and a few escapes; growing past it is only slower.
    let mut out = Vec::with_capacity(256 + uid.len() + encoded + texts + texts / 8);
    out.extend_from_slice(
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#,
    );
    let _ = serde_json::to_writer(&mut out, uid);
    out.extend_from_slice(if decision.denial.is_none() {
        br#","allowed":true"#
    } else {
        br#","allowed":false"#
    });
    if let Some(json) = &patch {
        out.extend_from_slice(br#","patchType":"JSONPatch","patch":""#);
        wire::write_base64(&mut out, json);
        out.push(b'"');
    }
    if let Some(denial) = &decision.denial {
        let _ = write!(out, r#","status":{{"code":{},"message":"#, denial.code);
        let _ = serde_json::to_writer(&mut out, &denial.message);
        out.push(b'}');
    }
    if !decision.warnings.is_empty() {
        // Eight bytes at a time (`wire::write_str`), as serde_json writes them.
        out.extend_from_slice(br#","warnings":["#);
        for (index, warning) in decision.warnings.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            wire::write_str(&mut out, warning);
        }
        out.push(b']');
    }
    out.extend_from_slice(b"}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutation::Denial;

    #[test]
    fn encodes_every_shape_of_answer_as_valid_json() {
        let allowed = encode("u\"1", &Decision::allow());
        assert_eq!(
            String::from_utf8(allowed).unwrap(),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u\"1","allowed":true}}"#
        );
        let denied = Decision {
            warnings: vec!["w \"1\"".into()],
            ..Decision::deny(Denial {
                code: 403,
                reason: "r",
                message: "no\n\"way\"".into(),
            })
        };
        let body: Value = serde_json::from_slice(&encode("u", &denied)).unwrap();
        assert_eq!(
            body["response"],
            crate::json::json!({"uid": "u", "allowed": false, "status": {"code": 403, "message": "no\n\"way\""}, "warnings": ["w \"1\""]})
        );
    }

    #[test]
    fn warnings_are_written_as_serde_json_writes_them() {
        let warnings: Vec<String> = [
            "container \"app\": /data may be shared by pods of a Job with parallelism 2",
            "tab\there, a bell \u{7}, a DEL \u{7f}, back\\slash, é and \u{E000}",
            "",
        ]
        .map(str::to_owned)
        .into();
        for count in 1..=warnings.len() {
            let decision = Decision {
                warnings: warnings[..count].to_vec(),
                ..Decision::allow()
            };
            let body = String::from_utf8(encode("u", &decision)).unwrap();
            let expected = format!(
                r#","warnings":{}}}}}"#,
                serde_json::to_string(&decision.warnings).unwrap()
            );
            assert!(body.ends_with(&expected), "{body}");
        }
    }
}

#[cfg(test)]
mod utf8_tests {
    use super::*;
    use crate::mutation::Endpoint;

    /// The body is checked for UTF-8 once, before serde_json reads it without checking
    /// each string: a byte that is not UTF-8 is refused wherever it is, in a part the core
    /// reads or in one it skips, and the seed review still reads as before.
    #[test]
    fn a_body_that_is_not_utf8_is_refused_wherever_the_byte_is() {
        let seed = std::fs::read("examples/review-job-worker.json").unwrap();
        let config = Config::default();
        let answer = review(&seed, Endpoint::Mutate, &config).expect("the seed is a review");
        assert!(!answer.body.is_empty());
        for (inside, marker) in [
            (
                "an annotation the core reads",
                "\"prestop-injector.io/cleanup\": \"auto\"",
            ),
            ("managedFields, which the core skips", "\"manager\""),
        ] {
            let text = String::from_utf8(seed.clone()).unwrap();
            let at = text
                .find(marker)
                .unwrap_or_else(|| panic!("the seed has {marker}"))
                + 2;
            let mut bad = seed.clone();
            bad.insert(at, 0xff);
            for endpoint in [Endpoint::Mutate, Endpoint::MutateAuto, Endpoint::Validate] {
                let Err(BadReview(message)) = review(&bad, endpoint, &config) else {
                    panic!("{inside}: a 0xff byte was accepted on {endpoint:?}");
                };
                assert_eq!(
                    message,
                    format!("request body is not a valid AdmissionReview: not UTF-8 at byte {at}"),
                    "{inside}"
                );
            }
        }
    }
}
