//! prestop-injector: a Kubernetes mutating admission webhook that gives Jobs (and other
//! pod templates) a safe preStop cleanup of their hostPath scratch directories.
//!
//! Layers: [`mutation`] is the pure core; [`admission`] turns bytes into a decision and
//! back; [`server`] is the HTTPS adapter; [`cli`] holds the offline commands.

pub mod admission;
pub mod certs;
pub mod cli;
pub mod config;
pub mod duration;
pub mod mutation;
pub mod server;
