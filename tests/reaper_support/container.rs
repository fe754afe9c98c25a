//! A real container on the test machine, as the reaper's in-use check sees one: a
//! process in its own mount namespace (`unshare -m`), chrooted into a tmpfs root, with a
//! host directory bind-mounted at `/data` — what a kubelet's runtime does for a hostPath.
//! Needs root, `unshare` and a static busybox; skips (or fails under
//! `PRESTOP_REQUIRE_TOOLS=1`) without them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn skip(why: &str) {
    if std::env::var("PRESTOP_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!("required (PRESTOP_REQUIRE_TOOLS=1): {why}");
    }
    eprintln!("note: skipped: {why}");
}

/// `unshare` and a static busybox, or `None` (skipped) without them or without the
/// privilege to make a mount namespace.
pub fn tools() -> Option<(&'static str, PathBuf)> {
    let unshare = ["/usr/bin/unshare", "/bin/unshare"]
        .into_iter()
        .find(|p| Path::new(p).is_file());
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    match (unshare, busybox) {
        (Some(unshare), Some(busybox))
            if Command::new(unshare)
                .args(["-m", "true"])
                .status()
                .is_ok_and(|s| s.success()) =>
        {
            Some((unshare, busybox))
        }
        _ => {
            skip("unshare -m (as root) and a static busybox are needed");
            None
        }
    }
}

/// Sets up the container's mounts and becomes its process.
const CONTAINER: &str = r#"set -eu
root=$1 source=$2 busybox=$3 bind_from=${4:-}
mount --make-rprivate /
if [ -n "$bind_from" ]; then mount --bind "$bind_from" "$source"; fi
mount -t tmpfs rootfs "$root"
mkdir -p "$root/bin" "$root/data"
cp "$busybox" "$root/bin/busybox"
mount --bind "$source" "$root/data"
if [ -n "${CONTAINER_READ_ONLY:-}" ]; then mount -o remount,bind,ro "$root/data"; fi
exec chroot "$root" /bin/busybox sleep 600
"#;

/// A running container with `source` mounted at `/data`; stopped when dropped.
pub struct Container(pub Child);

impl Container {
    /// Starts it in `scratch` (a directory for its root) and returns once its process
    /// runs with its mounts made.
    pub fn start(scratch: &Path, source: &Path) -> Option<Container> {
        Container::start_with(scratch, source, None)
    }

    /// [`Container::start`]; with `bind_from`, `source` is first made a bind mount of it
    /// in the container's namespace (an alias no pod spec shows).
    pub fn start_with(
        scratch: &Path,
        source: &Path,
        bind_from: Option<&Path>,
    ) -> Option<Container> {
        Container::start_mounting(scratch, source, bind_from, false)
    }

    /// [`Container::start`] with `/data` mounted read-only (`readOnly: true`).
    pub fn start_read_only(scratch: &Path, source: &Path) -> Option<Container> {
        Container::start_mounting(scratch, source, None, true)
    }

    fn start_mounting(
        scratch: &Path,
        source: &Path,
        bind_from: Option<&Path>,
        read_only: bool,
    ) -> Option<Container> {
        let (unshare, busybox) = tools()?;
        let root = scratch.join(format!("rootfs-{}", stamp()));
        std::fs::create_dir_all(&root).unwrap();
        let mut command = Command::new(unshare);
        command
            .args(["-m", "sh", "-c", CONTAINER, "sh"])
            .arg(&root)
            .arg(source)
            .arg(&busybox);
        if let Some(bind_from) = bind_from {
            command.arg(bind_from);
        }
        if read_only {
            command.env("CONTAINER_READ_ONLY", "1");
        }
        let child = command.stdin(Stdio::null()).spawn().unwrap();
        let container = Container(child);
        let comm = PathBuf::from(format!("/proc/{}/comm", container.0.id()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::read_to_string(&comm)
            .ok()
            .as_deref()
            .map(str::trim)
            != Some("busybox")
        {
            assert!(Instant::now() < deadline, "the container did not start");
            std::thread::sleep(Duration::from_millis(2));
        }
        Some(container)
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A name no other test's directory has: the time in nanoseconds.
pub fn stamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}
