//! Where the walk starts, decided again just before it: the rules with the config of the
//! moment (protected paths, the allow-list, the prefix mounted in the reaper), and the
//! directory's place in the reaper's view, from the prefix resolved by the one rule
//! (`prestop_clean::prefix`) when the reaper meets the operator's link itself.

use super::Reaper;
use crate::mutation::targets::{
    is_allowed, is_at_or_below, protected_entry, HostPath, PathRefusal,
};
use std::path::Path;

impl Reaper {
    /// The rules again, with the config of now, just before the walk; the path of the
    /// directory inside the reaper's container.
    pub(super) fn recheck(&self, directory: &str) -> Result<String, (&'static str, String)> {
        let host = HostPath {
            known: directory.to_owned(),
            open: None,
        };
        if let Some(entry) = protected_entry(&host, &self.config.protected_host_paths) {
            let refusal = PathRefusal::Protected {
                host_path: directory.to_owned(),
                entry,
            };
            return Err(("protected", refusal.reason()));
        }
        if !is_allowed(&host, &self.config.allowed_host_path_prefixes) {
            return Err((
                "not_allowed",
                "is outside allowedHostPathPrefixes".to_owned(),
            ));
        }
        let prefix = self
            .config
            .allowed_host_path_prefixes
            .iter()
            .filter(|prefix| is_at_or_below(directory, prefix))
            .max_by_key(|prefix| prefix.len())
            .ok_or((
                "not_allowed",
                "is outside allowedHostPathPrefixes".to_owned(),
            ))?;
        let inside = |path: &str| self.host_root.join(path.trim_start_matches('/'));
        if !inside(prefix).is_dir() {
            let why = format!(
                "is below {prefix}, which is not mounted in the reaper at {}",
                inside(prefix).display()
            );
            return Err(("not_mounted", why));
        }
        // Where the prefix really is in the reaper's view. A DaemonSet's hostPath mount of
        // the prefix already is its real directory (the kubelet followed the operator's
        // link), but a reaper that sees the node's own tree (`--host-root /`) meets the
        // link itself (RHCOS `/mnt -> var/mnt`), and the walk follows no symlink: it starts
        // from the prefix resolved by the one rule (root's links in root-only
        // directories). What it empties is still checked to be the node's very directory,
        // by identity, before the walk (`users::pods_on_the_node`).
        let real = resolve_in(&self.host_root, prefix).map_err(|why| {
            let why = format!("is below {prefix}, which the reaper cannot place: {why}");
            ("not_mounted", why)
        })?;
        let below = if prefix == "/" {
            directory
        } else {
            &directory[prefix.len()..]
        };
        inside(&format!("{}{below}", real.trim_end_matches('/')))
            .to_str()
            .map(str::to_owned)
            .ok_or(("rule", "has a path that is not UTF-8".to_owned()))
    }
}

/// The real path of the allowed prefix `prefix` below `root` ([`prestop_clean::prefix`]).
fn resolve_in(root: &Path, prefix: &str) -> Result<String, String> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|error| format!("cannot open {}: {error}", root.display()))?;
    let real =
        prestop_clean::prefix::resolve_prefix(std::os::fd::AsFd::as_fd(&fd), prefix.as_bytes())?;
    String::from_utf8(real).map_err(|_| "its real path is not UTF-8".to_owned())
}
