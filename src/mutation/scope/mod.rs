//! Scope: is this object ours to change, and with which settings?
//!
//! Decides, from the kind and operation ([`workload`]), the `prestop-injector.io/`
//! annotations of the object and its pod template ([`settings`]), the settings recorded on
//! a template its controller copies ([`record`]), what the cluster's Kubernetes version can
//! run ([`gates`]), whether the pod runs on Windows ([`os`]) and where the kubelet may restart a container in its pod ([`restarts`]).
//! Hands on validated [`settings::Settings`] (or a denial naming the bad annotation); the
//! next stage, `targets`, turns their cleanup paths into directories.

pub(in crate::mutation) mod gates;
pub(in crate::mutation) mod os;
// The reaper reads it too: a recorded `inject: "false"` is honoured there.
pub(crate) mod record;
pub(in crate::mutation) mod restarts;
pub mod settings;
pub mod workload;
