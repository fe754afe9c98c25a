//! `prestop-injector node-agent`: the node agent of `prestop-clean node-agent`
//! (`cleaner/src/agent`), which also knows whether the asking pod is ending (issue 31,
//! sandbox recreation): it asks the API server, which the static cleaner program cannot.
//!
//! The agent's own arguments follow unchanged (`--host-root`, `--socket`, `--allow`,
//! `--metrics-listen`); this adds only the node's name, for the field selector. A pod
//! is named by the kernel (its cgroup's pod uid), never by the request: the agent
//! watches the pods bound to its node ([`NodePods`], one watch, no LIST per question) and
//! finds that uid among them ([`crate::node::ending::decide`]).
//!
//! It also records each cleanup's report as an Event on the pod the kernel names
//! ([`events`], issue 39).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use prestop_clean::agent::{serve_with, AgentArgs, GraceLeft, Outcome, PodEnding, Told};

pub mod events;
pub mod others;

use crate::config::Config;
use crate::node::ending;
use crate::node::pods::NodePods;
use crate::reaper::in_use::Busy;
use others::Others;

/// How long one question may wait for the picture to show the pod ending: the cleaner
/// waits [`prestop_clean::agent::TIMEOUT`] (5 s) for the whole answer, and the judgement
/// before it may take up to 3 s. The kubelet writes a container's exit (or its
/// `DisruptionTarget` condition) to the API server a moment after the SIGTERM that asks.
const PATIENCE: Duration = Duration::from_millis(1500);
/// How long a question of time waits for the picture to show the deletion: the sidecar
/// gives the whole exchange [`prestop_clean::agent::GRACE_PATIENCE`] (500 ms).
const GRACE_PATIENCE: Duration = Duration::from_millis(300);
/// How long the agent waits at start for its first complete list before it says, in its
/// log, that it has none.
const FIRST_SYNC: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct NodeAgentArgs {
    /// This node's name (the downward API's spec.nodeName): the agent looks among the
    /// pods bound to it.
    #[arg(long, env = "PRESTOP_INJECTOR_NODE_NAME")]
    pub node_name: String,
    /// The agent's arguments, as `prestop-clean node-agent` takes them: --host-root DIR
    /// --socket PATH [--allow PREFIX]... [--metrics-listen ADDR:PORT].
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub agent: Vec<String>,
}

/// Runs the agent until SIGTERM or SIGINT.
pub fn run(args: NodeAgentArgs) -> anyhow::Result<ExitCode> {
    let agent = AgentArgs::parse(&args.agent).map_err(|why| anyhow!("node-agent: {why}"))?;
    if args.node_name.is_empty() {
        return Err(anyhow!(
            "node-agent: --node-name (or PRESTOP_INJECTOR_NODE_NAME) is empty"
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("api")
        .enable_all()
        .build()
        .context("starting the API client's runtime")?;
    let client = runtime
        .block_on(kube::Client::try_default())
        .context("node-agent: connecting to the API server (in-cluster config or kubeconfig)")?;
    let pods = NodePods::new();
    runtime.spawn(pods.clone().follow(client.clone(), args.node_name.clone()));
    let (events, recording) = events::PodEvents::new(client.clone(), pods.clone(), &args.node_name);
    runtime.spawn(recording);
    let others = Others {
        pods: pods.clone(),
        own: others::own_pod(),
        node_root: agent.host_root.clone().into(),
        config: Config {
            allowed_host_path_prefixes: agent.allow.clone(),
            ..Config::default()
        },
        client: Some(client),
        runtime: runtime.handle().clone(),
        bound: Default::default(),
    };
    let source = Arc::new(FromWatch {
        _runtime: runtime,
        pods,
        others,
        events,
        node: args.node_name,
    });
    // Beside the serving, which needs no API server for its other answers.
    let asking = source.clone();
    std::thread::spawn(move || asking.say_whether_it_is_in_sync());
    Ok(ExitCode::from(serve_with(&agent, Some(source))))
}

/// The pods bound to this node, as the agent's watch shows them.
struct FromWatch {
    /// Runs the watch; kept for as long as the agent serves.
    _runtime: tokio::runtime::Runtime,
    pods: NodePods,
    others: Others,
    events: events::PodEvents,
    node: String,
}

impl FromWatch {
    /// Whether the first list completed in time, so that a missing RBAC rule or an
    /// unreachable API server is in the log when the agent starts, not first in a
    /// cleanup's `not-ending` line. The agent serves either way: the identity and in-use
    /// answers need no API server.
    fn say_whether_it_is_in_sync(&self) {
        match self.pods.wait_for(FIRST_SYNC, |picture| Ok(picture.len())) {
            Ok(count) => eprintln!(
                "prestop-injector node-agent: the API server lists the pods of node {} ({count} now); \
                 watching them",
                self.node
            ),
            Err(why) => eprintln!(
                "prestop-injector node-agent: warning: no list of the pods of node {} within {} s \
                 ({why}): a pod that can restart in place is not cleaned until there is one (it \
                 needs the API server and RBAC list and watch on pods)",
                self.node,
                FIRST_SYNC.as_secs()
            ),
        }
    }
}

impl PodEnding for FromWatch {
    fn ending(&self, uid: &str) -> Result<(), String> {
        self.pods.wait_for(PATIENCE, |picture| {
            let pod = picture.pod(uid).map(|pod| pod.as_ref());
            ending::decide(pod, uid, &self.node, k8s_openapi::chrono::Utc::now())
        })
    }

    fn grace_left(&self, uid: &str) -> GraceLeft {
        // The kubelet acts on the deletion it sees in its own watch; this one may see it a
        // moment later.
        let answer = self.pods.wait_for(GRACE_PATIENCE, |picture| {
            let pod = picture.pod(uid).map(|pod| pod.as_ref());
            ending::grace_left(pod, uid, &self.node, k8s_openapi::chrono::Utc::now())
        });
        match answer {
            Ok(left) => GraceLeft::EndsIn(left),
            Err(why) => GraceLeft::Unknown(why),
        }
    }

    fn others_reach(&self, asker: Option<&str>, host: &[u8]) -> Result<(), Busy> {
        let host = std::str::from_utf8(host).map_err(|_| {
            Busy::Unknown("the host path is not UTF-8, as no pod spec's is".to_owned())
        })?;
        self.others.check(asker, host)
    }

    fn report(&self, pod: Option<&str>, outcome: Outcome, line: &str) -> Told {
        self.events.report(pod, outcome, line)
    }

    fn describe(&self) -> String {
        format!("the API server's pods of node {}, in one watch", self.node)
    }
}
