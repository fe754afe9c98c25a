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
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use rustix::fs::{Mode, OFlags};

use super::args::AgentArgs;
use super::ending::PodEnding;
use super::http;
use super::judge::{busy_answer, judge, Node};
use super::limits::{JUDGE_DEADLINE, MAX_IN_FLIGHT, MAX_STUCK, PLACES_PER_PEER};
use super::peer::Peer;
use super::protocol::{shown, TIMEOUT};
use super::socket::{listen, read_request};
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
