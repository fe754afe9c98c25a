//! The node agent and its client: the node's word on whether the directory a cleaner
//! opened *is* the node's directory at the expected host path
//! (docs/DESIGN.md#identity-is-checked-on-the-node). Server and client live in this one
//! file so that the protocol does.
//!
//! ```text
//! prestop-clean node-agent --host-root DIR --socket PATH [--allow PREFIX]...
//! ```
//!
//! The agent runs on every node with the node's `/` mounted (read-only) at `DIR`. Inside a
//! pod, the mount table only tells which directory *of its filesystem* a volume shows; the
//! agent resolves the whole host path from the node's root without following any symlink
//! and compares identities, which the same kernel gives both sides.
//!
//! Protocol, on a unix stream socket, one request per connection:
//! - request: `prestop-identity 1 <N> <HOST>\n`, `N` the byte length of `HOST` in decimal
//!   (no leading zero), the whole request at most [`MAX_REQUEST`] bytes, with **exactly one**
//!   descriptor in `SCM_RIGHTS`: the cleaner's opened target directory;
//! - answer: one line, `same`, `differs: <sentence>` or `refused: <sentence>`; every path in
//!   a sentence is escaped ([`escape`]), so an answer is always one line.
//!
//! The agent only `fstat`s the received descriptor (never reads, writes or changes through
//! it); it answers `same` only when the host path is absolute, normalized, at or below an
//! `--allow` prefix (when any is given), resolves below `DIR` by `openat2(O_PATH |
//! O_DIRECTORY | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`
//! (crossing mounts is allowed: a prefix may be its own disk or tmpfs), and both are
//! directories with equal `(st_dev, st_ino)`.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{fstat, major, minor, openat2, statat, AtFlags, FileType, Mode, OFlags};
use rustix::fs::{ResolveFlags, Stat};
use rustix::io::{retry_on_intr, Errno};
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags,
};

use crate::report::escape;

/// The subcommand that runs the agent.
pub const NODE_AGENT: &str = "node-agent";
/// The longest request, header and newline included.
pub const MAX_REQUEST: usize = 4096;
/// How long either side waits for the other, for a whole request or a whole answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Requests answered at once; a further connection is answered `refused: busy`.
pub const MAX_IN_FLIGHT: usize = 16;

const MAGIC: &[u8] = b"prestop-identity 1 ";

/// What the node agent said about an opened directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It is the node's directory at the host path.
    Same,
    /// It is not (the sentence names both identities).
    Differs(String),
    /// The agent would not say (a symlink on the node, a path outside `--allow`, …), or
    /// answered something that is not the protocol: the target is not cleaned.
    Refused(String),
    /// No agent answered (no socket, nobody listening, no answer within [`TIMEOUT`]):
    /// the caller applies the rule that needs no node's word.
    Unreachable(String),
}

/// `prestop-identity 1 <N> <HOST>\n`.
pub fn encode_request(host: &[u8]) -> Vec<u8> {
    let mut request = MAGIC.to_vec();
    request.extend_from_slice(format!("{} ", host.len()).as_bytes());
    request.extend_from_slice(host);
    request.push(b'\n');
    request
}

