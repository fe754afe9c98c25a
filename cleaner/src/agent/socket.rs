//! The agent's socket: bound so that a pod of any uid can connect, and one whole request
//! read from it, with the one descriptor a question must carry (a report carries none;
//! the server's threads and answers are [`super::server`]).

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

use rustix::fs::Mode;
use rustix::io::Errno;
use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};

use super::grace::is_grace_request;
use super::protocol::{parse_request, Request, MAX_REQUEST, TIMEOUT};
use super::reporting::{is_report, parse_report, CleanupReport, Outcome};
use crate::report::escape;

/// One whole request: a question, with its descriptor, or a cleanup's report, with none.
pub(super) enum Incoming {
    Question {
        host: Vec<u8>,
        ending: bool,
        fd: OwnedFd,
    },
    Report {
        outcome: Outcome,
        line: String,
    },
    /// How long the asking pod has ([`super::grace`]).
    Grace,
}

/// What the bytes so far are.
enum Parsed {
    Question(Vec<u8>, bool),
    Report(Outcome, String),
    Grace,
}

/// Binds `socket` mode 0666 (pods run as any uid), after removing a stale socket there;
/// creates its directory 0755 when missing. Anything but a socket at the path is left.
pub(super) fn listen(socket: &str) -> Result<UnixListener, String> {
    let path = std::path::Path::new(socket);
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)))
            .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|err| format!("cannot remove the stale socket {socket}: {err}"))?,
        Ok(_) => return Err(format!("{socket} exists and is not a socket: not replaced")),
        Err(_) => {}
    }
    // Born 0666, so that no client ever finds it stricter; the agent has no other thread
    // yet to see this umask.
    let umask = rustix::process::umask(Mode::from_raw_mode(0o111));
    let bound = UnixListener::bind(path);
    rustix::process::umask(umask);
    let listener = bound.map_err(|err| format!("cannot listen on {socket}: {err}"))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(|err| format!("cannot chmod {socket}: {err}"))?;
    Ok(listener)
}

/// Reads one whole request within [`TIMEOUT`]: a question (the host path, whether the
/// pod's end is asked too, and the one descriptor) or a report (no descriptor). Extra
/// descriptors are closed as they arrive; a refusal says why in a sentence.
pub(super) fn read_request(stream: &UnixStream) -> Result<Incoming, String> {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; MAX_REQUEST];
    let (mut len, mut fd, mut fds, mut truncated) = (0, None, 0usize, false);
    let parsed = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || len == MAX_REQUEST {
            return Err(if len == MAX_REQUEST {
                format!("the request is longer than {MAX_REQUEST} bytes")
            } else {
                format!("no whole request within {} s", TIMEOUT.as_secs())
            });
        }
        rustix::net::sockopt::set_socket_timeout(
            stream,
            rustix::net::sockopt::Timeout::Recv,
            Some(left),
        )
        .map_err(|err| format!("cannot set a timeout: {err}"))?;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received = recvmsg(
            stream,
            &mut [IoSliceMut::new(&mut buf[len..])],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        );
        let received = match received {
            Ok(received) => received,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => {
                return Err(format!("no whole request within {} s", TIMEOUT.as_secs()))
            }
            Err(err) => return Err(format!("cannot read the request: {err}")),
        };
        truncated |= received.flags.contains(ReturnFlags::CTRUNC);
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received_fds) = message {
                for received_fd in received_fds {
                    fds += 1;
                    if fd.is_none() {
                        fd = Some(received_fd);
                    }
                }
            }
        }
        if received.bytes == 0 {
            return Err("the request ended early".to_owned());
        }
        len += received.bytes;
        let bytes = &buf[..len];
        let parsed = match is_report(bytes) {
            None => Ok(None),
            Some(true) => parse_report(bytes).map(|report| {
                report
                    .map(|CleanupReport { outcome, line }| Parsed::Report(outcome, line.to_owned()))
            }),
            Some(false) => match is_grace_request(bytes) {
                Some(true) => Ok(Some(Parsed::Grace)),
                None => Ok(None),
                Some(false) => parse_request(bytes).map(|request| {
                    request.map(|Request { host, ending }| Parsed::Question(host.to_vec(), ending))
                }),
            },
        };
        match parsed {
            Ok(Some(parsed)) => break parsed,
            Ok(None) => {}
            Err(why) => return Err(why),
        }
    };
    let host = match parsed {
        // A report is no question about a directory: a descriptor with it is refused, so
        // that no report can leave one with the agent.
        Parsed::Report(outcome, line) if fds == 0 && !truncated => {
            return Ok(Incoming::Report { outcome, line })
        }
        Parsed::Grace if fds == 0 && !truncated => return Ok(Incoming::Grace),
        Parsed::Report(..) | Parsed::Grace => {
            return Err(format!(
                "a {} carries no descriptor, this one {}{}",
                if matches!(parsed, Parsed::Grace) {
                    "question of time"
                } else {
                    "report"
                },
                if truncated { "more than " } else { "" },
                fds
            ))
        }
        Parsed::Question(host, ending) => match fd {
            Some(fd) if fds == 1 && !truncated => {
                return Ok(Incoming::Question { host, ending, fd })
            }
            _ => host,
        },
    };
    Err(format!(
        "the request for {} carried {}{} descriptors, not exactly one",
        escape(&host),
        if truncated { "more than " } else { "" },
        fds
    ))
}
