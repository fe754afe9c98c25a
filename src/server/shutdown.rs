//! Waiting for the signals that start a graceful shutdown.

/// Resolves on SIGTERM (what the kubelet sends) or SIGINT (Ctrl-C); returns its name.
pub async fn signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}
