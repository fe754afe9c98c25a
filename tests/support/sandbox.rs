//! A sandbox for running untrusted (destructive) shell scripts: a user + mount + pid
//! namespace (`unshare`), a skeleton directory as the root (mount points, a busybox applet
//! directory `/bb` as the only PATH, `/bin` -> `usr/bin` as on the host), `/usr` (and any
//! real `/lib*` directories) bind-mounted read-only, `/dev/null`, and four writable
//! directories (`/scratch`, `/data`, `/tmp`, `/work`, the cwd) bind-mounted from a per-run
//! directory on the host that the caller fills and inspects. The root is then remounted
//! read-only and the script runs `chroot`ed into it, so the host's files outside the
//! per-run directory are not even reachable; the pid namespace takes background processes
//! down with the run. All mounts live in the run's namespace and vanish with it.
//!
//! Every step of the setup runs under `set -e`: if any mount fails the script never
//! runs. [`Sandbox::verify`] proves the protection before anything destructive is run.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Applets of a busybox image that corpus scripts call.
const APPLETS: &[&str] = &[
    "sh", "rm", "rmdir", "mkdir", "touch", "cat", "ls", "find", "sleep", "echo", "printf", "test",
    "[", "true", "false", "mv", "cp", "ln", "wc", "head", "tail", "sort", "uniq", "grep", "sed",
    "awk", "cut", "tr", "basename", "dirname", "xargs", "tee", "chmod", "du", "env", "kill", "seq",
    "expr", "readlink", "mktemp", "sync", "tar", "gzip", "od", "stat", "timeout", "yes", "md5sum",
    "rev", "nl", "diff", "cmp", "truncate", "dd", "split",
];

/// The writable directories, each a bind mount of `<run>/<name>`.
pub const WRITABLE: &[&str] = &["scratch", "data", "tmp", "work"];

/// Run by busybox `sh`: its applets (`mount`, `chroot`) run without an exec each, which
/// halves the cost of a run.
const SETUP: &str = r#"set -e
root=$1; run=$2; shift 2
mount -o bind "$root" "$root"
for d in $BIND_RO; do
  mount -o rbind "/$d" "$root/$d"
  mount -o remount,bind,ro "$root/$d"
done
mount -o bind /dev/null "$root/dev/null"
for d in scratch data tmp work; do mount -o bind "$run/$d" "$root/$d"; done
mount -o remount,bind,ro "$root"
chroot "$root" /usr/bin/env -i -C /work PATH=/bb HOME=/work TARGET=/scratch/work EMPTY= NAME=demo "$@"
"#;

/// What one run left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Exit code, or `None` when killed (timeout or signal).
    pub status: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Every path under the writable directories with its type and content.
    pub tree: Vec<String>,
}

pub struct Sandbox {
    busybox: PathBuf,
    /// Holds the root skeleton, the per-run directories and their output files.
    base: tempfile::TempDir,
    /// Host directories bind-mounted read-only into the root (`usr`, `lib` … as on the
    /// host; those that are symlinks there are symlinks in the skeleton).
    bind_ro: String,
}

