//! `prestop-clean`: the preStop hook, the cleanup sidecar, the installer and the node
//! agent ([`prestop_clean::agent`]) in one static program. The command line is [`prestop_clean::argv`]; the cleaning is
//! [`prestop_clean::clean_target`], which checks each target's identity on the node first.
//!
//! The walk uses as many workers as the CPUs the container may use, or
//! `PRESTOP_CLEAN_JOBS` (1 to 256; 1 is the sequential walk).
//!
//! With `--deadline S`, the cleanup stops itself `S` seconds after the hook started (or
//! after the sidecar's signal) and prints one line, `cut off by its deadline …`, with the
//! entries and bytes removed, the seconds, and the targets left for the node reaper
//! ([`deadline`]); a cleanup that ends in time prints what it always printed.
//!
//! Exit status: `hook` exits with the user's handler's (or script's) status when it is
//! non-zero, else 1 when it was cut off by its deadline, anything survived or a target was skipped (a target without
//! `--host`, or whose mount is not the expected host directory, is skipped), else 0; `sidecar`
//! exits 0 after cleaning; usage errors exit 2 before anything runs. `empty` (the node
//! reaper's walk as a gone pod's user) exits 2 without touching anything when it cannot
//! become exactly that user, else 0 when the directory is empty or missing, else 1.

mod deadline;
mod install;

use std::ffi::OsString;
use std::io::{self, Write as _};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use deadline::Deadline;
use prestop_clean::agent::reporting::{outcome_of, send_report, Outcome};
use prestop_clean::agent::{
    ask_grace, sidecar_deadline, AgentArgs, GraceLeft, Question, DEADLINE_MARGIN, NODE_AGENT,
};
use prestop_clean::argv::{
    Before, EmptyArgs, HookArgs, SidecarArgs, Target, EMPTY, HOOK, INSTALL, SIDECAR,
};
use prestop_clean::as_user::become_user;
use prestop_clean::{
    check_target, clean_target_with_progress, default_jobs, empty_directory_with_progress, escape,
    jobs_from_env, walks_stopped, wire,
};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

const USAGE: &str = "usage: prestop-clean hook [--deadline S] [--node-agent SOCKET] [--sleep N] \
[--target PATH [--host HOSTPATH] [--whole-filesystem]]... [--shell SHELL --script TEXT] [-- ARGV...]
       prestop-clean sidecar [--deadline S] [--node-agent SOCKET] [--restartable] \
[--target PATH [--host HOSTPATH] [--whole-filesystem]]...
       prestop-clean install DIR
       prestop-clean node-agent --host-root DIR --socket PATH [--allow PREFIX]...
       prestop-clean empty --uid U --gid G [--groups G1,G2,...] PATH";

fn main() -> ExitCode {
    let args: Result<Vec<String>, OsString> = std::env::args_os()
        .skip(1)
        .map(OsString::into_string)
        .collect();
    let status = match args {
        Ok(args) => dispatch(&args),
        Err(arg) => usage(&format!("argument {:?} is not UTF-8", arg)),
    };
    ExitCode::from(status)
}

fn dispatch(args: &[String]) -> u8 {
    if matches!(args.first().map(String::as_str), Some(HOOK | SIDECAR)) {
        // The workers of the walk (PRESTOP_CLEAN_JOBS): a bad value runs nothing.
        if let Err(why) = jobs_from_env() {
            return usage(&format!("{why}; nothing was run"));
        }
    }
    match args.first().map(String::as_str) {
        Some(HOOK) => match HookArgs::parse(args) {
            Ok(hook_args) => checked(&hook_args.targets).unwrap_or_else(|| hook(&hook_args)),
            Err(err) => usage(&err.0),
        },
        Some(SIDECAR) => match SidecarArgs::parse(args) {
            Ok(sidecar_args) => {
                checked(&sidecar_args.targets).unwrap_or_else(|| sidecar(&sidecar_args))
            }
            Err(err) => usage(&err.0),
        },
        Some(NODE_AGENT) => match AgentArgs::parse(&args[1..]) {
            Ok(agent_args) => prestop_clean::agent::serve(&agent_args),
            Err(why) => usage(&why),
        },
        Some(INSTALL) => match &args[1..] {
            [dir] => install::install(dir),
            _ => usage("install takes exactly one directory"),
        },
        Some(EMPTY) => match EmptyArgs::parse(args) {
            Ok(empty_args) => empty(&empty_args),
            Err(err) => usage(&err.0),
        },
        Some(other) => usage(&format!("unknown subcommand {other:?}")),
        None => usage("missing subcommand"),
    }
}

fn usage(message: &str) -> u8 {
    eprintln!("prestop-clean: {message}\n{USAGE}");
    2
}

