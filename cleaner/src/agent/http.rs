//! The agent's plain-HTTP side: Prometheus metrics and the kubelet's probes, without a
//! shell or a client in the image (the agent is the static cleaner program).
//!
//! - `GET /metrics`: `prestop_injector_node_agent_answers_total{verdict}` (`same`,
//!   `in_use`, `not_ending`, `differs`, `refused`, `busy`),
//!   `…_reports_total{result}` (`recorded`, `logged`, `dropped`),
//!   `…_requests_in_flight`, `…_judgements_stuck`;
//! - `GET /healthz`, `GET /readyz`: `200 ok` while the agent itself works: its accepting
//!   loop beat within [`STALL`] and its socket is still the one it bound (a removed or
//!   replaced socket is reachable by no cleaner); else `503` and why, so that the kubelet
//!   restarts it. Nothing a tenant holds counts (issue 39): slow connections, greedy
//!   pods and stuck judgements are the metrics' to show, and a restart would only take
//!   the socket away from every pod of the node (CrashLoopBackOff).
//!
//! One thread serves every connection from one `poll` loop (issue 39: 8 connections that
//! sent nothing held the 8 threads there were, and the kubelet's probe was closed
//! unanswered): a connection costs a descriptor and a buffer, never a thread; it has
//! [`CONNECTION_DEADLINE`] for its whole request; beyond [`MAX_CONNECTIONS`] the oldest
//! connection of the address that holds the most is closed, so a flood from one pod
//! only ever closes its own, never the kubelet's probe from the node.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

use super::stats::Stats;

/// Connections open at once; a new one closes the oldest.
const MAX_CONNECTIONS: usize = 64;
/// How long a connection has for its whole request (the kubelet sends it at once).
const CONNECTION_DEADLINE: Duration = Duration::from_secs(1);
/// The accepting loop beats once a second: this long without a beat, it is stalled.
pub const STALL: Duration = Duration::from_secs(10);
/// The longest request read.
const MAX_HTTP_REQUEST: usize = 8192;

struct Connection {
    stream: TcpStream,
    /// Where it comes from: the kubelet's probes from the node, a tenant from its pod.
    from: IpAddr,
    since: Instant,
    request: Vec<u8>,
}

/// Serves `address` on a thread of its own.
pub fn start(address: &str, stats: Arc<Stats>, socket: String, inode: u64) -> Result<(), String> {
    let listener = TcpListener::bind(address)
        .map_err(|err| format!("cannot listen on --metrics-listen {address}: {err}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|err| format!("cannot make --metrics-listen {address} non-blocking: {err}"))?;
    std::thread::Builder::new()
        .name("http".to_owned())
        .spawn(move || serve(&listener, &stats, &socket, inode))
        .map(|_| ())
        .map_err(|err| format!("cannot start the metrics thread: {err}"))
}

fn serve(listener: &TcpListener, stats: &Stats, socket: &str, inode: u64) {
    let mut open: Vec<Connection> = Vec::new();
    loop {
        let now = Instant::now();
        open.retain(|c| now.duration_since(c.since) < CONNECTION_DEADLINE);
        let wait = open
            .iter()
            .map(|c| CONNECTION_DEADLINE.saturating_sub(now.duration_since(c.since)))
            .min()
            .unwrap_or(Duration::from_secs(1))
            .max(Duration::from_millis(1));
        let timeout = Timespec {
            tv_sec: i64::try_from(wait.as_secs()).unwrap_or(1),
            tv_nsec: i64::from(wait.subsec_nanos()),
        };
        let readable: Vec<bool> = {
            let mut fds = vec![PollFd::new(listener, PollFlags::IN)];
            fds.extend(open.iter().map(|c| PollFd::new(&c.stream, PollFlags::IN)));
            if poll(&mut fds, Some(&timeout)).is_err() {
                // EINTR, or ENOMEM for a moment: the loop comes back.
                continue;
            }
            fds.iter().map(|fd| !fd.revents().is_empty()).collect()
        };
        // Readable connections first, by their index before any is removed.
        let mut index = open.len();
        while index > 0 {
            index -= 1;
            if readable[index + 1] && read_some(&mut open[index]) {
                let connection = open.swap_remove(index);
                respond(connection, stats, socket, inode);
            }
        }
        if readable[0] {
            // A burst is taken whole; each new connection beyond the bound closes the
            // oldest, never itself.
            for _ in 0..MAX_CONNECTIONS {
                match listener.accept() {
                    Ok((stream, from)) => {
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        if open.len() >= MAX_CONNECTIONS {
                            open.remove(oldest_of_the_busiest(&open));
                        }
                        open.push(Connection {
                            stream,
                            from: from.ip(),
                            since: Instant::now(),
                            request: Vec::new(),
                        });
                    }
                    Err(err) if err.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
    }
}

/// The connection to close for a new one: the oldest of the address that holds the
/// most, so that a flood from one pod closes its own, never the kubelet's probe.
fn oldest_of_the_busiest(open: &[Connection]) -> usize {
    let count = |ip: IpAddr| open.iter().filter(|c| c.from == ip).count();
    let busiest = open
        .iter()
        .map(|c| c.from)
        .max_by_key(|ip| count(*ip))
        .expect("a full list");
    open.iter().position(|c| c.from == busiest).unwrap_or(0)
}

/// Reads what is there; true when the request is whole (or will never be).
fn read_some(connection: &mut Connection) -> bool {
    let mut chunk = [0u8; 1024];
    loop {
        match connection.stream.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => {
                connection.request.extend_from_slice(&chunk[..n]);
                if connection.request.windows(4).any(|w| w == b"\r\n\r\n")
                    || connection.request.len() >= MAX_HTTP_REQUEST
                {
                    return true;
                }
            }
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Why the agent cannot answer cleaners now, if it cannot: its own state only.
fn unhealthy(stats: &Stats, socket: &str, inode: u64) -> Option<String> {
    match stats.since_beat() {
        Some(since) if since < STALL => {}
        Some(since) => {
            return Some(format!(
                "the accepting loop has not run for {} s",
                since.as_secs()
            ))
        }
        None => return Some("the accepting loop has not started".to_owned()),
    }
    match std::fs::symlink_metadata(socket) {
        Ok(meta) if meta.ino() == inode => None,
        Ok(_) => Some(format!("{socket} is no longer the socket the agent bound")),
        Err(err) => Some(format!("{socket}: {err}")),
    }
}

fn respond(connection: Connection, stats: &Stats, socket: &str, inode: u64) {
    let Connection {
        mut stream,
        request,
        ..
    } = connection;
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
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // A fresh socket's send buffer takes a few KiB at once; a client that does not read
    // gets what fitted, and never holds the loop.
    let _ = stream.write_all(response.as_bytes());
}
