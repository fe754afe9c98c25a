//! Users the in-use scan must see, and what it may cost (issue 38, findings 4 and 5):
//! - a container chrooted into a directory of its volume shows an empty mount table: it
//!   is unknown, never free;
//! - a process whose main thread exited (a "zombie leader" with live threads) reads as
//!   `EINVAL` on `/proc/<pid>/mountinfo`; its threads' tables say what it uses;
//! - a namespace with a thousand mounts is read once, not once per process.
//!
//! Real kernels: mount namespaces (`unshare -m`, root), chroots, the real agent and hook
//! (support/node.rs) or the library's own check.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use support::{skip, stderr, unshare, wait_until, Sandbox};

/// A process with no mount at its root makes every judgement on the machine unknown while
/// it runs: the tests that start one run alone.
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn busybox() -> Option<&'static str> {
    let found = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    if found.is_none() {
        skip("a static busybox is needed");
    }
    found
}

/// `container NAME SOURCE CMD...`: a process in a mount namespace of its own, chrooted
/// into a root filesystem of its own (a tmpfs with the machine's tools and `/agent`
/// bound in), with the node's SOURCE at `/vol`, running CMD; its pid is in
/// `/run/c/NAME`.
const SETUP: &str = r#"
mkdir -p /run/c
container() {
  name=$1 source=$2; shift 2
  pod sh -c 'set -e; name=$1 source=$2; shift 2; r=/run/roots/$name; mkdir -p "$r"
    mount -t tmpfs "rootfs-$name" "$r"
    for d in bin sbin lib lib32 lib64 libx32 usr agent; do
      if [ -L "/$d" ]; then cp -P "/$d" "$r/$d"
      elif [ -d "/$d" ]; then mkdir "$r/$d"; mount --rbind "/$d" "$r/$d"; fi
    done
    mkdir -p "$r/vol"; mount --bind "$source" "$r/vol"
    echo $$ > "/run/c/$name"; exec chroot "$r" "$@"' sh "$name" "$source" "$@" &
  until [ -s "/run/c/$name" ]; do sleep 0.02; done
}
stop() { pid=$(cat "/run/c/$1"); kill -9 "$pid"; while [ -e "/proc/$pid" ]; do sleep 0.02; done; }
plant /mnt/scratch/job
start_agent /agent/a.sock --allow /mnt/scratch
kubelet /mnt/scratch/job /ctr/data
hook() { run "$1" --node-agent /agent/a.sock --target /ctr/data --host /mnt/scratch/job; }
"#;

fn on_node(sandbox: &Sandbox, script: &str) -> Option<(String, String)> {
    let output = support::node::on_node(sandbox.dir.path(), &format!("{SETUP}{script}"))?;
    Some((
        String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr(&output),
    ))
}

const UNKNOWN: &str = "the node agent cannot tell whether another container uses the node's \
                       /mnt/scratch/job";

const IN_USE: &str = "the node agent says: another container on the node uses the node's \
                      /mnt/scratch/job";

/// Finding 4b: a container whose process chroots into a directory of its volume (a
/// rootfs unpacked there) shows no mount at all: which directory it uses cannot be told,
/// so nothing is emptied while it runs. Once it is gone the directory is free again (the
/// machine's own processes, chrooted ones included, make nothing unknown).
#[test]
fn a_chrooted_container_with_an_empty_mount_table_is_unknown_not_free() {
    let _alone = alone();
    let Some(busybox) = busybox() else { return };
    let sandbox = Sandbox::new();
    let script = format!(
        r#"
mkdir -p /mnt/scratch/job/rootfs/bin && cp {busybox} /mnt/scratch/job/rootfs/bin/busybox
container chrooted /mnt/scratch/job chroot /vol/rootfs /bin/busybox sleep 60
pid=$(cat /run/c/chrooted)
until [ "$(cat /proc/$pid/comm)" = busybox ] && [ ! -s /proc/$pid/mountinfo ]; do sleep 0.02; done
hook while_chrooted
intact /mnt/scratch/job
stop chrooted
hook after
ls -A /mnt/scratch/job | wc -l
"#
    );
    let Some((out, err)) = on_node(&sandbox, &script) else {
        return;
    };
    assert_eq!(out, "while_chrooted=1\nafter=0\n0\n", "{err}");
    assert!(err.contains(UNKNOWN), "{err}");
    assert!(err.contains("shows no mount at its root"), "{err}");
}

const ZOMBIE_LEADER_C: &str = r#"
#include <pthread.h>
#include <unistd.h>
static void *sleeper(void *arg) { (void)arg; for (;;) pause(); return 0; }
int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, 0, sleeper, 0) != 0) return 1;
  pthread_exit(0);
}
"#;

