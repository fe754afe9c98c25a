//! `/proc/self/mountinfo`, read as util-linux's libmount reads it (`proc(5)`):
//!
//! ```text
//! 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//! (1)(2) (3)   (4)   (5)      (6)      (7)   (8) (9)   (10)         (11)
//! ```
//!
//! mount id, parent id, `major:minor` of the filesystem, `root` (the directory of that
//! filesystem the mount shows: for a bind mount, the source directory after every symlink
//! the node resolved), mount point (relative to our root), mount options, zero or more
//! optional fields ended by `-`, filesystem type, source, super options. The kernel
//! escapes space, tab, newline and backslash in paths as `\040`, `\011`, `\012` and
//! `\134`; like libmount we decode any `\ooo`.
//!
//! Anything that does not read as that is an error, never a guess: the caller refuses to
//! clean (fail closed). Paths stay bytes: a mount point need not be UTF-8.

/// One line of mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub id: u64,
    pub parent: u64,
    pub major: u32,
    pub minor: u32,
    /// The directory of the filesystem this mount shows (`/` for a whole filesystem).
    pub root: Vec<u8>,
    /// Where it is mounted, relative to the process's root.
    pub mount_point: Vec<u8>,
    pub fs_type: String,
}

/// Parses the whole file; `Err` names the first line that is not mountinfo.
pub fn parse(text: &[u8]) -> Result<Vec<MountEntry>, String> {
    let mut entries = Vec::new();
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let entry = parse_line(line).map_err(|why| {
            format!(
                "line {} of mountinfo is not readable ({why}): {}",
                index + 1,
                crate::escape(line)
            )
        })?;
        entries.push(entry);
    }
    if entries.is_empty() {
        return Err("mountinfo lists no mount".to_owned());
    }
    Ok(entries)
}

fn parse_line(line: &[u8]) -> Result<MountEntry, &'static str> {
    let mut fields = line.split(|&b| b == b' ');
    let mut next = |what: &'static str| fields.next().ok_or(what);
    let id = number(next("no mount id")?).ok_or("bad mount id")?;
    let parent = number(next("no parent id")?).ok_or("bad parent id")?;
    let device = next("no major:minor")?;
    let colon = device
        .iter()
        .position(|&b| b == b':')
        .ok_or("bad major:minor")?;
    let major = number(&device[..colon])
        .and_then(|n| u32::try_from(n).ok())
        .ok_or("bad major")?;
    let minor = number(&device[colon + 1..])
        .and_then(|n| u32::try_from(n).ok())
        .ok_or("bad minor")?;
    let root = root(next("no root")?).ok_or("bad root")?;
    let mount_point = path(next("no mount point")?).ok_or("bad mount point")?;
    next("no mount options")?;
    // Optional fields (`shared:N`, `master:N`, …), ended by a lone `-`.
    loop {
        match next("no - separator")? {
            b"-" => break,
            b"" => return Err("empty optional field"),
            _ => {}
        }
    }
    let fs_type = next("no filesystem type")?;
    let fs_type =
        String::from_utf8_lossy(&unescape(fs_type).ok_or("bad filesystem type")?).into_owned();
    next("no source")?;
    next("no super options")?;
    Ok(MountEntry {
        id,
        parent,
        major,
        minor,
        root,
        mount_point,
        fs_type,
    })
}

/// Plain ASCII digits.
fn number(field: &[u8]) -> Option<u64> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// The `root` field, unescaped: a path of the mount's filesystem, or for a pseudo
/// filesystem whose mounts are files the kernel's own name for it (an nsfs bind mount of
/// a network namespace shows `net:[4026532321]`). Such a root is kept as it is: it never
/// matches an expected host path (see `identity`), and refusing the whole file for it
/// would refuse every target of a node that bind-mounts namespaces (CNI plugins do).
fn root(field: &[u8]) -> Option<Vec<u8>> {
    path(field).or_else(|| namespace_name(field).then(|| field.to_vec()))
}

/// `net:[4026532321]`: a lowercase name, a colon, an inode number in brackets.
fn namespace_name(field: &[u8]) -> bool {
    let Some(colon) = field.iter().position(|&b| b == b':') else {
        return false;
    };
    let (name, rest) = (&field[..colon], &field[colon + 1..]);
    !name.is_empty()
        && name.iter().all(|b| b.is_ascii_lowercase() || *b == b'_')
        && rest.len() > 2
        && rest.starts_with(b"[")
        && rest.ends_with(b"]")
        && rest[1..rest.len() - 1].iter().all(u8::is_ascii_digit)
}

/// An absolute path field, unescaped.
fn path(field: &[u8]) -> Option<Vec<u8>> {
    let path = unescape(field)?;
    (path.first() == Some(&b'/') && !path.contains(&0)).then_some(path)
}

