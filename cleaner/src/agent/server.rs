//! The agent's server: a unix socket every pod's cleaner can reach, one thread per
//! request, places shared fairly between pods, and a deadline on every judgement.
//!
//! ```text
//! prestop-clean node-agent --host-root DIR --socket PATH [--allow PREFIX]...
//!                          [--metrics-listen ADDR:PORT]
//! ```
//!
//! Whether a pod is ending is the API server's to say: `prestop-injector node-agent`
//! serves this same agent with that source ([`serve_with`], [`PodEnding`]); this program
//! alone refuses every `ending` question.
//!
//! What no client can do (issue 32): hold more than [`PLACES_PER_PEER`] of the
//! [`MAX_IN_FLIGHT`] places (its pod's share, known from the kernel: [`Peer`]); keep a
//! place longer than [`TIMEOUT`] without a whole request; keep the answer waiting longer
//! than [`JUDGE_DEADLINE`] (a judgement still running then is *stuck*, counted, and the
//! probes fail once [`MAX_STUCK`] are, so that the kubelet restarts the agent).

use std::collections::HashMap;
use std::io::{IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};

use super::args::AgentArgs;
use super::ending::PodEnding;
use super::http;
use super::judge::{judge, Node};
use super::limits::{JUDGE_DEADLINE, MAX_IN_FLIGHT, MAX_STUCK, PLACES_PER_PEER};
use super::peer::Peer;
use super::protocol::{parse_request, shown, Request, MAX_REQUEST, TIMEOUT};
use super::stats::Stats;
use crate::report::escape;

/// The subcommand that runs the agent.
pub const NODE_AGENT: &str = "node-agent";

/// A judgement's state: running, done in time, or abandoned at the deadline (stuck).
const RUNNING: u8 = 0;
const DONE: u8 = 1;
const ABANDONED: u8 = 2;

/// Runs the agent until SIGTERM or SIGINT (exit 0); 1 when it cannot start. It knows no
/// pod's end: every `ending` question is refused.
pub fn serve(args: &AgentArgs) -> u8 {
    serve_with(args, None)
}

/// [`serve`], with where the agent learns whether the asking pod is ending.
pub fn serve_with(args: &AgentArgs, pod_ending: Option<Arc<dyn PodEnding>>) -> u8 {
    match start(args, pod_ending) {
        Ok(()) => 0,
        Err(why) => {
            eprintln!("prestop-clean node-agent: {why}");
            1
        }
    }
}

/// What every request thread shares.
struct Shared {
    root: OwnedFd,
    /// `--host-root`, canonical.
    root_path: String,
    allow: Vec<Vec<u8>>,
    stats: Arc<Stats>,
    /// Places taken, by share ([`Peer::share`]).
    places: Mutex<HashMap<String, usize>>,
    pod_ending: Option<Arc<dyn PodEnding>>,
}

