//! `prestop-clean`: the program that prestop-injector's hooks and sidecar run.
//!
//! This library holds what the webhook and the program must agree on — the argv format
//! ([`argv`]) — and, for the program and the node reaper, the cleaning itself.

pub mod argv;