/// Asks the agent at `socket` whether `dir` is the node's directory at `host`.
pub fn ask(socket: &str, host: &str, dir: BorrowedFd<'_>) -> Verdict {
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
    let request = encode_request(host.as_bytes());
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
    while !answer.ends_with(b"\n") && answer.len() <= MAX_REQUEST {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Verdict::Unreachable(format!(
                "the node agent at {at} did not answer within {} s",
                TIMEOUT.as_secs()
            ));
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
                return Verdict::Unreachable(format!(
                    "the node agent at {at} did not answer within {} s",
                    TIMEOUT.as_secs()
                ))
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

/// `same\n`, `differs: …\n` or `refused: …\n`; anything else is `None`, including a
/// control character in the line (the agent escapes every path), so that whatever answers
/// on the socket cannot forge a line of the cleaner's output.
pub fn parse_answer(answer: &[u8]) -> Option<Verdict> {
    let line = std::str::from_utf8(answer.strip_suffix(b"\n")?).ok()?;
    if line.chars().any(char::is_control) {
        return None;
    }
    if line == "same" {
        return Some(Verdict::Same);
    }
    if let Some(why) = line.strip_prefix("differs: ") {
        return Some(Verdict::Differs(why.to_owned()));
    }
    line.strip_prefix("refused: ")
        .map(|why| Verdict::Refused(why.to_owned()))
}

/// The arguments of `prestop-clean node-agent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentArgs {
    pub host_root: String,
    pub socket: String,
    pub allow: Vec<String>,
}

impl AgentArgs {
    /// Parses the arguments after `node-agent`, options in any order, `--allow` repeated.
    pub fn parse(mut args: &[String]) -> Result<AgentArgs, String> {
        let (mut host_root, mut socket, mut allow) = (None, None, Vec::new());
        while let [flag, value, rest @ ..] = args {
            match flag.as_str() {
                "--host-root" if host_root.is_none() => host_root = Some(value.clone()),
                "--socket" if socket.is_none() => socket = Some(value.clone()),
                "--allow" => {
                    if !is_normalized(value.as_bytes()) {
                        return Err(format!(
                            "--allow {} is not an absolute, normalized path",
                            escape(value.as_bytes())
                        ));
                    }
                    allow.push(value.clone());
                }
                _ => return Err(format!("unexpected argument {flag:?}")),
            }
            args = rest;
        }
        if let [extra, ..] = args {
            return Err(format!("unexpected argument {extra:?}"));
        }
        Ok(AgentArgs {
            host_root: host_root.ok_or("--host-root DIR is required")?,
            socket: socket.ok_or("--socket PATH is required")?,
            allow,
        })
    }
}

/// Runs the agent until SIGTERM or SIGINT (exit 0); 1 when it cannot start.
pub fn serve(args: &AgentArgs) -> u8 {
    match start(args) {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("prestop-clean node-agent: {why}");
            1
        }
    }
}

fn start(args: &AgentArgs) -> Result<(), String> {
    let root = Arc::new(
        rustix::fs::open(
            args.host_root.as_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| format!("cannot open --host-root {}: {err}", args.host_root))?,
    );
    let listener = listen(&args.socket)?;
    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .map_err(|err| format!("cannot install signal handlers: {err}"))?;
    std::thread::spawn(move || {
        let mut signals = signals;
        if signals.forever().next().is_some() {
            eprintln!("prestop-clean node-agent: stopping");
            std::process::exit(0);
        }
    });
    let allow: Arc<Vec<Vec<u8>>> =
        Arc::new(args.allow.iter().map(|p| p.clone().into_bytes()).collect());
    eprintln!(
        "prestop-clean node-agent: serving {} for the node at {}{}",
        escape(args.socket.as_bytes()),
        escape(args.host_root.as_bytes()),
        if args.allow.is_empty() {
            String::new()
        } else {
            format!(", below {}", args.allow.join(", "))
        }
    );
    let in_flight = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        if in_flight.fetch_add(1, Ordering::SeqCst) >= MAX_IN_FLIGHT {
            in_flight.fetch_sub(1, Ordering::SeqCst);
            // A fresh socket's buffer takes one line without blocking.
            log(&stream, b"-", "refused: busy");
            let _ = stream.set_write_timeout(Some(TIMEOUT));
            let _ = (&stream).write_all(b"refused: busy\n");
            continue;
        }
        let slot = Slot(in_flight.clone());
        let (root, allow) = (root.clone(), allow.clone());
        // Without a thread (resources exhausted) the connection is dropped unanswered:
        // the client, without an answer, skips the target.
        let _ = std::thread::Builder::new().spawn(move || {
            let _slot = slot;
            let (host, answer) = answer(&stream, root.as_fd(), &allow);
            // Logged before the client can act on the answer.
            log(&stream, host.as_deref().unwrap_or(b"-"), &answer);
            let _ = stream.set_write_timeout(Some(TIMEOUT));
            let _ = (&stream).write_all(format!("{answer}\n").as_bytes());
        });
    }
    Err("the listening socket failed".to_owned())
}