impl Sandbox {
    /// `None` (with a note) when `unshare`, `chroot` or busybox is missing or namespaces
    /// are not allowed here; callers skip, or fail when `PRESTOP_REQUIRE_SHELLS=1`.
    pub fn new() -> Option<Sandbox> {
        let busybox = ["/usr/bin/busybox", "/bin/busybox"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())?;
        // The chroot sees only /usr: busybox must be reachable there.
        let busybox = fs::canonicalize(busybox).ok()?;
        if !busybox.starts_with("/usr") {
            return None;
        }
        let base = tempfile::tempdir().ok()?;
        // The root, made once: mount points, `/bb` with the applet links (they resolve to
        // /usr/bin/busybox inside) and the host's top-level symlinks (`/bin` -> usr/bin).
        // Each run mounts over it in its own namespace, then makes it read-only.
        let root = base.path().join("root");
        for dir in ["usr", "dev", "bb", "scratch", "data", "tmp", "work"] {
            fs::create_dir_all(root.join(dir)).ok()?;
        }
        fs::write(root.join("dev/null"), "").ok()?;
        for applet in APPLETS {
            std::os::unix::fs::symlink(&busybox, root.join("bb").join(applet)).ok()?;
        }
        let mut bind_ro = vec!["usr".to_owned()];
        for dir in ["bin", "lib", "lib32", "lib64", "libx32", "sbin"] {
            let host = Path::new("/").join(dir);
            match fs::symlink_metadata(&host) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    std::os::unix::fs::symlink(fs::read_link(&host).ok()?, root.join(dir)).ok()?;
                }
                Ok(meta) if meta.is_dir() => {
                    fs::create_dir(root.join(dir)).ok()?;
                    bind_ro.push(dir.to_owned());
                }
                _ => {}
            }
        }
        let sandbox = Sandbox {
            busybox,
            base,
            bind_ro: bind_ro.join(" "),
        };
        let probe = sandbox.run(0, "/bb/sh", &["-c", "echo ok"], |_| {});
        if probe.status != Some(0) || probe.stdout != "ok\n" {
            eprintln!("note: the sandbox does not start here: {probe:?}");
            return None;
        }
        Some(sandbox)
    }

    /// Proves the sandbox protects the machine: a script that deletes what it can reach
    /// as (namespace) root must fail on `/usr`, `/bb`, `/dev/null` and the root itself and
    /// leave a canary outside intact, while it did empty its own writable directories.
    /// `everything`: `rm -rf /*` (walks all of the read-only `/usr`, seconds) instead of
    /// a representative list.
    pub fn verify(&self, everything: bool) {
        let canary = self.base.path().join("canary");
        fs::write(&canary, "alive").expect("write canary");
        assert!(Path::new("/usr/bin/env").is_file());
        let wipe = if everything {
            "rm -rf /*"
        } else {
            "rm -rf /bin/ /usr/bin/ /usr/sbin/ /bb /dev /lib/ /scratch /data /tmp/* /work/*"
        };
        let script = format!(
            "rm -rf /usr/bin/env; echo env=$?; touch /usr/pwned /pwned; echo touch=$?; \
             {wipe} 2>/dev/null; ls -A /scratch /data"
        );
        let outcome = self.run(u32::MAX, "/usr/bin/bash", &["-c", &script], |dir: &Path| {
            fs::write(dir.join("scratch/f"), "x").expect("write");
            fs::create_dir(dir.join("data/d")).expect("mkdir");
        });
        assert!(
            outcome.stdout.starts_with("env=1\ntouch=1\n"),
            "the sandbox let a script write to /usr: {outcome:?}"
        );
        self.assert_host_intact();
        assert_eq!(
            outcome.tree,
            ["data/ dir", "scratch/ dir", "tmp/ dir", "work/ dir"],
            "the script did not run as root inside: {outcome:?}"
        );
    }

    /// Nothing outside the per-run directories changed: call after destructive runs.
    pub fn assert_host_intact(&self) {
        assert!(
            Path::new("/usr/bin/env").is_file() && Path::new("/usr/bin/busybox").exists(),
            "the sandbox let a script delete from /usr"
        );
        assert!(!Path::new("/usr/pwned").exists() && !Path::new("/pwned").exists());
        let root = self.base.path().join("root");
        assert!(
            !root.join("pwned").exists(),
            "the sandbox root was writable"
        );
        assert!(
            root.join("bb/sh").exists(),
            "the sandbox root lost its applets"
        );
        assert!(
            root.join("dev/null").exists(),
            "the sandbox root lost /dev/null"
        );
        let canary = fs::read_to_string(self.base.path().join("canary"));
        assert_eq!(canary.ok().as_deref(), Some("alive"));
    }

    /// Runs `shell args…` in a fresh sandbox whose writable directories `fill` prepares;
    /// `id` names the per-run directory. Killed after 10 s.
    pub fn run(&self, id: u32, shell: &str, args: &[&str], fill: impl Fn(&Path)) -> Outcome {
        let run = self
            .base
            .path()
            .join(format!("run-{id}-{}", shell.replace('/', "_")));
        let root = self.base.path().join("root");
        let files = run.join("files");
        let _ = fs::remove_dir_all(&run);
        for dir in WRITABLE {
            fs::create_dir_all(files.join(dir)).expect("mkdir");
        }
        fill(&files);
        let stdout = run.join("stdout");
        let stderr = run.join("stderr");
        let mut child = Command::new("unshare")
            .args([
                "--user",
                "--map-root-user",
                "--mount",
                "--pid",
                "--fork",
                "--kill-child",
            ])
            .arg(&self.busybox)
            .args(["sh", "-c", SETUP, "setup"])
            .arg(&root)
            .arg(&files)
            .arg(shell)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("BIND_RO", &self.bind_ro)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("spawn unshare");
        // A deadline for hangs, not for slowness: a script that runs `rm -rf /*` (the
        // corpus has some) walks every read-only file of the host's /usr bound in here
        // (5.7 GB with Go and the cloud SDK on CI's machine), seen taking 27-33 s on two
        // busy cores.
        let deadline = Instant::now() + Duration::from_secs(90);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let read =
            |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
        let outcome = Outcome {
            status,
            stdout: read(&stdout),
            stderr: read(&stderr),
            tree: tree(&files),
        };
        let _ = fs::remove_dir_all(&run);
        outcome
    }
}

/// `path type content` lines for everything under `dir`, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines);
    lines.sort();
    lines
}

fn walk(base: &Path, dir: &Path, lines: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .strip_prefix(base)
            .unwrap_or(&path)
            .display()
            .to_string();
        let Ok(meta) = fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = fs::read_link(&path).unwrap_or_default();
            lines.push(format!("{name} -> {}", target.display()));
        } else if meta.is_dir() {
            lines.push(format!("{name}/ dir"));
            walk(base, &path, lines);
        } else {
            // Short, but any change in content shows (FNV-1a).
            let content = fs::read(&path).unwrap_or_default();
            let hash = content.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            let text = String::from_utf8_lossy(&content);
            let shown: String = text.chars().take(40).collect();
            lines.push(format!(
                "{name} = {shown:?} ({} bytes, #{hash:016x})",
                content.len()
            ));
        }
    }
}
