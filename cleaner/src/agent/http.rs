//! The agent's plain-HTTP side: Prometheus metrics and the kubelet's probes, without a
//! shell or a client in the image (the agent is the static cleaner program).
//!
//! - `GET /metrics`: `prestop_injector_node_agent_answers_total{verdict}` (`same`,
//!   `in_use`, `not_ending`, `differs`, `refused`, `busy`), `…_requests_in_flight`,
//!   `…_judgements_stuck`;
//! - `GET /healthz`, `GET /readyz`: `200 ok` while the agent can answer: its socket is
//!   still the one it bound (a removed or replaced socket is reachable by no cleaner),
//!   and fewer than [`MAX_STUCK`] judgements are stuck; else `503` and why, so that the
//!   kubelet restarts it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::limits::MAX_STUCK;
use super::stats::Stats;

/// Connections served at once; more are closed unanswered (a probe retries).
const MAX_CONNECTIONS: usize = 8;

/// Serves `address` on a thread of its own.
pub fn start(address: &str, stats: Arc<Stats>, socket: String, inode: u64) -> Result<(), String> {
    let listener = TcpListener::bind(address)
        .map_err(|err| format!("cannot listen on --metrics-listen {address}: {err}"))?;
    std::thread::Builder::new()
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if stats.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                    stats.connections.fetch_sub(1, Ordering::SeqCst);
                    continue;
                }
                let (stats, socket) = (stats.clone(), socket.clone());
                let counted = stats.clone();
                let spawned = std::thread::Builder::new().spawn(move || {
                    respond(stream, &stats, &socket, inode);
                    stats.connections.fetch_sub(1, Ordering::SeqCst);
                });
                if spawned.is_err() {
                    // The closure, with its decrement, never ran (its stream was dropped
                    // with it, unanswered).
                    counted.connections.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })
        .map(|_| ())
        .map_err(|err| format!("cannot start the metrics thread: {err}"))
}

/// Why the agent cannot answer cleaners now, if it cannot.
fn unhealthy(stats: &Stats, socket: &str, inode: u64) -> Option<String> {
    let stuck = stats.stuck.load(Ordering::SeqCst);
    if stuck >= MAX_STUCK {
        return Some(format!("{stuck} judgements are stuck"));
    }
    match std::fs::symlink_metadata(socket) {
        Ok(meta) if meta.ino() == inode => None,
        Ok(_) => Some(format!("{socket} is no longer the socket the agent bound")),
        Err(err) => Some(format!("{socket}: {err}")),
    }
}

fn respond(mut stream: TcpStream, stats: &Stats, socket: &str, inode: u64) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let mut request = Vec::new();
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, body) = match line {
        b"GET /metrics HTTP/1.1" | b"GET /metrics HTTP/1.0" => ("200 OK", stats.render()),
        b"GET /healthz HTTP/1.1"
        | b"GET /healthz HTTP/1.0"
        | b"GET /readyz HTTP/1.1"
        | b"GET /readyz HTTP/1.0" => match unhealthy(stats, socket, inode) {
            None => ("200 OK", "ok\n".to_owned()),
            Some(why) => ("503 Service Unavailable", format!("{why}\n")),
        },
        _ => (
            "404 Not Found",
            "GET /metrics, /healthz or /readyz\n".to_owned(),
        ),
    };
    let content_type = if body.starts_with("# HELP") {
        "text/plain; version=0.0.4; charset=utf-8"
    } else {
        "text/plain; charset=utf-8"
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