/// `\ooo` (three octal digits, at most `\377`) decoded; any other backslash is an error.
fn unescape(field: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(field.len());
    let mut rest = field;
    while let Some((&b, tail)) = rest.split_first() {
        if b != b'\\' {
            out.push(b);
            rest = tail;
            continue;
        }
        let digits = tail.get(..3)?;
        if !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
            return None;
        }
        let value = digits
            .iter()
            .fold(0u32, |value, d| value * 8 + u32::from(d - b'0'));
        out.push(u8::try_from(value).ok()?);
        rest = &tail[3..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as a container on a Kubernetes node shows them (containerd, kubelet bind
    /// mounts of a hostPath, a subPath and a projected token) and as proc(5) documents.
    const REAL: &[u8] = b"\
1290 1161 0:310 / / rw,relatime master:486 - overlay overlay rw,lowerdir=/var/lib/containerd/a/fs,upperdir=/var/lib/containerd/b/fs,workdir=/var/lib/containerd/b/work
1291 1290 0:313 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
1300 1290 8:1 /mnt/scratch/cache /data rw,relatime - ext4 /dev/sda1 rw,discard
1301 1290 8:1 /mnt/scratch/job/pv /pv ro,relatime - ext4 /dev/sda1 rw,discard
1302 1290 8:1 /var/lib/kubelet/pods/0b5e/etc-hosts /etc/hosts rw,relatime - ext4 /dev/sda1 rw
1303 1290 0:299 / /var/run/secrets/kubernetes.io/serviceaccount ro,relatime - tmpfs tmpfs rw,size=65536k
36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue
";

    #[test]
    fn real_lines() {
        let entries = parse(REAL).unwrap();
        assert_eq!(entries.len(), 7);
        assert_eq!(
            entries[2],
            MountEntry {
                id: 1300,
                parent: 1290,
                major: 8,
                minor: 1,
                root: b"/mnt/scratch/cache".to_vec(),
                mount_point: b"/data".to_vec(),
                fs_type: "ext4".into(),
            }
        );
        assert_eq!(entries[0].root, b"/");
        assert_eq!(entries[0].fs_type, "overlay");
        let proc5 = &entries[6];
        assert_eq!(
            (proc5.id, proc5.parent, proc5.major, proc5.minor),
            (36, 35, 98, 0)
        );
        assert_eq!(
            (&proc5.root[..], &proc5.mount_point[..]),
            (&b"/mnt1"[..], &b"/mnt2"[..])
        );
        assert_eq!(proc5.fs_type, "ext3");
    }

    #[test]
    fn a_namespace_bind_mount_has_a_root_that_is_no_path() {
        let line = b"78 47 0:4 net:[4026532321] /run/netns/cni-f29e rw - nsfs nsfs rw\n";
        let entries = parse(line).unwrap();
        assert_eq!(entries[0].root, b"net:[4026532321]");
        assert_eq!(entries[0].mount_point, b"/run/netns/cni-f29e");
        assert!(parse(b"78 47 0:4  /run/netns/x rw - nsfs nsfs rw\n").is_err());
        for bad in [
            &b"net:[]"[..],
            b"net:[12",
            b":[12]",
            b"Net:[1]",
            b"net:[1a]",
            b"net[1]",
        ] {
            let mut line = b"78 47 0:4 ".to_vec();
            line.extend_from_slice(bad);
            line.extend_from_slice(b" /run/netns/x rw - nsfs nsfs rw\n");
            assert!(parse(&line).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn octal_escapes_in_root_and_mount_point() {
        let line = b"40 1 8:1 /a\\040b\\011c\\012d\\134e /m\\040p\\377 rw - ext4 /dev/x\\040y rw\n";
        let entry = &parse(line).unwrap()[0];
        assert_eq!(entry.root, b"/a b\tc\nd\\e");
        assert_eq!(entry.mount_point, b"/m p\xff");
        // A deleted root reads as text the kernel appended: never a clean path.
        let deleted = b"41 1 8:1 /gone\\040(deleted) /d rw - ext4 /dev/x rw";
        assert_eq!(parse(deleted).unwrap()[0].root, b"/gone (deleted)");
    }

    #[test]
    fn garbage_is_an_error_never_a_panic() {
        for bad in [
            &b""[..],
            b"\n\n",
            b"x 1 8:1 / / rw - ext4 /dev/x rw",
            b"1 1 8:1 / / rw ext4 /dev/x rw",
            b"1 1 8-1 / / rw - ext4 /dev/x rw",
            b"1 1 8:1:2 / / rw - ext4 /dev/x rw",
            b"1 1 99999999999:1 / / rw - ext4 /dev/x rw",
            b"1 1 8:1 relative / rw - ext4 /dev/x rw",
            b"1 1 8:1 / /m\\04 rw - ext4 /dev/x rw",
            b"1 1 8:1 / /m\\400 rw - ext4 /dev/x rw",
            b"1 1 8:1 / /m\\x20 rw - ext4 /dev/x rw",
            b"1 1 8:1 / /m\\000 rw - ext4 /dev/x rw",
            b"1 1 8:1 / /m rw - ext4 /dev/x",
            b"1 1 8:1 / /m rw  - ext4 /dev/x rw",
            b"1 1 8:1 /  /m rw - ext4 /dev/x rw",
            b"1 1 8:1",
            b"\xff\xfe",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // One bad line spoils the file: a mount we cannot read may be the one that matters.
        let mut mixed = REAL.to_vec();
        mixed.extend_from_slice(b"1 1 8:1 / /m rw - ext4\n");
        let err = parse(&mixed).unwrap_err();
        assert!(err.starts_with("line 8 of mountinfo"), "{err}");
    }

    /// Any bytes at all: an answer, never a panic.
    #[test]
    fn every_truncation_of_real_lines_is_handled() {
        for end in 0..REAL.len() {
            let _ = parse(&REAL[..end]);
            let _ = parse(&REAL[end..]);
        }
    }
}