/// A static program whose main thread exits while another thread sleeps, in `dir`.
fn zombie_leader(dir: &Path) -> Option<PathBuf> {
    let source = dir.join("zombie-leader.c");
    let program = dir.join("zombie-leader");
    std::fs::write(&source, ZOMBIE_LEADER_C).expect("write the C source");
    let built = Command::new("cc")
        .args(["-static", "-pthread", "-O1", "-o"])
        .arg(&program)
        .arg(&source)
        .status()
        .is_ok_and(|status| status.success());
    if !built {
        skip("cc (with a static libc) is needed to build a program whose main thread exits");
        return None;
    }
    Some(program)
}

/// Finding 4c: a process whose main thread exited while its other threads run (a
/// "zombie leader") reads as `EINVAL` on `/proc/<pid>/mountinfo`. It is not gone: its
/// threads still use the volume, and keep it.
#[test]
fn a_process_whose_main_thread_exited_still_counts() {
    let sandbox = Sandbox::new();
    let extra = sandbox.path("extra");
    std::fs::create_dir_all(&extra).expect("mkdir extra");
    let Some(_) = zombie_leader(&extra) else {
        return;
    };
    let script = r#"
container leader /mnt/scratch/job /agent/zombie-leader
pid=$(cat /run/c/leader)
until grep -q '^State:.*Z' /proc/$pid/status && [ "$(ls /proc/$pid/task | wc -l)" = 2 ]; do sleep 0.02; done
cat /proc/$pid/mountinfo >/dev/null 2>&1 || echo leader_unreadable
hook while_threads_run
intact /mnt/scratch/job
stop leader
"#;
    let Some((out, err)) = on_node(&sandbox, script) else {
        return;
    };
    assert_eq!(out, "leader_unreadable\nwhile_threads_run=1\n", "{err}");
    assert!(err.contains(IN_USE), "{err}");
}

/// Processes of one container, each chrooted into the container's root: a tmpfs with
/// `mounts` bind mounts of one directory below it (a pod that mounts its `emptyDir` a
/// thousand times), none of them the candidate. Killed when dropped.
struct Hostile {
    shell: Child,
    pids: Vec<u32>,
}

