//! docs/CONFIG.md#the-node-agent: giving each cleaner program the node agent's socket.
//!
//! The node agent (`prestop-clean node-agent`, a container of the reaper DaemonSet) sees
//! the node's `/` and answers, on a unix socket, whether the directory a cleaner opened
//! *is* the node's directory at the expected host path. With `nodeAgent.hostDirectory`
//! set, every app container that gets our program's exec hook, and our program sidecar,
//! mounts that host directory **read-only** at [`MOUNT_PATH`] and is given
//! `--node-agent` [`SOCKET`]. Nothing else of the pod changes.
//!
//! Contract:
//! - Without the key nothing of this is injected, and what an earlier pass injected is
//!   taken back out (the hook and sidecar argv lose the option, the mounts and the volume
//!   go). The shell forms (`cleaner.mode: shell`) cannot ask the agent: never given it.
//! - One `hostPath` volume per pod (`type: DirectoryOrCreate`: a node where the agent has
//!   not started yet still starts the pod, and its cleaner falls back to the strict rule),
//!   named [`VOLUME_NAME`], else `-2`, `-3`, …: ours is recognised by its mount at
//!   [`MOUNT_PATH`] in a container whose program we told to ask the agent there, never by
//!   its name, so a user's volume that only shares the name (or a user's mount at that
//!   path) is never touched.
//! - A container with a mount of its own at, above or below [`MOUNT_PATH`] gets neither
//!   the mount nor the option: the socket there would be whatever that mount shows, and
//!   its owner could answer "yes". Its cleaner keeps the strict rule.
//! - The volume is never a cleanup target nor in the way of one: the mount is read-only
//!   (so `auto` does not take it), and the config refuses a host directory that meets an
//!   `allowedHostPathPrefixes` entry or is or holds a protected directory
//!   ([`crate::policy::node_agent_directory_refusal`]).

use super::delivery::overlaps;
use super::named::{free_name, list, name_of, update_named, update_our_mounts};
use crate::config::Config;
use crate::json::{json, Value};
use crate::mutation::hook::ours::is_our_sidecar;
use crate::mutation::hook::{sidecar_targets, Hook, IMAGE_PROGRAM, PROGRAM};

/// Where the agent's socket directory is mounted in a container: beside the program's
/// [`crate::mutation::hook::PROGRAM_DIR`], not inside it (that one is an `emptyDir`).
pub const MOUNT_PATH: &str = "/.prestop-injector-node";
/// The agent's socket, as the cleaner inside the container sees it.
pub const SOCKET: &str = "/.prestop-injector-node/agent.sock";
/// The volume's name (a suffix `-2`, `-3`, … when the pod has a volume of that name).
pub const VOLUME_NAME: &str = "prestop-injector-node-agent";

/// Our node agent volume in one pod spec, and the configured host directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAgent {
    /// Our volume's name: the one our containers mount, or the first free one.
    pub volume: String,
    /// `nodeAgent.hostDirectory`; `None` when the agent is not configured.
    host_directory: Option<String>,
}

impl NodeAgent {
    /// Reads the spec as it came in. Ours is the volume mounted at [`MOUNT_PATH`] by a
    /// container whose program we told to ask the agent there (its argv proves the mount
    /// ours), when the pod declares it as a hostPath or not at all.
    pub fn of(spec: &Value, config: &Config) -> NodeAgent {
        let volumes = list(spec, "volumes");
        let ours = list(spec, "containers")
            .iter()
            .filter(|c| asks_agent(program_argv(c, "/lifecycle/preStop/exec/command")))
            .chain(
                list(spec, "initContainers")
                    .iter()
                    .filter(|c| is_our_sidecar(c) && asks_agent(program_argv(c, "/command"))),
            )
            .flat_map(|c| list(c, "volumeMounts"))
            .filter(|m| m.get("mountPath").and_then(Value::as_str) == Some(MOUNT_PATH))
            .filter_map(name_of)
            .find(|name| {
                volumes
                    .iter()
                    .filter(|v| name_of(v) == Some(name))
                    .all(|v| v.get("hostPath").is_some())
            })
            .map(str::to_owned);
        let volume = ours.unwrap_or_else(|| {
            let taken: Vec<&str> = volumes.iter().filter_map(name_of).collect();
            free_name(VOLUME_NAME, &taken)
        });
        NodeAgent {
            volume,
            host_directory: config.node_agent.as_ref().map(|a| a.host_directory.clone()),
        }
    }

    fn is_our_mount(&self, mount: &Value) -> bool {
        name_of(mount) == Some(self.volume.as_str())
            && mount.get("mountPath").and_then(Value::as_str) == Some(MOUNT_PATH)
    }

    /// Our read-only mount of the agent's directory.
    pub fn mount(&self) -> Value {
        json!({"name": self.volume, "mountPath": MOUNT_PATH, "readOnly": true})
    }

    /// The socket to give a cleaner whose container mounts `mounts` (ours aside): `None`
    /// when the agent is not configured, or one of those mounts is at, above or below
    /// [`MOUNT_PATH`] or uses our volume's name elsewhere.
    pub fn socket_for(&self, mounts: &[Value]) -> Option<&'static str> {
        self.host_directory.as_ref()?;
        let in_the_way = mounts.iter().filter(|m| !self.is_our_mount(m)).any(|m| {
            name_of(m) == Some(self.volume.as_str())
                || m.get("mountPath")
                    .and_then(Value::as_str)
                    .is_some_and(|path| overlaps(path, MOUNT_PATH))
        });
        (!in_the_way).then_some(SOCKET)
    }

    /// Makes `spec` match: the volume when any app container in `needs` (one entry per
    /// app container) or the sidecar asks the agent, and our mount in exactly those app
    /// containers; otherwise none of it. The sidecar's own mount is the sidecar's
    /// (`inject::sidecar`).
    pub fn apply(&self, spec: &mut Value, needs: &[bool], sidecar_asks: bool) {
        let wanted = needs.iter().any(|&need| need) || sidecar_asks;
        let volume = self.host_directory.as_ref().filter(|_| wanted).map(|path| {
            json!({"name": self.volume, "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
        });
        update_named(
            spec,
            "volumes",
            &self.volume,
            volume.as_ref().and_then(Value::as_object),
        );
        let mount = self.mount();
        update_our_mounts(spec, &self.volume, &mount, needs, &|m| self.is_our_mount(m));
    }
}

/// The argv at `pointer` of a container, when it is all strings.
fn program_argv(container: &Value, pointer: &str) -> Option<Vec<String>> {
    container
        .pointer(pointer)
        .and_then(Value::as_array)
        .and_then(|argv| argv.iter().map(|a| a.as_str().map(str::to_owned)).collect())
}

/// Whether `argv` is our program's (the hook's or the sidecar's) told to ask the agent at
/// [`SOCKET`]: `[program, subcommand, (--deadline S)?, "--node-agent", SOCKET, …]`,
/// recognised whole.
fn asks_agent(argv: Option<Vec<String>>) -> bool {
    argv.is_some_and(|argv| {
        // `--deadline S` comes first when present (prestop_clean::argv).
        let at = if argv.get(2).is_some_and(|a| a == "--deadline") {
            4
        } else {
            2
        };
        let told =
            argv.get(at..at + 2) == Some(&["--node-agent".to_owned(), SOCKET.to_owned()][..]);
        let ours = match argv.first().map(String::as_str) {
            Some(PROGRAM) => Hook::from_argv(&argv).is_some(),
            Some(IMAGE_PROGRAM) => sidecar_targets(&argv).is_some(),
            _ => false,
        };
        told && ours
    })
}