/// Refuses the whole command line (status 2) when a target is not absolute and
/// normalized: the webhook never renders one, so it is a bug or tampering.
fn checked(targets: &[Target]) -> Option<u8> {
    for target in targets {
        if let Err(why) = check_target(&target.path) {
            return Some(usage(&format!(
                "target {:?} refused: {why}; nothing was run",
                escape(target.path.as_bytes())
            )));
        }
    }
    None
}

fn hook(args: &HookArgs) -> u8 {
    // The deadline counts from here: the user's handler and script run inside it.
    let deadline = args.deadline.map(|seconds| {
        Deadline::arm(
            Instant::now(),
            Duration::from_secs(seconds),
            &args.targets,
            args.node_agent.as_deref(),
        )
    });
    let mut status = 0;
    match &args.before {
        Before::Nothing => {}
        Before::Sleep(seconds) => std::thread::sleep(Duration::from_secs(*seconds)),
        Before::Exec(argv) => {
            if let Some((program, rest)) = argv.split_first() {
                status = run(Command::new(program).args(rest), program);
            }
        }
    }
    if let Some(script) = &args.script {
        let script_status = run(
            Command::new(&script.shell).arg("-c").arg(&script.text),
            &script.shell,
        );
        if status == 0 {
            status = script_status;
        }
    }
    let question = Question {
        socket: args.node_agent.as_deref(),
        pod_ending: false,
    };
    let clean = clean_all(&args.targets, question, deadline);
    match status {
        0 if clean => 0,
        0 => 1,
        status => status,
    }
}

/// Runs a child to completion; its status as a shell reports it (128 + signal, 127 when
/// it cannot be found, 126 when it cannot be run).
fn run(command: &mut Command, program: &str) -> u8 {
    match command.status() {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
            (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(1),
            (None, None) => 1,
        },
        Err(err) => {
            eprintln!(
                "prestop-clean: cannot run {}: {err}",
                escape(program.as_bytes())
            );
            if err.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            }
        }
    }
}

/// Empties every target, one summary line each on stderr; true when all are clean. Past
/// the deadline, nothing more is started and the cut-off line replaces the summary of
/// the target it stopped. With a node agent, the lines go to it too ([`report`]).
fn clean_all(targets: &[Target], question: Question<'_>, deadline: Option<&Deadline>) -> bool {
    let mut clean = true;
    let (mut outcome, mut lines) = (Outcome::Emptied, Vec::new());
    for (index, target) in targets.iter().enumerate() {
        if walks_stopped() {
            break;
        }
        let report = match deadline {
            Some(deadline) => {
                deadline.starting(index);
                let progress = |removed, bytes| deadline.progress(removed, bytes);
                let report =
                    clean_target_with_progress(target, question, default_jobs(), &progress);
                deadline.done(&report);
                report
            }
            None => clean_target_with_progress(target, question, default_jobs(), &|_, _| {}),
        };
        clean &= report.is_clean();
        if report.is_clean() || !walks_stopped() {
            let line = report.summary();
            eprintln!("prestop-clean: {line}");
            outcome = outcome.worse(outcome_of(&report));
            lines.push(line);
        }
    }
    let cut_off = deadline.is_some_and(Deadline::report_if_cut_off);
    if cut_off {
        // The deadline's line first: it is what the Event's first kilobyte must say.
        outcome = Outcome::CutOff;
        if let Some(line) = deadline.and_then(Deadline::line) {
            lines.insert(0, line);
        }
    }
    if let Some(socket) = question.socket {
        report(socket, outcome, &lines.join(" | "));
    }
    !cut_off && clean
}

/// Hands the cleanup's lines to the node agent, which records them as an Event on this
/// pod (issue 39: the kubelet's `FailedPreStopHook` no longer carries a hook's output).
/// Whatever happens, within less than a second, and nothing changes: not the exit
/// status, not the lines already printed.
fn report(socket: &str, outcome: Outcome, line: &str) {
    if line.is_empty() {
        return;
    }
    match send_report(socket, outcome, line) {
        Ok(answer) if answer == "recorded" || answer.starts_with("logged: ") => {}
        Ok(answer) => eprintln!(
            "prestop-clean: the node agent did not record this report: {}",
            escape(answer.as_bytes())
        ),
        Err(why) => eprintln!("prestop-clean: could not report to the node agent: {why}"),
    }
}

