//! `prestop-clean install DIR`: the init container that delivers the program into the
//! pod's `emptyDir`, with no `cp` or shell in the image.
//!
//! Copies `/proc/self/exe` to a temporary name created with `O_EXCL | O_NOFOLLOW`,
//! fsyncs it, makes it `0555` and renames it into place, so a container never sees a
//! half-written program (a restarted init container replaces it atomically).

use std::fs::File;
use std::io;

use prestop_clean::argv::PROGRAM_NAME;
use prestop_clean::escape;
use rustix::fs::{fchmod, fsync, openat, renameat, unlinkat, AtFlags, Mode, OFlags, CWD};
use rustix::io::Errno;

pub fn install(dir: &str) -> u8 {
    match copy_self(dir) {
        Ok(bytes) => {
            eprintln!(
                "prestop-clean: installed {}/{PROGRAM_NAME} ({})",
                escape(dir.as_bytes()),
                prestop_clean::size(bytes)
            );
            0
        }
        Err(err) => {
            eprintln!(
                "prestop-clean: cannot install into {}: {err}",
                escape(dir.as_bytes())
            );
            1
        }
    }
}

fn copy_self(dir: &str) -> io::Result<u64> {
    let dir_fd = openat(
        CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut source = File::open("/proc/self/exe")?;
    let temp = format!(".{PROGRAM_NAME}.tmp");
    // A previous attempt that died half-way left it behind: it is ours to replace.
    match unlinkat(&dir_fd, temp.as_str(), AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(err) => return Err(err.into()),
    }
    let out = openat(
        &dir_fd,
        temp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut out = File::from(out);
    let bytes = io::copy(&mut source, &mut out)?;
    out.sync_all()?;
    fchmod(&out, Mode::from_raw_mode(0o555))?;
    drop(out);
    renameat(&dir_fd, temp.as_str(), &dir_fd, PROGRAM_NAME)?;
    fsync(&dir_fd)?;
    Ok(bytes)
}
