//! The agent's server: a unix socket every pod's cleaner can reach, one thread per
//! connection, judging turns shared fairly between pods ([`super::queue`]), and a
//! deadline on every judgement.
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
//! What no client can do (issues 32 and 39): hold more than
//! [`PLACES_PER_PEER`](super::PLACES_PER_PEER) connections (its pod's share, known from the kernel: [`Peer`]); keep one longer than
//! [`TIMEOUT`] without a whole request; go ahead of another pod's request for a judging
//! turn; keep the answer waiting longer than [`JUDGE_DEADLINE`] (a judgement still running
//! then is *stuck* and counted; at [`MAX_STUCK`] the agent refuses until they end). The
//! accepting loop beats a heart for the probes ([`Stats::beat`]), which say only whether
//! the agent itself works, never what tenants hold.
//!
//! A cleanup's report (`prestop-report`, [`super::reporting`]) is handed to the source of
//! pods ([`PodEnding::report`]), about the pod the kernel names.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use rustix::fs::{Mode, OFlags};

use super::args::AgentArgs;
use super::ending::{ending_answer, PodEnding};
use super::http;
use super::judge::{busy_answer, judge, Node};
use super::limits::{JUDGE_DEADLINE, MAX_STUCK};
use super::peer::Peer;
use super::protocol::{shown, TIMEOUT};
use super::queue::{Door, QUEUE_PATIENCE};
use super::socket::{listen, read_request, Incoming};
use super::stats::could_not;
use super::stats::Stats;
use crate::report::escape;

mod answers;
use answers::{grace_answer, report_answer, Answer};

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
    door: Arc<Door>,
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
        door: Door::new(),
        pod_ending,
    });
    listener
        .set_nonblocking(true)
        .map_err(|err| format!("cannot make {} non-blocking: {err}", args.socket))?;
    loop {
        // The heart beats at least once a second while the loop runs, connections or
        // none: the probes' word that the agent still accepts.
        shared.stats.beat();
        let mut ready = [rustix::event::PollFd::new(
            &listener,
            rustix::event::PollFlags::IN,
        )];
        let second = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut ready, Some(&second)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(format!("the listening socket failed: {err}")),
        }
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    // A flood of connections keeps the loop here, alive all the same: its
                    // heart beats with each one, so a tenant cannot stop it.
                    shared.stats.beat();
                    admit(stream, &shared);
                }
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                // A connection that failed before it was accepted (ECONNABORTED), or no
                // descriptor left (EMFILE): the next one may do, after a pause that keeps
                // a listener that stays readable from spinning.
                Err(_) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    break;
                }
            }
        }
    }
}

/// Stack of a connection's thread: it reads one request, waits and writes one line.
const CONNECTION_STACK: usize = 256 * 1024;

/// One accepted connection: in at the door, or `busy` at once.
fn admit(stream: UnixStream, shared: &Arc<Shared>) {
    // Accepted sockets do not inherit the listener's O_NONBLOCK on Linux; made sure.
    let _ = stream.set_nonblocking(false);
    let peer = Peer::of(&stream).unwrap_or(Peer {
        pid: 0,
        uid: u32::MAX,
        pod: None,
    });
    let entry = if shared.stats.stuck.load(Ordering::SeqCst) >= MAX_STUCK {
        Err(could_not("has too many judgements stuck"))
    } else {
        shared
            .door
            .enter(&peer.share())
            .map_err(|_| "busy".to_owned())
    };
    let entry = match entry {
        Ok(entry) => entry,
        Err(answer) => {
            // A fresh socket's buffer takes one line without blocking.
            log(&peer, b"-", &answer);
            shared.stats.count(&answer);
            let _ = stream.set_write_timeout(Some(TIMEOUT));
            let _ = (&stream).write_all(format!("{answer}\n").as_bytes());
            return;
        }
    };
    shared
        .stats
        .in_flight
        .store(shared.door.held(), Ordering::SeqCst);
    let shared = shared.clone();
    // Without a thread (resources exhausted) the connection is dropped unanswered:
    // the client, without an answer, skips the target.
    let _ = std::thread::Builder::new()
        .stack_size(CONNECTION_STACK)
        .spawn(move || {
            let (host, answer) = answer(&stream, &peer, &shared, &entry);
            drop(entry);
            shared
                .stats
                .in_flight
                .store(shared.door.held(), Ordering::SeqCst);
            // Logged before the client can act on the answer; what the node holds at a
            // path that is not the pod's directory is logged, never answered.
            let logged = match &answer.on_the_node {
                Some(detail) => format!("{} [on the node: {detail}]", answer.line),
                None => answer.line.clone(),
            };
            log(&peer, host.as_deref().unwrap_or(b"-"), &logged);
            if !answer.report {
                shared.stats.count(&answer.line);
            }
            let _ = stream.set_write_timeout(Some(TIMEOUT));
            let _ = (&stream).write_all(format!("{}\n", answer.line).as_bytes());
        });
}

fn log(peer: &Peer, host: &[u8], answer: &str) {
    eprintln!(
        "prestop-clean node-agent: {}: {}: {answer}",
        peer.describe(),
        escape(host)
    );
}

/// The host path asked about (when the request was readable) and the answer line.
fn answer(
    stream: &UnixStream,
    peer: &Peer,
    shared: &Arc<Shared>,
    entry: &super::queue::Entry,
) -> (Option<Vec<u8>>, Answer) {
    let (host, ending, fd) = match read_request(stream) {
        Err(why) => return (None, Answer::plain(format!("refused: {why}"))),
        Ok(Incoming::Question { host, ending, fd }) => (host, ending, fd),
        Ok(Incoming::Report { outcome, line }) => {
            return (None, report_answer(peer, shared, outcome, &line))
        }
        Ok(Incoming::Grace) => return (None, grace_answer(peer, shared)),
    };
    // In the pod's queue, the pods in turn; a request that waited too long to be judged
    // within the cleaner's patience is told `busy`, and asks again.
    let Some(_turn) = entry.turn(QUEUE_PATIENCE) else {
        return (Some(host), Answer::plain("busy".to_owned()));
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
            let verdict = judge(&host, fd.as_fd(), &peer, &node).and_then(|()| {
                // No process uses it: does a pod that has none at the instant?
                match &shared.pod_ending {
                    Some(source) => source
                        .others_reach(peer.pod.as_deref(), &host)
                        .map_err(|busy| busy_answer(&shown(&host), busy)),
                    None => Ok(()),
                }
            });
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
            Answer::plain(could_not("cannot start a thread")),
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
            report: false,
        },
        None => Answer::plain(could_not(format_args!(
            "could not judge {} within {} s",
            shown(&host),
            JUDGE_DEADLINE.as_secs()
        ))),
    };
    (Some(host), answer)
}
