//! Which pod a process is in, from its cgroup: the kernel's word, which the agent uses to
//! name who asks and the in-use check to tell a pod's process from the node's own.

/// The pod uid in a `/proc/PID/cgroup` text: the kubelet names a pod's cgroup
/// `pod<uid>` (cgroupfs driver) or `kubepods-<qos>-pod<uid with _>.slice` (systemd).
pub fn pod_of_cgroup(text: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(text).ok()?;
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        path.split('/').find_map(|segment| {
            let at = segment.rfind("pod")?;
            let uid: String = segment[at + 3..]
                .chars()
                .take(36)
                .map(|c| if c == '_' { '-' } else { c })
                .collect();
            is_pod_uid(&uid).then_some(uid)
        })
    })
}

/// A Kubernetes object uid as the API server makes them: 8-4-4-4-12 hex digits. Never a
/// name a pod chose: the kubelet names its cgroup and directories by it.
pub fn is_pod_uid(text: &str) -> bool {
    text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}