/// Idles until SIGTERM or SIGINT, then cleans and exits 0. The handlers matter as PID 1,
/// where a signal without one is dropped.
fn sidecar(args: &SidecarArgs) -> u8 {
    let mut signals = match Signals::new([SIGTERM, SIGINT]) {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("prestop-clean: cannot install signal handlers: {err}");
            return 1;
        }
    };
    let targets: Vec<String> = args
        .targets
        .iter()
        .map(|t| escape(t.path.as_bytes()))
        .collect();
    eprintln!(
        "prestop-clean: sidecar ready: cleaning {} on SIGTERM",
        if targets.is_empty() {
            "nothing".to_owned()
        } else {
            targets.join(", ")
        }
    );
    let signal = signals.forever().next();
    eprintln!(
        "prestop-clean: {} received, cleaning",
        if signal == Some(SIGINT) {
            "SIGINT"
        } else {
            "SIGTERM"
        }
    );
    // The sidecar's deadline counts from the signal, and is shortened to the kubelet's
    // kill when the node agent says it comes sooner (issue 39).
    let signalled = Instant::now();
    let deadline = sidecar_deadline_after(args)
        .map(|after| Deadline::arm(signalled, after, &args.targets, args.node_agent.as_deref()));
    let question = Question {
        socket: args.node_agent.as_deref(),
        pod_ending: args.restartable,
    };
    clean_all(&args.targets, question, deadline);
    0
}

/// How long after its signal the sidecar stops itself: its `--deadline`, its share of the
/// grace period as the webhook planned it, or less when the node agent says the pod's
/// grace period ends sooner: the app containers used more of it, and the kubelet gives
/// the sidecar only what is left (at least 2 s). The agent's answer only ever shortens
/// it; without one the deadline stands, as before.
fn sidecar_deadline_after(args: &SidecarArgs) -> Option<Duration> {
    let own = args.deadline.map(Duration::from_secs);
    let left = match args.node_agent.as_deref().map(ask_grace) {
        None => None,
        Some(Ok(GraceLeft::EndsIn(left))) => Some(left),
        Some(Ok(GraceLeft::Unknown(why))) => {
            eprintln!("prestop-clean: the node agent cannot say when the pod's grace period ends ({why}): the deadline counts from the signal");
            None
        }
        Some(Err(why)) => {
            eprintln!("prestop-clean: no word from the node agent on the pod's grace period ({why}): the deadline counts from the signal");
            None
        }
    };
    let after = sidecar_deadline(own, left, DEADLINE_MARGIN);
    if let (Some(left), Some(after)) = (left, after) {
        if own.is_none_or(|own| after < own) {
            eprintln!(
                "prestop-clean: the pod's grace period ends in {:.1} s (the node agent says): stopping {:.1} s after the signal{}",
                left.as_secs_f64(),
                after.as_secs_f64(),
                own.map_or(String::new(), |own| format!(", not {} s", own.as_secs()))
            );
        }
    }
    after
}

/// The node reaper's walk: becomes the pod's user with no capability (before anything
/// else, while this is the only thread), then empties the directory, with the report
/// for the reaper on stdout ([`wire`]) and the summary line on stderr.
fn empty(args: &EmptyArgs) -> u8 {
    let path = escape(args.path.as_bytes());
    if let Err(why) = check_target(&args.path) {
        return usage(&format!("{path:?} refused: {why}; nothing was run"));
    }
    if let Err(why) = become_user(&args.user) {
        eprintln!("prestop-clean: will not empty {path}: cannot become the pod's user: {why}");
        return 2;
    }
    stop_when_the_reaper_says();
    let stdout = io::stdout();
    // A reaper that went away is no reason to stop emptying: write errors are ignored.
    // Each line is written under the lock: the walk's workers report progress too.
    let write = |text: &str| {
        let mut out = stdout.lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    };
    write(&format!("{}\n", wire::HEADER));
    // The workers are started after the drop: a new thread has its creator's identity.
    let report = empty_directory_with_progress(&args.path, default_jobs(), &|removed, bytes| {
        write(&wire::progress_line(removed, bytes));
    });
    write(&wire::encode(&report));
    eprintln!("prestop-clean: {}", report.summary());
    if report.is_clean() {
        0
    } else {
        1
    }
}

/// A pipe on stdin is the reaper's stop line: when it closes (the reaper found a user of
/// the directory mid-walk, or the reaper itself died), this process kills itself at once
/// with SIGKILL. The reaper needs no capability to stop a walk that runs as another uid.
/// Started after the drop to the pod's user, so this second thread never holds other
/// credentials than the walk's.
fn stop_when_the_reaper_says() {
    let is_pipe = rustix::fs::fstat(io::stdin())
        .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_fifo());
    if !is_pipe {
        return;
    }
    std::thread::spawn(|| {
        let mut byte = [0u8; 1];
        // Any byte, the end, or an error: stop.
        let _ = io::Read::read(&mut io::stdin(), &mut byte);
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        std::process::abort();
    });
}