fn start(args: &AgentArgs, pod_ending: Option<Arc<dyn PodEnding>>) -> Result<(), String> {
    let root = rustix::fs::open(
        args.host_root.as_str(),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| format!("cannot open --host-root {}: {err}", args.host_root))?;
    // Absolute and without links: the in-use check reads it against the agent's own
    // mountinfo, which shows mount points that way.
    let root_path = std::fs::canonicalize(&args.host_root)
        .map_err(|err| format!("cannot resolve --host-root {}: {err}", args.host_root))?
        .into_os_string()
        .into_string()
        .map_err(|_| format!("--host-root {} is not UTF-8", args.host_root))?;
    let listener = listen(&args.socket)?;
    let socket_inode = std::fs::symlink_metadata(&args.socket)
        .map_err(|err| format!("cannot stat {}: {err}", args.socket))?
        .ino();
    let stats = Arc::new(Stats::default());
    if let Some(address) = &args.metrics_listen {
        http::start(address, stats.clone(), args.socket.clone(), socket_inode)?;
    }
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
    eprintln!(
        "prestop-clean node-agent: serving {} for the node at {}{}{}{}",
        escape(args.socket.as_bytes()),
        escape(args.host_root.as_bytes()),
        if args.allow.is_empty() {
            String::new()
        } else {
            format!(", below {}", args.allow.join(", "))
        },
        match &pod_ending {
            Some(source) => format!("; whether a pod is ending: {}", source.describe()),
            None => "; whether a pod is ending: not known (every such question refused)".to_owned(),
        },
        match &args.metrics_listen {
            Some(address) => format!("; metrics and probes on http://{address}"),
            None => String::new(),
        }
    );
    let shared = Arc::new(Shared {
        root,
        root_path,
        allow: args.allow.iter().map(|p| p.clone().into_bytes()).collect(),
        stats,
        places: Mutex::new(HashMap::new()),
        pod_ending,
    });
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let peer = Peer::of(&stream).unwrap_or(Peer {
            pid: 0,
            uid: u32::MAX,
            pod: None,
        });
        let place = match Place::take(&shared, &peer) {
            Ok(place) => place,
            Err(answer) => {
                // A fresh socket's buffer takes one line without blocking.
                log(&peer, b"-", answer);
                shared.stats.count(answer);
                let _ = stream.set_write_timeout(Some(TIMEOUT));
                let _ = (&stream).write_all(format!("{answer}\n").as_bytes());
                continue;
            }
        };
        let shared = shared.clone();
        // Without a thread (resources exhausted) the connection is dropped unanswered:
        // the client, without an answer, skips the target.
        let _ = std::thread::Builder::new().spawn(move || {
            let (host, answer) = answer(&stream, &peer, &shared);
            drop(place);
            // Logged before the client can act on the answer; what the node holds at a
            // path that is not the pod's directory is logged, never answered.
            let logged = match &answer.on_the_node {
                Some(detail) => format!("{} [on the node: {detail}]", answer.line),
                None => answer.line.clone(),
            };
            log(&peer, host.as_deref().unwrap_or(b"-"), &logged);
            shared.stats.count(&answer.line);
            let _ = stream.set_write_timeout(Some(TIMEOUT));
            let _ = (&stream).write_all(format!("{}\n", answer.line).as_bytes());
        });
    }
    Err("the listening socket failed".to_owned())
}

/// A request's place; dropping it frees the place.
struct Place {
    shared: Arc<Shared>,
    share: String,
}

