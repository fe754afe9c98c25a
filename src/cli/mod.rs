//! The offline commands: `mutate`, `certs`, `webhook-config`.

pub mod certs;
pub mod mutate;
pub mod webhook_config;
