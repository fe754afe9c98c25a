//! Becoming the user of a gone pod before the node reaper's walk (`prestop-clean empty`).
//!
//! The reaper runs as root with the capabilities to change its identity. It must never
//! remove what the pod's own user could not have removed (issue 26): a uid-1000 Job that
//! merely mounts another tenant's 0700 directory gets "Permission denied" from its own
//! hook, and so must the reaper's walk. So the walk runs in its own process, which first
//! becomes exactly that user:
//!
//! 1. it checks that it is the only thread: rustix's `set_thread_*` calls are the raw
//!    system calls, which change the calling thread only (glibc's `setuid` signals every
//!    thread to do the same; a static program without it must not have a second thread);
//! 2. `setgroups(groups)`, `setresgid(gid, gid, gid)`, `setresuid(uid, uid, uid)`: for a
//!    uid other than 0 the kernel clears the permitted, effective and ambient capability
//!    sets at that moment;
//! 3. clears every capability explicitly all the same (effective, permitted,
//!    inheritable, ambient): a root pod keeps root's rights as an owner but gets neither
//!    `DAC_OVERRIDE` nor `FOWNER`, which the pod did not have either (fewer rights than
//!    the pod had are allowed, more never are);
//! 4. sets `PR_SET_NO_NEW_PRIVS`;
//! 5. **verifies** what the kernel says now — real, effective, saved and filesystem ids
//!    (`/proc/self/status`), `getgroups`, `capget` and the ambient set — and refuses to
//!    walk when anything differs. A uid of `4294967295` is the classic trap: to
//!    `setresuid` it means "leave unchanged", so the calls succeed and the process is
//!    still root; only the verification sees it.
//!
//! The bounding set and the secure bits are left alone: they matter only to a later
//! `execve`, and this process executes nothing after the drop (and the reaper's
//! container has `no_new_privs` already).

use rustix::process::getgroups;
use rustix::process::{Gid, Uid};
use rustix::thread::{
    capabilities, clear_ambient_capability_set, set_capabilities, set_no_new_privs,
    set_thread_groups, set_thread_res_gid, set_thread_res_uid, CapabilitySet, CapabilitySets,
};

/// The identity a walk runs as: the pod's uid, primary gid and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, sorted, each once.
    pub groups: Vec<u32>,
}

/// Becomes `user` with no capability at all, then checks it with the kernel. `Err` is a
/// sentence saying what could not be done or what is left; the caller must then touch
/// nothing.
pub fn become_user(user: &User) -> Result<(), String> {
    match status_field("Threads")?.as_str() {
        "1" => {}
        threads => {
            return Err(format!(
                "{threads} threads run; the identity is changed per thread, so it must be \
                 changed before any thread is started"
            ))
        }
    }
    let groups: Vec<Gid> = user.groups.iter().map(|&g| gid(g)).collect();
    set_thread_groups(&groups).map_err(|e| format!("setgroups({:?}) failed: {e}", user.groups))?;
    set_thread_res_gid(gid(user.gid), gid(user.gid), gid(user.gid))
        .map_err(|e| format!("setresgid({}) failed: {e}", user.gid))?;
    set_thread_res_uid(uid(user.uid), uid(user.uid), uid(user.uid))
        .map_err(|e| format!("setresuid({}) failed: {e}", user.uid))?;
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    set_capabilities(None, none).map_err(|e| format!("clearing the capabilities failed: {e}"))?;
    clear_ambient_capability_set()
        .map_err(|e| format!("clearing the ambient capabilities failed: {e}"))?;
    set_no_new_privs(true).map_err(|e| format!("setting no_new_privs failed: {e}"))?;
    verify(user)
}

fn uid(raw: u32) -> Uid {
    // Unchecked on purpose: `u32::MAX` must reach the kernel (where it means "unchanged")
    // so that the verification, not a debug assertion, is what refuses it.
    Uid::from_raw_unchecked(raw)
}

fn gid(raw: u32) -> Gid {
    Gid::from_raw_unchecked(raw)
}

/// What the kernel says this process is, against `user`.
fn verify(user: &User) -> Result<(), String> {
    let mut left = Vec::new();
    let ids = |field: &str| -> Result<Vec<u32>, String> {
        status_field(field)?
            .split_whitespace()
            .map(|id| {
                id.parse()
                    .map_err(|_| format!("/proc/self/status {field}: {id:?}"))
            })
            .collect()
    };
    let (uids, gids) = (ids("Uid")?, ids("Gid")?);
    if uids != [user.uid; 4] {
        left.push(format!(
            "uids (real, effective, saved, fs) are {uids:?}, not {}",
            user.uid
        ));
    }
    if gids != [user.gid; 4] {
        left.push(format!(
            "gids (real, effective, saved, fs) are {gids:?}, not {}",
            user.gid
        ));
    }
    let mut groups: Vec<u32> = getgroups()
        .map_err(|e| format!("getgroups failed: {e}"))?
        .into_iter()
        .map(Gid::as_raw)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    if groups != user.groups {
        left.push(format!("the groups are {groups:?}, not {:?}", user.groups));
    }
    let sets = capabilities(None).map_err(|e| format!("capget failed: {e}"))?;
    for (name, set) in [
        ("effective", sets.effective),
        ("permitted", sets.permitted),
        ("inheritable", sets.inheritable),
    ] {
        if !set.is_empty() {
            left.push(format!("the {name} capabilities are {set:?}"));
        }
    }
    let ambient = status_field("CapAmb")?;
    if u64::from_str_radix(&ambient, 16) != Ok(0) {
        left.push(format!("the ambient capabilities are {ambient}"));
    }
    if status_field("NoNewPrivs")? != "1" {
        left.push("no_new_privs is not set".to_owned());
    }
    match left.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "after the drop to uid {} gid {} groups {:?}: {}",
            user.uid,
            user.gid,
            user.groups,
            left.join("; ")
        )),
    }
}

/// One field of `/proc/self/status`, as the kernel writes it (trimmed).
fn status_field(name: &str) -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|value| value.trim().to_owned())
        .ok_or_else(|| format!("/proc/self/status has no {name} field"))
}