impl Place {
    /// A place for `peer`, or the answer that says why not.
    fn take(shared: &Arc<Shared>, peer: &Peer) -> Result<Place, &'static str> {
        if shared.stats.stuck.load(Ordering::SeqCst) >= MAX_STUCK {
            return Err("refused: the node agent has too many judgements stuck");
        }
        let share = peer.share();
        let mut places = shared.places.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = places.values().sum();
        let mine = places.get(&share).copied().unwrap_or(0);
        if total >= MAX_IN_FLIGHT || mine >= PLACES_PER_PEER {
            return Err("busy");
        }
        places.insert(share.clone(), mine + 1);
        shared.stats.in_flight.store(total + 1, Ordering::SeqCst);
        Ok(Place {
            shared: shared.clone(),
            share,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut places = self.shared.places.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = places.get_mut(&self.share) {
            *count -= 1;
            if *count == 0 {
                places.remove(&self.share);
            }
        }
        let total: usize = places.values().sum();
        self.shared.stats.in_flight.store(total, Ordering::SeqCst);
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

fn log(peer: &Peer, host: &[u8], answer: &str) {
    eprintln!(
        "prestop-clean node-agent: {}: {}: {answer}",
        peer.describe(),
        escape(host)
    );
}

/// The host path asked about (when the request was readable) and the answer line.
fn answer(stream: &UnixStream, peer: &Peer, shared: &Arc<Shared>) -> (Option<Vec<u8>>, Answer) {
    let (host, ending, fd) = match read_request(stream) {
        Err(why) => return (None, Answer::plain(format!("refused: {why}"))),
        Ok(request) => request,
    };
    // The judgement runs on a thread of its own, so that a descriptor or a node path that
    // never answers keeps only that thread, never the answer or the place. Whichever of
    // the judge and the deadline moves `state` first decides who counts it as stuck.
    let state = Arc::new(AtomicU8::new(RUNNING));
    let (tell, told) = mpsc::channel();
    let judged = {
        let (shared, peer, host, state) =
            (shared.clone(), peer.clone(), host.clone(), state.clone());
        std::thread::Builder::new().spawn(move || {
            let started = Instant::now();
            let node = Node {
                root: shared.root.as_fd(),
                root_path: shared.root_path.as_bytes(),
                allow: &shared.allow,
            };
            let verdict = judge(&host, fd.as_fd(), &peer, &node);
            // Closed before the answer: a client that has its answer finds no descriptor
            // of its kept by the agent.
            drop(fd);
            let _ = tell.send(verdict);
            let abandoned = state
                .compare_exchange(RUNNING, DONE, Ordering::SeqCst, Ordering::SeqCst)
                .is_err();
            if abandoned {
                shared.stats.stuck.fetch_sub(1, Ordering::SeqCst);
                eprintln!(
                    "prestop-clean node-agent: {}: {}: a stuck judgement ended after {} s",
                    peer.describe(),
                    escape(&host),
                    started.elapsed().as_secs()
                );
            }
        })
    };
    if judged.is_err() {
        return (
            Some(host),
            Answer::plain("refused: the node agent cannot start a thread".to_owned()),
        );
    }
    let verdict = match told.recv_timeout(JUDGE_DEADLINE) {
        Ok(verdict) => Some(verdict),
        Err(_) => {
            let abandoned = state
                .compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
            if abandoned {
                shared.stats.stuck.fetch_add(1, Ordering::SeqCst);
                None
            } else {
                // The judge ended just now: its verdict was sent before it said so.
                told.recv().ok()
            }
        }
    };
    let answer = match verdict {
        Some(Ok(())) if ending => Answer::plain(ending_answer(peer, shared.pod_ending.as_deref())),
        Some(Ok(())) => Answer::plain("same".to_owned()),
        Some(Err(not_same)) => Answer {
            line: not_same.answer,
            on_the_node: not_same.on_the_node,
        },
        None => Answer::plain(format!(
            "refused: the node agent could not judge {} within {} s",
            shown(&host),
            JUDGE_DEADLINE.as_secs()
        )),
    };
    (Some(host), answer)
}

/// `same` when the node says the asking pod is ending, else `not-ending: …`, which also
/// says when the node cannot tell. Asked only once the directory is the pod's and nobody
/// else uses it.
fn ending_answer(peer: &Peer, source: Option<&dyn PodEnding>) -> String {
    let Some(uid) = &peer.pod else {
        return "not-ending: the asking process is in no pod's cgroup, so the node cannot \
                say whether its pod is ending"
            .to_owned();
    };
    let Some(source) = source else {
        return "not-ending: this node agent cannot say whether a pod is ending (it has no \
                API server: prestop-injector node-agent has); a pod the kubelet can restart \
                in place is left to the node reaper"
            .to_owned();
    };
    match source.ending(uid) {
        Ok(()) => "same".to_owned(),
        // One line of the protocol, whatever the API server said.
        Err(why) => format!("not-ending: {}", why.replace(|c: char| c.is_control(), " ")),
    }
}

/// The line a client gets, and what only the log says.
struct Answer {
    line: String,
    on_the_node: Option<String>,
}

impl Answer {
    fn plain(line: String) -> Answer {
        Answer {
            line,
            on_the_node: None,
        }
    }
}

/// Reads one whole request within [`TIMEOUT`]: the host path, whether the pod's end is
/// asked too, and the one descriptor. Extra descriptors are closed as they arrive; a
/// refusal says why in a sentence.
fn read_request(stream: &UnixStream) -> Result<(Vec<u8>, bool, OwnedFd), String> {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; MAX_REQUEST];
    let (mut len, mut fd, mut fds, mut truncated) = (0, None, 0usize, false);
    let (host, ending) = loop {
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
            Ok(Some(Request { host, ending })) => break (host.to_vec(), ending),
            Ok(None) => {}
            Err(why) => return Err(why),
        }
    };
    match fd {
        Some(fd) if fds == 1 && !truncated => Ok((host, ending, fd)),
        _ => Err(format!(
            "the request for {} carried {}{} descriptors, not exactly one",
            escape(&host),
            if truncated { "more than " } else { "" },
            fds
        )),
    }
}
