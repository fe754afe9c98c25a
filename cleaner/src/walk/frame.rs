//! What the walk keeps per directory (a [`Frame`]: its stream, where it stopped, what
//! survived) and per entry (its name and the kind the listing gave), and how a directory
//! is streamed.

use std::ffi::CString;
use std::os::fd::AsFd;

use rustix::fs::{Dir, FileType};
use rustix::io::{fcntl_dupfd_cloexec, Errno};

use crate::report::Reason;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Other,
    Unknown,
}

pub(crate) struct Entry {
    pub(super) name: CString,
    pub(super) kind: Kind,
}

pub(super) struct Frame {
    /// The directory's stream, whose descriptor is also the one its entries are opened
    /// and removed through. `None` for frames whose descriptor was closed to stay within
    /// [`WINDOW`] (never the target's).
    pub(super) dir: Option<Dir>,
    /// Its name in the parent (empty for the target).
    pub(super) name: CString,
    pub(super) dev: u64,
    pub(super) ino: u64,
    /// The `d_off` of the last entry taken from the stream: where it resumes after its
    /// descriptor was closed and reopened.
    pub(super) offset: i64,
    /// The child being walked when the stream was closed: should the resumed stream
    /// return it again, it is not walked twice.
    pub(super) resumed_after: Option<CString>,
    /// The stream is exhausted (or failed): only the directory's removal is left.
    pub(super) done: bool,
    /// Why the stream failed before its end: the directory survives, named once.
    pub(super) failed: Option<Reason>,
    /// Entries of this directory that survived (so its own removal is expected to fail).
    pub(super) left: u64,
}

impl Frame {
    pub(super) fn new(dir: Dir, name: CString, dev: u64, ino: u64) -> Frame {
        Frame {
            dir: Some(dir),
            name,
            dev,
            ino,
            offset: 0,
            resumed_after: None,
            done: false,
            failed: None,
            left: 0,
        }
    }
}

/// A stream of the directory `fd` from its start. A dup shares the file offset with `fd`:
/// rewind, or a second stream of the same descriptor (the next pass over the target)
/// would start at the end and see nothing.
pub(super) fn stream(fd: impl AsFd) -> Result<Dir, Errno> {
    let mut dir = Dir::new(fcntl_dupfd_cloexec(fd, 0)?)?;
    dir.rewind();
    Ok(dir)
}

/// How many entries the directory holds (`.` and `..` left out), streamed.
pub(crate) fn entry_count(fd: impl AsFd) -> Result<u64, Errno> {
    let mut count = 0;
    for entry in stream(fd)? {
        let entry = entry?;
        if entry.file_name() != c"." && entry.file_name() != c".." {
            count += 1;
        }
    }
    Ok(count)
}

pub(super) fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::Directory => Kind::Dir,
        FileType::RegularFile => Kind::File,
        FileType::Unknown => Kind::Unknown,
        _ => Kind::Other,
    }
}

impl From<Errno> for Reason {
    fn from(err: Errno) -> Reason {
        match err {
            Errno::ACCESS => Reason::PermissionDenied,
            Errno::PERM => Reason::NotPermitted,
            Errno::ROFS => Reason::ReadOnly,
            Errno::BUSY | Errno::XDEV => Reason::MountPoint,
            err => Reason::Error(err.raw_os_error()),
        }
    }
}
