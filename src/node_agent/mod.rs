//! `prestop-injector node-agent`: the node agent of `prestop-clean node-agent`
//! (`cleaner/src/agent`), which also knows whether the asking pod is ending (issue 31,
//! sandbox recreation): it asks the API server, which the static cleaner program cannot.
//!
//! The agent's own arguments follow unchanged (`--host-root`, `--socket`, `--allow`,
//! `--metrics-listen`); this adds only the node's name, for the field selector. A pod
//! is named by the kernel (its cgroup's pod uid), never by the request: the agent lists
//! the pods bound to its node and finds that uid among them ([`ending::decide`]).

pub mod ending;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use prestop_clean::agent::{serve_with, AgentArgs, PodEnding};

/// How long one question may take: the cleaner waits [`prestop_clean::agent::TIMEOUT`]
/// (5 s) for the whole answer, and the judgement before it may take up to 3 s.
const PATIENCE: Duration = Duration::from_millis(1500);
/// Between two looks: the kubelet writes a container's exit to the API server a moment
/// after the container ends, and the sidecar's SIGTERM may come first.
const POLL: Duration = Duration::from_millis(250);

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
    let pods = FromApi {
        runtime,
        client,
        node: args.node_name,
    };
    let pods = Arc::new(pods);
    // Beside the serving, which needs no API server for its other answers.
    let asking = pods.clone();
    std::thread::spawn(move || asking.say_whether_it_can_list());
    Ok(ExitCode::from(serve_with(&agent, Some(pods))))
}

/// The pods bound to this node, as the API server lists them.
struct FromApi {
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    node: String,
}

impl FromApi {
    /// One list at start-up, so that a missing RBAC rule or an unreachable API server is
    /// in the log when the agent starts, not first in a cleanup's `not-ending` line. The
    /// agent serves either way: the identity and in-use answers need no API server.
    fn say_whether_it_can_list(&self) {
        let api: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={}", self.node);
        let list = ListParams::default().fields(&selector).limit(1);
        // The timer is made inside the runtime, which it needs.
        let listed = self.runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), api.list(&list)).await
        });
        match listed {
            Ok(Ok(_)) => eprintln!(
                "prestop-injector node-agent: the API server lists the pods of node {}",
                self.node
            ),
            Ok(Err(err)) => eprintln!(
                "prestop-injector node-agent: warning: cannot list the pods of node {} ({err}): \
                 a pod that can restart in place is not cleaned until it can (it needs the API server \
                 and RBAC list on pods)",
                self.node
            ),
            Err(_) => eprintln!(
                "prestop-injector node-agent: warning: the API server did not list the pods of \
                 node {} within 10 s: a pod that can restart in place is not cleaned until it does",
                self.node
            ),
        }
    }

    /// The pod of `uid` among this node's pods (`None`: not there), read from etcd
    /// (no `resourceVersion`: never an older cache than what the kubelet acted on).
    async fn find(&self, uid: &str) -> Result<Option<Pod>, String> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("spec.nodeName={}", self.node);
        let list = api
            .list(&ListParams::default().fields(&selector))
            .await
            .map_err(|err| format!("the API server did not list this node's pods: {err}"))?;
        Ok(list
            .items
            .into_iter()
            .find(|pod| pod.metadata.uid.as_deref() == Some(uid)))
    }
}

impl PodEnding for FromApi {
    fn ending(&self, uid: &str) -> Result<(), String> {
        self.runtime.block_on(async {
            let give_up = Instant::now() + PATIENCE;
            loop {
                let left = give_up.saturating_duration_since(Instant::now());
                let why = match tokio::time::timeout(left, self.find(uid)).await {
                    Ok(Ok(pod)) => match ending::decide(pod.as_ref(), uid, &self.node) {
                        Ok(()) => return Ok(()),
                        Err(why) => why,
                    },
                    Ok(Err(why)) => why,
                    Err(_) => format!(
                        "the API server did not list this node's pods within {:.1} s",
                        PATIENCE.as_secs_f64()
                    ),
                };
                if Instant::now() + POLL >= give_up {
                    return Err(why);
                }
                tokio::time::sleep(POLL).await;
            }
        })
    }

    fn describe(&self) -> String {
        format!("the API server's pods of node {}", self.node)
    }
}