/// A request in flight; dropping it frees its place.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Binds `socket` mode 0666 (pods run as any uid), after removing a stale socket there;
/// creates its directory 0755 when missing. Anything but a socket at the path is left.
fn listen(socket: &str) -> Result<UnixListener, String> {
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

fn log(stream: &UnixStream, host: &[u8], answer: &str) {
    let peer = match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) => format!(
            "pid {} uid {}",
            cred.pid.as_raw_nonzero(),
            cred.uid.as_raw()
        ),
        Err(_) => "unknown peer".to_owned(),
    };
    eprintln!(
        "prestop-clean node-agent: {peer}: {}: {answer}",
        escape(host)
    );
}

/// The host path asked about (when the request was readable) and the answer line.
fn answer(
    stream: &UnixStream,
    root: BorrowedFd<'_>,
    allow: &[Vec<u8>],
) -> (Option<Vec<u8>>, String) {
    match read_request(stream) {
        Err(why) => (None, format!("refused: {why}")),
        Ok((host, fd)) => {
            let answer = match judge(&host, fd.as_fd(), root, allow) {
                Ok(()) => "same".to_owned(),
                Err(verdict) => verdict,
            };
            (Some(host), answer)
        }
    }
}

/// Reads one whole request within [`TIMEOUT`]: the host path and the one descriptor.
/// Extra descriptors are closed as they arrive; a refusal says why in a sentence.
fn read_request(stream: &UnixStream) -> Result<(Vec<u8>, OwnedFd), String> {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; MAX_REQUEST];
    let (mut len, mut fd, mut fds, mut truncated) = (0, None, 0usize, false);
    let host = loop {
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
        match parse_request(&buf[..len]) {
            Ok(Some(host)) => break host.to_vec(),
            Ok(None) => {}
            Err(why) => return Err(why),
        }
    };
    match fd {
        Some(fd) if fds == 1 && !truncated => Ok((host, fd)),
        _ => Err(format!(
            "the request for {} carried {}{} descriptors, not exactly one",
            escape(&host),
            if truncated { "more than " } else { "" },
            fds
        )),
    }
}

/// A whole request's host path, `None` while incomplete, `Err` when it cannot become one.
pub fn parse_request(bytes: &[u8]) -> Result<Option<&[u8]>, String> {
    let not_ours = || "not a prestop-identity 1 request".to_owned();
    let Some(rest) = bytes.strip_prefix(MAGIC) else {
        return if MAGIC.starts_with(bytes) {
            Ok(None)
        } else {
            Err(not_ours())
        };
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == rest.len() {
        return if digits <= 4 {
            Ok(None)
        } else {
            Err(not_ours())
        };
    }
    if digits == 0 || digits > 4 || rest[0] == b'0' || rest[digits] != b' ' {
        return Err(not_ours());
    }
    let length: usize = std::str::from_utf8(&rest[..digits])
        .ok()
        .and_then(|d| d.parse().ok())
        .ok_or_else(not_ours)?;
    let body = &rest[digits + 1..];
    match body.len().cmp(&(length + 1)) {
        std::cmp::Ordering::Less => Ok(None),
        _ if body[length] != b'\n' => Err(not_ours()),
        std::cmp::Ordering::Equal => Ok(Some(&body[..length])),
        std::cmp::Ordering::Greater => Err("bytes follow the request".to_owned()),
    }
}

/// Absolute, no empty, `.` or `..` component, no trailing `/` (except `/` itself), no NUL.
fn is_normalized(path: &[u8]) -> bool {
    path == b"/"
        || (path.starts_with(b"/")
            && !path.contains(&0)
            && path[1..]
                .split(|&b| b == b'/')
                .all(|c| !matches!(c, b"" | b"." | b"..")))
}

/// `path` is `prefix` or below it, component-wise.
fn at_or_below(path: &[u8], prefix: &[u8]) -> bool {
    prefix == b"/"
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"/"))
}