impl Hostile {
    fn start(dir: &Path, mounts: usize, processes: usize) -> Option<Hostile> {
        let unshare = unshare(&["-m"])?;
        let busybox = busybox()?;
        let script = r#"set -eu
r=$1 busybox=$2 mounts=$3 processes=$4
mount --make-rprivate /
mount -t tmpfs hostile "$r"
mkdir -p "$r/bin" "$r/volume/emptydir-with-a-long-name-as-kubelet-paths-have"
cp "$busybox" "$r/bin/busybox"
i=0
while [ $i -lt "$mounts" ]; do
  mkdir -p "$r/mnt/volume-mount-$i"
  mount --bind "$r/volume/emptydir-with-a-long-name-as-kubelet-paths-have" "$r/mnt/volume-mount-$i"
  i=$((i + 1))
done
i=0
while [ $i -lt "$processes" ]; do chroot "$r" /bin/busybox sleep 600 & echo $!; i=$((i + 1)); done
echo ready
wait
"#;
        let root = dir.join("hostile-root");
        std::fs::create_dir_all(&root).expect("mkdir");
        let mut shell = Command::new(unshare)
            .args(["-m", "sh", "-c", script, "sh"])
            .arg(&root)
            .arg(busybox)
            .arg(mounts.to_string())
            .arg(processes.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run unshare");
        let stdout = shell.stdout.take().expect("stdout");
        let mut pids = Vec::new();
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.expect("read");
            if line == "ready" {
                break;
            }
            pids.push(line.parse().expect("a pid"));
        }
        let hostile = Hostile { shell, pids };
        assert_eq!(
            hostile.pids.len(),
            processes,
            "the hostile pod did not start"
        );
        // Each has its own root once chroot has run.
        let chrooted = wait_until(Duration::from_secs(30), || {
            hostile.pids.iter().all(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "busybox\n")
            })
        });
        assert!(chrooted, "the hostile processes did not start");
        Some(hostile)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        for pid in &self.pids {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

/// Set in the child of a test below: the test's directory, on a tmpfs of the child's own.
const CHILD: &str = "PRESTOP_TEST_NAMESPACES_CHILD";
/// Set in the child: the pids of the hostile pod.
const HOSTILE_PIDS: &str = "PRESTOP_TEST_NAMESPACES_HOSTILE_PIDS";

/// Runs `test` again in a mount namespace of its own (`unshare -m`: a copy of the
/// machine's, so the node's), with a tmpfs mounted at `dir` that no other process on the
/// machine sees: whatever else runs there (a real reaper pod of an e2e run beside the
/// tests, which mounts the machine's `/`) uses no directory of it, and the check speaks
/// of this test's processes only. Panics unless the child passes.
fn in_a_tmpfs_of_its_own(test: &str, dir: &Path, env: &[(&str, String)]) {
    let Some(unshare) = unshare(&["-m"]) else {
        return;
    };
    let script = r#"set -eu
mount --make-rprivate /
mount -t tmpfs "prestop-test" "$1"
mkdir "$1/job"
shift
exec "$@""#;
    let output = Command::new(unshare)
        .args(["-m", "sh", "-c", script, "sh"])
        .arg(dir)
        .arg(std::env::current_exe().expect("the test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run unshare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("child passed"),
        "{stdout}\n{}",
        stderr(&output)
    );
}

/// In the child: the verdict on `<CHILD>/job` and its cost.
fn check_in_child() -> Option<(
    Result<(), prestop_clean::in_use::Busy>,
    prestop_clean::in_use::ScanCost,
)> {
    let dir = PathBuf::from(std::env::var_os(CHILD)?);
    let job = dir.join("job");
    let verdict = prestop_clean::in_use::check(&job, job.to_str().expect("UTF-8"));
    Some((verdict, prestop_clean::in_use::last_scan()))
}

/// Finding 5: a pod with a thousand mounts and a hundred processes makes a judgement read
/// its table once, not a hundred times (the cost is counted, not timed: how fast it is,
/// is measured in bench/agent-load.sh).
#[test]
fn a_namespace_with_a_thousand_mounts_is_read_once_not_once_per_process() {
    if let Some((verdict, cost)) = check_in_child() {
        let pids: Vec<u32> = std::env::var(HOSTILE_PIDS)
            .expect("the hostile pids")
            .split(',')
            .map(|pid| pid.parse().expect("a pid"))
            .collect();
        let read: Vec<&u32> = cost
            .read_in_full
            .iter()
            .filter(|pid| pids.contains(pid))
            .collect();
        assert!(
            read.len() <= 1,
            "{} of the hostile pod's {} processes had their table read in full: {cost:?}",
            read.len(),
            pids.len()
        );
        // Every process was looked at (nothing uses the child's own tmpfs).
        assert!(
            !matches!(verdict, Err(prestop_clean::in_use::Busy::InUse(_))),
            "{verdict:?}"
        );
        assert!(cost.processes >= pids.len(), "{cost:?}");
        println!("child passed: {cost:?}");
        return;
    }
    if !support::is_root() {
        return skip("mount namespaces need root");
    }
    let sandbox = Sandbox::new();
    let Some(hostile) = Hostile::start(sandbox.dir.path(), 1000, 100) else {
        return;
    };
    let size = std::fs::read(format!("/proc/{}/mountinfo", hostile.pids[0]))
        .map(|t| t.len())
        .unwrap_or(0);
    assert!(size > 50_000, "a table of {size} bytes");
    let pids: Vec<String> = hostile.pids.iter().map(u32::to_string).collect();
    in_a_tmpfs_of_its_own(
        "a_namespace_with_a_thousand_mounts_is_read_once_not_once_per_process",
        &sandbox.target,
        &[(HOSTILE_PIDS, pids.join(","))],
    );
}

/// Finding 4b, the node's side: a process of the node's own namespace chrooted into a
/// plain directory (sshd's pre-authentication child, postfix) shows no mount either, but
/// it is the node's, as every process that shows the node's root: a free directory stays
/// free. (Where `/proc/<pid>/ns/mnt` cannot be read, it stays unknown.)
#[test]
fn a_node_daemon_chrooted_into_a_plain_directory_leaves_a_free_directory_free() {
    if let Some((verdict, _)) = check_in_child() {
        assert_eq!(verdict, Ok(()));
        println!("child passed");
        return;
    }
    let _alone = alone();
    if !support::is_root() {
        return skip("chroot needs root");
    }
    let Some(busybox) = busybox() else { return };
    let sandbox = Sandbox::new();
    let jail = sandbox.path("jail");
    std::fs::create_dir_all(jail.join("bin")).expect("mkdir");
    std::fs::copy(busybox, jail.join("bin/busybox")).expect("copy busybox");
    let mut daemon = Command::new("chroot")
        .arg(&jail)
        .args(["/bin/busybox", "sleep", "60"])
        .spawn()
        .expect("chroot");
    let table = format!("/proc/{}/mountinfo", daemon.id());
    let chrooted = wait_until(Duration::from_secs(10), || {
        std::fs::read(&table).is_ok_and(|t| t.is_empty())
    });
    if chrooted {
        in_a_tmpfs_of_its_own(
            "a_node_daemon_chrooted_into_a_plain_directory_leaves_a_free_directory_free",
            &sandbox.target,
            &[],
        );
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(chrooted, "the daemon did not chroot");
}
