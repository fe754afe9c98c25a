//! A pod's cgroup, named as the kubelet names it, for tests of the node agent that need
//! distinct pods (the agent knows a pod from its processes' cgroup, never from a
//! request).

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::{is_root, skip};

/// A cgroup named as the kubelet names a pod's (`…/pod<uid>`), removed when dropped.
pub struct PodCgroup {
    top: PathBuf,
    pod: PathBuf,
}

impl PodCgroup {
    /// `None` (skipped, or failed under PRESTOP_REQUIRE_TOOLS) where no cgroup hierarchy
    /// is writable.
    pub fn new(uid: &str) -> Option<PodCgroup> {
        if !is_root() {
            skip("creating a pod's cgroup needs root");
            return None;
        }
        let name = format!("prestop-test-{}", std::process::id());
        for base in [
            "/sys/fs/cgroup/unified",
            "/sys/fs/cgroup/pids",
            "/sys/fs/cgroup",
        ] {
            let top = Path::new(base).join(&name);
            let pod = top.join(format!("kubepods/besteffort/pod{uid}"));
            if Path::new(base).join("cgroup.procs").is_file() && fs::create_dir_all(&pod).is_ok() {
                return Some(PodCgroup { top, pod });
            }
        }
        skip("no writable cgroup hierarchy");
        None
    }

    /// Its `cgroup.procs`: a process that writes its pid there joins the pod.
    pub fn procs(&self) -> PathBuf {
        self.pod.join("cgroup.procs")
    }

    /// A process in this cgroup that holds `count` connections to `socket` open without a
    /// word, until it is killed.
    pub fn hold_connections(&self, socket: &Path, count: usize) -> Holder {
        let script = r#"
import os, socket, sys
with open(sys.argv[1], "w") as procs:
    procs.write(str(os.getpid()))
held = []
for _ in range(int(sys.argv[3])):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[2])
    held.append(s)
print("held", flush=True)
sys.stdin.read()
"#;
        let mut child = Command::new("python3")
            .args(["-c", script])
            .arg(self.pod.join("cgroup.procs"))
            .arg(socket)
            .arg(count.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line, "held\n", "the holder did not connect");
        Holder(child)
    }
}

impl Drop for PodCgroup {
    fn drop(&mut self) {
        // Leaves first: a cgroup is removed only when empty, from the bottom up.
        let mut dir = self.pod.clone();
        while dir.starts_with(&self.top) {
            let _ = fs::remove_dir(&dir);
            if !dir.pop() {
                break;
            }
        }
    }
}

pub struct Holder(Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
