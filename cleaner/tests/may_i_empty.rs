//! "May I empty this now?" (issue 31): the node agent answers `same` only when, besides
//! being the node's directory, no other container on the node reaches it — by any name,
//! a directory inside it or one above it. Decided from every process's mountinfo by
//! identity (device and the directory of that filesystem), the reaper's own check
//! (`prestop_clean::in_use`); the asking container is known by its mount ids.
//!
//! Each test is a real node (support/node.rs: a mount namespace chrooted into a tmpfs),
//! the real agent, real pods (nested mount namespaces with the kubelet's bind mounts) and
//! the real hook. Every "other container" is a process that keeps running in its own
//! mount namespace while the hook asks.

mod support;

use support::{stderr, Sandbox};

/// The script's stdout and stderr, or `None` when namespaces are unavailable (skipped).
fn node_run(sandbox: &Sandbox, script: &str) -> Option<(String, String)> {
    let output = support::node::on_node(sandbox.dir.path(), script)?;
    Some((
        String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr(&output),
    ))
}

/// Shell helpers: `other NAME SOURCE [ro]` starts a container: a process in a mount
/// namespace of its own, chrooted into a root filesystem of its own (a tmpfs with the
/// machine's tools bound in), with the node's `SOURCE` bind-mounted at `/NAME` (the
/// kubelet follows symlinks on the node), running until `gone NAME`. The agent serves
/// `--allow /mnt/scratch`; `hook NAME` runs the injected hook of a pod whose container has
/// the node's /mnt/scratch/job at /ctr/data.
const SETUP: &str = r#"
mkdir -p /run/others
other() {
  name=$1 source=$2 mode=${3:-rw}
  pod sh -c 'set -e; r=/run/roots/$1; mkdir -p "$r"; mount -t tmpfs "rootfs-$1" "$r"
    for d in bin sbin lib lib32 lib64 libx32 usr; do
      if [ -L "/$d" ]; then cp -P "/$d" "$r/$d"
      elif [ -d "/$d" ]; then mkdir "$r/$d"; mount --rbind "/$d" "$r/$d"; fi
    done
    mkdir -p "$r/$1"; mount --bind "$2" "$r/$1"
    if [ "$3" = ro ]; then mount -o remount,bind,ro "$r/$1"; fi
    echo $$ > "/run/others/$1.up"; exec chroot "$r" sleep 60' sh "$name" "$source" "$mode" &
  until [ -s "/run/others/$name.up" ]; do sleep 0.02; done
  # Its own root, as a container's: the mount at / is no longer the node's.
  until ! grep -q " / / " "/proc/$(cat "/run/others/$name.up")/mountinfo" 2>/dev/null ||
        [ "$(cat "/proc/$(cat "/run/others/$name.up")/comm")" = sleep ]; do sleep 0.02; done
}
gone() {
  pid=$(cat "/run/others/$1.up"); kill "$pid"
  while [ -e "/proc/$pid" ]; do sleep 0.02; done
  rm "/run/others/$1.up"
}
start_agent /agent/a.sock --allow /mnt/scratch
kubelet /mnt/scratch/job /ctr/data
hook() { run "$1" --node-agent /agent/a.sock --target /ctr/data --host /mnt/scratch/job; }
"#;

const IN_USE: &str = "the node agent says: another container on the node uses the node's \
                      /mnt/scratch/job, a directory inside it or one above it: nothing is \
                      removed, the node reaper empties it once nobody does";

/// Runs `scenario` after [`SETUP`] with a planted /mnt/scratch/job.
fn scenario(scenario: &str) -> Option<(String, String)> {
    let sandbox = Sandbox::new();
    let script = format!("plant /mnt/scratch/job\n{SETUP}{scenario}");
    node_run(&sandbox, &script)
}

