//! The cleaner's side: one question, with the opened directory as its evidence.

use std::io::{IoSlice, Read};
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use rustix::io::{retry_on_intr, Errno};
use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use super::protocol::{
    encode_ending_request, encode_request, parse_answer, Verdict, MAX_REQUEST, TIMEOUT,
};
use crate::report::escape;

/// What a cleaner asks the node agent before it empties a target.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Question<'a> {
    /// `--node-agent SOCKET`: the agent's socket, as seen inside the container.
    pub socket: Option<&'a str>,
    /// `--restartable` (issue 31): the kubelet can restart the pod in place, so `same`
    /// must also mean that the node says the pod is ending ([`ask_ending`]); without an
    /// agent nothing is cleaned.
    pub pod_ending: bool,
}

impl<'a> Question<'a> {
    /// Whether `dir` is the node's directory at `host`, nobody else's, and (when asked)
    /// whether the pod is ending; `None` without a socket.
    pub fn ask(&self, host: &str, dir: BorrowedFd<'_>) -> Option<Verdict> {
        let socket = self.socket?;
        Some(if self.pod_ending {
            ask_ending(socket, host, dir)
        } else {
            ask(socket, host, dir)
        })
    }
}

/// How long [`ask`] keeps asking an agent that answers `busy`: a place frees within a
/// request's [`TIMEOUT`] at the latest, so a cleaner that waits that long is served unless
/// the pods of the node keep every place of its share taken.
pub const BUSY_PATIENCE: Duration = Duration::from_secs(6);

/// Asks the agent at `socket` whether `dir` is the node's directory at `host`; a `busy`
/// agent is asked again, backing off, for up to [`BUSY_PATIENCE`] (issue 32: one pod's
/// idle connections made every other pod's cleaner give up at once).
pub fn ask(socket: &str, host: &str, dir: BorrowedFd<'_>) -> Verdict {
    ask_with_patience(socket, host, dir, BUSY_PATIENCE)
}

/// [`ask`], and whether the asking pod is ending: `same` then also means that the node
/// says its deletion has begun or it has finished for good (issue 31), else `not-ending`.
pub fn ask_ending(socket: &str, host: &str, dir: BorrowedFd<'_>) -> Verdict {
    asking(socket, host, dir, BUSY_PATIENCE, true)
}

/// [`ask`] with another patience (tests).
pub fn ask_with_patience(
    socket: &str,
    host: &str,
    dir: BorrowedFd<'_>,
    patience: Duration,
) -> Verdict {
    asking(socket, host, dir, patience, false)
}

fn asking(
    socket: &str,
    host: &str,
    dir: BorrowedFd<'_>,
    patience: Duration,
    ending: bool,
) -> Verdict {
    let give_up = Instant::now() + patience;
    // Clients that were turned away together must not come back together: each starts its
    // back-off at its own point (the pid spreads them over 0–31 ms).
    let mut pause = Duration::from_millis(20 + u64::from(std::process::id() % 32));
    loop {
        match ask_once(socket, host, dir, ending) {
            Verdict::Busy if Instant::now() + pause < give_up => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Verdict::Busy => {
                return Verdict::Refused(format!(
                    "the node agent at {} stayed busy for {:.1} s",
                    escape(socket.as_bytes()),
                    patience.as_secs_f64()
                ))
            }
            verdict => return verdict,
        }
    }
}

/// One connection, one request, one answer.
fn ask_once(socket: &str, host: &str, dir: BorrowedFd<'_>, ending: bool) -> Verdict {
    let at = escape(socket.as_bytes());
    let stream = match UnixStream::connect(socket) {
        Ok(stream) => stream,
        Err(err) => return Verdict::Unreachable(format!("cannot connect to {at}: {err}")),
    };
    let timeouts = stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)));
    if let Err(err) = timeouts {
        return Verdict::Unreachable(format!("cannot set timeouts on {at}: {err}"));
    }
    let request = if ending {
        encode_ending_request(host.as_bytes())
    } else {
        encode_request(host.as_bytes())
    };
    let fds = [dir];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    // One sendmsg: a request fits the socket buffer, and the descriptor rides its bytes.
    match retry_on_intr(|| {
        sendmsg(
            &stream,
            &[IoSlice::new(&request)],
            &mut control,
            SendFlags::NOSIGNAL,
        )
    }) {
        Ok(sent) if sent == request.len() => {}
        // An agent that is busy answers and closes at once; its answer is still to read.
        Err(Errno::PIPE | Errno::CONNRESET) => {}
        Ok(sent) => {
            return Verdict::Refused(format!(
                "the node agent at {at} took {sent} of the request's {} bytes",
                request.len()
            ))
        }
        Err(Errno::AGAIN) => return Verdict::Unreachable(format!("{at} did not take the request")),
        Err(err) => {
            return Verdict::Refused(format!("cannot send to the node agent at {at}: {err}"))
        }
    }
    let mut answer = Vec::new();
    let mut chunk = [0u8; 512];
    // One deadline for the whole answer, however it is split.
    let deadline = Instant::now() + TIMEOUT;
    let late = || {
        Verdict::Unreachable(format!(
            "the node agent at {at} did not answer within {} s",
            TIMEOUT.as_secs()
        ))
    };
    while !answer.ends_with(b"\n") && answer.len() <= MAX_REQUEST {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return late();
        }
        match (&stream).read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&chunk[..n]),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return late()
            }
            Err(err) => {
                return Verdict::Refused(format!("cannot read the node agent at {at}: {err}"))
            }
        }
    }
    parse_answer(&answer).unwrap_or_else(|| {
        Verdict::Refused(format!(
            "the node agent at {at} answered {:?}, which is not the protocol",
            escape(&answer)
        ))
    })
}
