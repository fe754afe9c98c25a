//! prestop-injector: a Kubernetes mutating admission webhook that gives Jobs (and other
//! pod templates) a safe preStop cleanup of their hostPath scratch directories.
//!
//! Layers: [`mutation`] is the pure core; [`admission`] turns bytes into a decision and
//! back; [`server`] is the HTTPS adapter; [`cli`] holds the offline commands; [`reaper`]
//! is the node reaper, which reuses the core's target rules and the cleaner's walk;
//! [`policy`] holds the host-path rules (allow-list, protected entries) that the
//! [`config`] checks at start-up and the core applies to every target;
//! [`seal_keys`] holds the keys with which the webhook seals what it injected and the
//! reaper verifies it ([`mutation::seal`]).
//!
//! The core on its own, as the server and `prestop-injector mutate` call it:
//!
//! ```
//! use prestop_injector::config::Config;
//! use prestop_injector::json::json; // the core's own JSON model
//! use prestop_injector::mutation::{decide, Endpoint, GroupVersionKind, Operation, Request};
//!
//! let job = json!({
//!     "apiVersion": "batch/v1", "kind": "Job",
//!     "metadata": {"name": "worker", "annotations": {"prestop-injector.io/cleanup": "auto"}},
//!     "spec": {"template": {"spec": {
//!         "restartPolicy": "Never",
//!         "containers": [{"name": "app", "image": "busybox:1.36",
//!                         "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
//!         "volumes": [{"name": "scratch", "hostPath": {"path": "/mnt/scratch"}}]}}}
//! });
//! let request = Request {
//!     uid: "1".into(),
//!     kind: GroupVersionKind { group: "batch".into(), version: "v1".into(), kind: "Job".into() },
//!     operation: Operation::Create,
//!     object: Some(job.clone()),
//!     ..Request::default()
//! };
//! // Nothing is deleted outside the node's scratch directories the operator names.
//! let config = Config::from_yaml("allowedHostPathPrefixes: [/mnt/scratch]").unwrap();
//! let decision = decide(&request, Endpoint::Mutate, &config);
//! // Applied by json_patch (RFC 6902), as the API server applies it.
//! let patched = decision.patch.unwrap().apply_to(&job).unwrap();
//! let spec = &patched["spec"]["template"]["spec"];
//! assert_eq!(spec["terminationGracePeriodSeconds"], 40); // 30 s cleanup + 10 s shutdown
//! // The cleaner program, delivered by an init container: `prestop-clean hook --deadline 38
//! // --target /scratch …`, stopping itself 2 s before the kubelet's kill.
//! let hook = &spec["containers"][0]["lifecycle"]["preStop"]["exec"]["command"];
//! assert_eq!(hook[0], "/.prestop-injector/prestop-clean");
//! assert_eq!(hook.as_array().unwrap()[2..5], json!(["--deadline", "38", "--target"]).as_array().unwrap()[..]);
//! assert_eq!(hook[5], "/scratch");
//! assert_eq!(spec["initContainers"][0]["name"], "prestop-install");
//! ```

pub mod admission;
pub mod certs;
pub mod cli;
pub mod config;
pub mod duration;
pub mod json;
pub mod json_diff;
pub mod kube_version;
pub mod mutation;
pub mod node;
pub mod node_agent;
pub mod policy;
pub mod reaper;
pub mod seal_keys;
pub mod server;
