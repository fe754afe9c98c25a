//! Mount tables as the in-use check reads them: one line per mount, its device, the
//! directory of its filesystem it shows, where, and whether it is read-only.

use std::path::Path;

/// One line of a mountinfo file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub id: u64,
    pub dev: (u32, u32),
    /// The directory of the source filesystem that the mount shows.
    pub root: Vec<u8>,
    /// Where it is mounted, as the reading process sees it.
    pub point: Vec<u8>,
    /// Mounted `ro` (this mount's own options: a mount below it has its own line).
    pub read_only: bool,
}

pub(super) fn read_mountinfo(path: &Path) -> std::io::Result<Option<Vec<Mount>>> {
    let text = std::fs::read(path)?;
    let mounts = parse(&text);
    Ok((!mounts.is_empty()).then_some(mounts))
}

/// The mount at `/`: the last one listed there is the one on top.
pub(super) fn root_mount(mounts: &[Mount]) -> Option<&Mount> {
    mounts.iter().rev().find(|m| m.point == b"/")
}

/// The path of `location` within its filesystem: the root of the mount it is on (the
/// deepest mount point above it, the last listed when mounts are stacked), joined with
/// the rest. `None` when that mount is not on `dev`.
pub(super) fn path_in_filesystem(
    mounts: &[Mount],
    location: &[u8],
    dev: (u32, u32),
) -> Option<Vec<u8>> {
    let mount = mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| is_at_or_below(location, &m.point))
        .max_by_key(|(index, m)| (m.point.len(), *index))
        .map(|(_, m)| m)?;
    if mount.dev != dev {
        return None;
    }
    let rest = if mount.point == b"/" {
        location
    } else {
        &location[mount.point.len()..]
    };
    let mut path = mount.root.clone();
    if path.last() == Some(&b'/') {
        path.pop();
    }
    path.extend_from_slice(rest);
    if path.is_empty() {
        path.push(b'/');
    }
    Some(path)
}

/// `path` is `base` or below it, component-wise (`/` is above everything).
pub fn is_at_or_below(path: &[u8], base: &[u8]) -> bool {
    base == b"/" || path == base || (path.starts_with(base) && path.get(base.len()) == Some(&b'/'))
}

pub(super) fn on_one_line(a: &[u8], b: &[u8]) -> bool {
    is_at_or_below(a, b) || is_at_or_below(b, a)
}

/// `st_dev` as (major, minor), as the kernel encodes it for user space.
pub(super) fn split_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// The lines of a mountinfo file: `id parent major:minor root point options … - …`.
/// Paths are unescaped (`\040` is a space); malformed lines are skipped.
pub fn parse(text: &[u8]) -> Vec<Mount> {
    text.split(|&b| b == b'\n').filter_map(parse_line).collect()
}

/// One line of a mountinfo file; `None` when malformed.
pub(super) fn parse_line(line: &[u8]) -> Option<Mount> {
    let mut fields = line.split(|&b| b == b' ');
    let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    fields.next()?;
    let (major, minor) = std::str::from_utf8(fields.next()?).ok()?.split_once(':')?;
    let dev = (major.parse().ok()?, minor.parse().ok()?);
    let root = unescape(fields.next()?);
    let point = unescape(fields.next()?);
    let read_only = fields.next()?.split(|&b| b == b',').any(|o| o == b"ro");
    Some(Mount {
        id,
        dev,
        root,
        point,
        read_only,
    })
}

/// A line's `major:minor` and mount point fields as the kernel wrote them (escaped), to
/// decide whether it is worth parsing before anything is allocated.
pub(super) fn dev_and_point(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut fields = line.split(|&b| b == b' ');
    let dev = fields.nth(2)?;
    let point = fields.nth(1)?;
    Some((dev, point))
}

/// Undoes the kernel's `\ooo` octal escapes of space, tab, newline and backslash.
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| field[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_read_as_the_kernel_writes_them() {
        let text = b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
            31 22 8:1 /mnt/scratch/a\\040b /host/mnt/x rw - ext4 /dev/sda1 rw\n\
            bad line\n";
        let mounts = parse(text);
        assert_eq!(mounts.len(), 2);
        assert_eq!(mounts[1].root, b"/mnt/scratch/a b");
        assert_eq!(mounts[1].dev, (8, 1));
        assert_eq!(
            path_in_filesystem(&mounts, b"/host/mnt/x/job", (8, 1)).as_deref(),
            Some(&b"/mnt/scratch/a b/job"[..])
        );
        assert_eq!(
            path_in_filesystem(&mounts, b"/srv/y", (8, 1)).as_deref(),
            Some(&b"/srv/y"[..])
        );
        assert_eq!(path_in_filesystem(&mounts, b"/srv/y", (8, 2)), None);
        assert!(on_one_line(b"/mnt/scratch", b"/mnt/scratch/job"));
        assert!(on_one_line(b"/mnt/scratch/job/pv", b"/mnt/scratch/job"));
        assert!(!on_one_line(b"/mnt/scratch/job2", b"/mnt/scratch/job"));
        assert_eq!(split_dev(0x0801), (8, 1));
        assert_eq!(split_dev((259 << 8) | 3), (259, 3));
        assert_eq!(
            dev_and_point(b"31 22 8:1 /mnt/scratch/a\\040b /host/mnt/x rw - ext4"),
            Some((&b"8:1"[..], &b"/host/mnt/x"[..]))
        );
        assert_eq!(dev_and_point(b"31 22 8:1 /"), None);
    }
}