/// Finding 2: a native sidecar (an uploader still shipping results) reaches the directory
/// through a symlink on the node, so no pod spec spells it alike. The hook empties
/// nothing while it runs, and the directory once it is gone.
#[test]
fn a_sidecar_that_reaches_the_directory_by_another_name_keeps_it() {
    let Some((out, err)) = scenario(
        r#"
mkdir -p /data && ln -s /mnt/scratch/job /data/results
other uploader /data/results
hook while_shipping
intact /mnt/scratch/job
gone uploader
hook after
ls -A /mnt/scratch/job | wc -l
"#,
    ) else {
        return;
    };
    assert_eq!(out, "while_shipping=1\nafter=0\n0\n", "{err}");
    assert!(err.contains(IN_USE), "{err}");
    // The agent's log names who, for the operator; the pod is told no other pod's name.
    assert!(
        err.contains("in-use: another container") && err.contains("sees it:"),
        "{err}"
    );
    assert!(!err.contains("skipped /ctr/data: pid "), "{err}");
}

/// Finding 1: a Job's replacement pod already runs on the same node and directory while
/// the old pod's cleanup runs. What it wrote survives.
#[test]
fn a_jobs_replacement_pod_on_the_same_directory_keeps_its_files() {
    let Some((out, err)) = scenario(
        r#"
other replacement /mnt/scratch/job
echo checkpoint > /mnt/scratch/job/replacement-wrote
hook old_pod
cat /mnt/scratch/job/replacement-wrote
intact /mnt/scratch/job
gone replacement
"#,
    ) else {
        return;
    };
    assert_eq!(out, "old_pod=1\ncheckpoint\n", "{err}");
    assert!(err.contains(IN_USE), "{err}");
}

/// One below it: a pod whose volume is a directory inside the target (a PV's directory,
/// a subPath) keeps the whole target.
#[test]
fn a_container_of_a_directory_inside_it_keeps_it() {
    let Some((out, err)) = scenario(
        r#"
other pv /mnt/scratch/job/sub
hook below
intact /mnt/scratch/job
gone pv
"#,
    ) else {
        return;
    };
    assert_eq!(out, "below=1\n", "{err}");
    assert!(err.contains(IN_USE), "{err}");
}

/// One above it: a pod that can write the whole prefix (a sibling Job's shared mount)
/// keeps every directory below it.
#[test]
fn a_container_of_a_directory_above_it_keeps_it() {
    let Some((out, err)) = scenario(
        r#"
other shared /mnt/scratch
hook above
intact /mnt/scratch/job
gone shared
"#,
    ) else {
        return;
    };
    assert_eq!(out, "above=1\n", "{err}");
    assert!(err.contains(IN_USE), "{err}");
}

/// node-exporter's read-only `/`, a `kubectl debug node/…` pod: a read-only view of a
/// directory above the allowed prefix cannot write what the walk removes, and does not
/// keep it (the reaper's default rule, docs/REAPER.md). The same view writable does.
#[test]
fn a_read_only_view_of_the_node_does_not_keep_it_and_a_writable_one_does() {
    let Some((out, err)) = scenario(
        r#"
other rootfs / ro
hook beside_read_only_view
gone rootfs
plant /mnt/scratch/job
other rootfs /
hook beside_writable_view
intact /mnt/scratch/job
gone rootfs
"#,
    ) else {
        return;
    };
    assert_eq!(
        out, "beside_read_only_view=0\nbeside_writable_view=1\n",
        "{err}"
    );
}

/// The asking container is excluded by the kernel's mount ids, not by a name it gives:
/// another process of the same container (same mount namespace) is the hook's own app,
/// and does not keep the directory.
#[test]
fn the_asking_container_alone_does_not_keep_it() {
    let Some((out, err)) = scenario(
        r#"
set +e
pod sh -c 'sleep 60 & app=$!
  /prestop-clean hook --node-agent /agent/a.sock --target /ctr/data --host /mnt/scratch/job
  status=$?; kill $app; echo "own=$status"'
set -e
ls -A /mnt/scratch/job | wc -l
"#,
    ) else {
        return;
    };
    assert_eq!(out, "own=0\n0\n", "{err}");
}

