//! Waiting for the signals that start a graceful shutdown, and for the server's own
//! shutdown signal inside its tasks.

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

/// Resolves once the server's shutdown has been signalled (or its sender is gone).
pub async fn signalled(shutdown: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}
