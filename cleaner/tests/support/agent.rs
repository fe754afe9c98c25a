//! The real node agent (`prestop-clean node-agent`) in the background, for tests whose
//! targets lie under their own path on a filesystem mounted whole (the test machine's `/`,
//! `/dev/shm`): on a real node such a prefix is cleaned only with the agent's word.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{wait_until, BIN};

/// A running agent with `--host-root /`; stopped (SIGKILL, reaped) when dropped.
pub struct NodeAgent {
    child: Child,
    pub socket: PathBuf,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl NodeAgent {
    /// Starts an agent for the whole test machine (`--host-root /`, no `--allow`) and
    /// waits until it serves.
    pub fn start() -> NodeAgent {
        NodeAgent::start_with(Path::new("/"), &[])
    }

    pub fn start_with(host_root: &Path, allow: &[&str]) -> NodeAgent {
        let allow: Vec<&str> = allow
            .iter()
            .flat_map(|prefix| ["--allow", prefix])
            .collect();
        NodeAgent::start_with_args(host_root, &allow)
    }

    /// An agent with `--host-root HOST_ROOT` and these further arguments.
    pub fn start_with_args(host_root: &Path, args: &[&str]) -> NodeAgent {
        let dir = tempfile::Builder::new()
            .prefix("prestop-agent-")
            .tempdir()
            .expect("tempdir");
        // Any uid connects (the tests run the cleaner as nobody too).
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        let socket = dir.path().join("run/agent.sock");
        let log = dir.path().join("agent.log");
        let mut command = Command::new(BIN);
        command
            .arg("node-agent")
            .arg("--host-root")
            .arg(host_root)
            .arg("--socket")
            .arg(&socket);
        command.args(args);
        let child = command
            .stdin(Stdio::null())
            .stderr(fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn node-agent");
        let agent = NodeAgent {
            child,
            socket,
            log,
            _dir: dir,
        };
        let serving = wait_until(Duration::from_secs(10), || agent.log().contains("serving"));
        assert!(serving, "the node agent did not start: {}", agent.log());
        agent
    }

    /// `--node-agent SOCKET`, to follow the subcommand.
    pub fn args(&self) -> [OsString; 2] {
        ["--node-agent".into(), self.socket.clone().into_os_string()]
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for NodeAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Shell functions for scripts that run in a mount namespace (`$BIN` set):
/// `start_agent SOCKET [ARGS...]` starts `$BIN node-agent --host-root ${HOST_ROOT:-/}
/// --socket SOCKET ARGS...` in the background, logging to `SOCKET.log`, waits until it serves (10 s at
/// most) and stops it when the script exits, then appends its log to the script's stderr;
/// `$AGENT` is its pid.
///
/// The log is emptied before the agent starts: a script that runs twice on one directory (once
/// per kind of namespace) would otherwise find the first agent's `serving` line, go on
/// before the second agent listens, and meet the first one's stale socket
/// (ECONNREFUSED; CI saw it once under load, issue 32).
pub const START_AGENT_SH: &str = r#"
start_agent() {
  sock=$1; shift
  : >"$sock.log"
  "$BIN" node-agent --host-root "${HOST_ROOT:-/}" --socket "$sock" "$@" 2>>"$sock.log" &
  AGENT=$!
  AGENTS="${AGENTS:-} $AGENT"
  AGENT_LOGS="${AGENT_LOGS:-} $sock.log"
  # The agents' logs end the script's stderr: what the node holds where a pod's directory
  # is not is said there (the operator's view), never to the pod.
  trap 'kill $AGENTS 2>/dev/null || true; wait 2>/dev/null || true; for l in $AGENT_LOGS; do cat "$l" >&2; done' EXIT
  tries=0
  until grep -q serving "$sock.log" 2>/dev/null; do
    tries=$((tries + 1))
    [ $tries -lt 1000 ] || { echo "the node agent did not start" >&2; cat "$sock.log" >&2; exit 1; }
    sleep 0.01
  done
}
"#;