/// No oracle: a pod that asks about a host path that is not its directory learns only
/// that, never whether someone uses that path. The identity is judged first.
#[test]
fn whether_another_pods_directory_is_in_use_is_never_told() {
    let Some((out, err)) = scenario(
        r#"
mkdir -p /mnt/scratch/mine
other victim /mnt/scratch/job
kubelet /mnt/scratch/mine /ctr/mine
run probe --node-agent /agent/a.sock --target /ctr/mine --host /mnt/scratch/job
intact /mnt/scratch/job
gone victim
"#,
    ) else {
        return;
    };
    assert_eq!(out, "probe=1\n", "{err}");
    assert!(
        err.contains("differs: the node's /mnt/scratch/job is not the pod's directory"),
        "{err}"
    );
    assert!(!err.contains("in-use"), "{err}");
}

/// Shell helpers for a walk that a test holds still: `big DIR N` plants N empty files;
/// `hook_in_background NAME` starts the hook and waits until the agent has answered it
/// `same` (its walk has begun), then stops the hook's process (`SIGSTOP`) and prints
/// nothing; `resume` lets it go on and waits for it.
const HELD_WALK: &str = r#"
big() { (cd "$1" && seq 1 "$2" | sed 's/^/f/' | xargs touch); }
hook_in_background() {
  hook "$1" >/run/hook.out 2>/run/hook.err &
  HOOK_JOB=$!
  # The hook's process: the job's child (unshare, which becomes the program by exec).
  HOOK_PID=""
  until [ -n "$HOOK_PID" ]; do
    HOOK_PID=$(tr -d ' ' </proc/$HOOK_JOB/task/$HOOK_JOB/children 2>/dev/null || true)
  done
  until grep -q ': same$' /agent/a.sock.log; do :; done
  kill -STOP "$HOOK_PID"
}
resume() { kill -CONT "$HOOK_PID"; wait "$HOOK_JOB" || true; cat /run/hook.out; cat /run/hook.err >&2; }
left() { ls -A /mnt/scratch/job | wc -l; }
"#;

/// Issue 38, class 3: the agent's `same` holds for the walk, not only for its instant. A
/// Job's replacement pod starts on the directory after the old pod's cleanup was told
/// `same`, while it walks 200,000 entries (held still, so the replacement surely comes
/// during the walk): the walk asks again within 100 ms, hears `in-use` and stops, and
/// most of the tree stays for the replacement. Before, the walk went on to the end.
#[test]
fn a_replacement_that_comes_during_the_walk_stops_it() {
    let Some((out, err)) = scenario(&format!(
        r#"{HELD_WALK}
big /mnt/scratch/job 200000
hook_in_background old_pod
other replacement /mnt/scratch/job
resume
[ "$(left)" -gt 0 ] && echo some_left
gone replacement
"#
    )) else {
        return;
    };
    assert_eq!(out, "old_pod=1\nsome_left\n", "{err}");
    assert!(
        err.contains("stopped during the walk after removing"),
        "{err}"
    );
    assert!(err.contains(IN_USE), "{err}");
}

/// The same hold when the agent goes away during the walk: nobody can say any more that
/// nobody else uses it, so the walk stops (fail closed) and leaves the rest to the reaper.
#[test]
fn an_agent_gone_during_the_walk_stops_it() {
    let Some((out, err)) = scenario(&format!(
        r#"{HELD_WALK}
big /mnt/scratch/job 200000
hook_in_background old_pod
kill $AGENT; wait $AGENT 2>/dev/null || true; rm -f /agent/a.sock
resume
[ "$(left)" -gt 0 ] && echo some_left
"#
    )) else {
        return;
    };
    assert_eq!(out, "old_pod=1\nsome_left\n", "{err}");
    assert!(
        err.contains("stopped during the walk after removing")
            && err.contains("the node agent was not reachable"),
        "{err}"
    );
}