fn identity(st: &Stat) -> String {
    format!(
        "{}:{} inode {}",
        major(st.st_dev),
        minor(st.st_dev),
        st.st_ino
    )
}

fn kind(st: &Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symlink",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown type",
    }
}

/// `Ok` when `pod` is the node's directory at `host`; else the answer line.
fn judge(
    host: &[u8],
    pod: BorrowedFd<'_>,
    root: BorrowedFd<'_>,
    allow: &[Vec<u8>],
) -> Result<(), String> {
    let shown = escape(host);
    if !is_normalized(host) {
        return Err(format!(
            "refused: the host path {shown} is not absolute and normalized"
        ));
    }
    if !allow.is_empty() && !allow.iter().any(|prefix| at_or_below(host, prefix)) {
        let prefixes: Vec<String> = allow.iter().map(|p| escape(p)).collect();
        return Err(format!(
            "refused: the host path {shown} is not at or below an allowed prefix ({})",
            prefixes.join(", ")
        ));
    }
    let pod_st =
        fstat(pod).map_err(|err| format!("refused: cannot stat the pod's descriptor: {err}"))?;
    if FileType::from_raw_mode(pod_st.st_mode) != FileType::Directory {
        return Err(format!(
            "refused: the pod's descriptor for {shown} is {}, not a directory",
            kind(&pod_st)
        ));
    }
    let pods = format!("the pod's directory is {}", identity(&pod_st));
    let relative: &[u8] = if host == b"/" { b"." } else { &host[1..] };
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let mut opened = Err(Errno::AGAIN);
    // EAGAIN: a rename or mount raced the lookup; try again.
    for _ in 0..3 {
        opened = retry_on_intr(|| openat2(root, relative, flags, Mode::empty(), resolve));
        if !matches!(opened, Err(Errno::AGAIN)) {
            break;
        }
    }
    let node = match opened {
        Ok(node) => node,
        // A symlink in the middle is ELOOP (RESOLVE_NO_SYMLINKS); the last one is
        // ENOTDIR (O_NOFOLLOW opens the link itself, which is no directory).
        Err(err @ (Errno::LOOP | Errno::NOTDIR)) => {
            return Err(match first_symlink(host, root) {
                Some(at) if at == host => {
                    format!("refused: the node's {shown} is a symlink on the node; {pods}")
                }
                Some(at) => format!(
                    "refused: the node's {}, on the way to {shown}, is a symlink on the node; \
                     {pods}",
                    escape(at)
                ),
                None if err == Errno::LOOP => format!(
                    "refused: a component of the node's {shown} is a symlink on the node; {pods}"
                ),
                None => format!(
                    "differs: the node's {shown} is not a directory (or a component of it is \
                     not); {pods}"
                ),
            })
        }
        Err(Errno::NOENT) => return Err(format!("differs: the node has no {shown}; {pods}")),
        Err(err) => {
            return Err(format!(
                "refused: cannot resolve {shown} on the node: {err}; {pods}"
            ))
        }
    };
    let node_st = fstat(&node)
        .map_err(|err| format!("refused: cannot stat the node's {shown}: {err}; {pods}"))?;
    if (node_st.st_dev, node_st.st_ino) == (pod_st.st_dev, pod_st.st_ino) {
        Ok(())
    } else {
        Err(format!(
            "differs: the node's {shown} is {}; {pods}",
            identity(&node_st)
        ))
    }
}

/// The first prefix of `host` that is a symlink below `root` (for the message only).
fn first_symlink<'h>(host: &'h [u8], root: BorrowedFd<'_>) -> Option<&'h [u8]> {
    let ends = host
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, &b)| b == b'/')
        .map(|(i, _)| i)
        .chain([host.len()]);
    for end in ends {
        let st = statat(root, &host[1..end], AtFlags::SYMLINK_NOFOLLOW).ok()?;
        if FileType::from_raw_mode(st.st_mode) == FileType::Symlink {
            return Some(&host[..end]);
        }
    }
    None
}

#[cfg(test)]
mod tests;
