//! How many workers the walk uses ([`default_jobs`], `PRESTOP_CLEAN_JOBS`) and how many
//! descriptors it may hold with them ([`plan`]).

use crate::walk::WINDOW;

/// The environment variable that sets the number of workers (`1` walks as the
/// sequential walk always did). The program's argv grammar is shared with the webhook
/// and stays as it is; the variable reaches the hook, the sidecar and the reaper alike.
pub const JOBS_ENV: &str = "PRESTOP_CLEAN_JOBS";
/// More workers than this only add contention on the parent directories' locks.
pub const MAX_JOBS: usize = 256;

/// Descriptors kept free for everything else the process holds (stdio, the target's
/// descriptor, signal-hook's pipe, the identity check's files).
const RESERVED_FDS: u64 = 12;
/// Descriptors one worker may hold: its window, the stream of the directory it was
/// handed, and the one being opened.
const FDS_PER_WORKER: u64 = WINDOW as u64 + 2;
/// Directories waiting in the shared queue (or for their children) per worker, at
/// least: enough to keep every worker busy.
const SLOTS_PER_WORKER: u64 = 16;
/// Slots at most, when the descriptor limit allows more. A handed-over directory keeps
/// its slot until its children are removed, so a chain of nested directories holds one
/// per level: past the last slot, one worker walks the rest of the chain alone. Each
/// costs a descriptor and ~100 bytes.
const MAX_SLOTS: u64 = 4096;

/// Workers per CPU by default. A removal on a disk waits for its inode to be read most
/// of the time (caches cold, a network block device: ~2.5 ms each here), and a waiting
/// worker spends no CPU: on this machine's ext4, 100,000 files took 78 s with 2 workers,
/// 33 s with 4, 15 s with 8, 8.6 s with 16 and 10 s with 32 (2 CPUs). On tmpfs, 16 workers
/// cost the same CPU time as 2.
pub const WORKERS_PER_CPU: usize = 8;
/// The default's ceiling, far above what one directory tree keeps busy.
pub const MAX_DEFAULT_JOBS: usize = 64;

/// The default number of workers: `PRESTOP_CLEAN_JOBS` when it is set, otherwise
/// [`WORKERS_PER_CPU`] per CPU this process may use — which
/// [`std::thread::available_parallelism`] reads from `sched_getaffinity` and the
/// cgroup's CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`),
/// rounded down, at least 1 —, at most [`MAX_DEFAULT_JOBS`].
pub fn default_jobs() -> usize {
    match jobs_from_env() {
        Ok(Some(jobs)) => jobs,
        _ => {
            let cpus = std::thread::available_parallelism().map_or(1, usize::from);
            cpus.saturating_mul(WORKERS_PER_CPU).min(MAX_DEFAULT_JOBS)
        }
    }
}

/// `PRESTOP_CLEAN_JOBS`, when set: a number from 1 to [`MAX_JOBS`], or why not.
pub fn jobs_from_env() -> Result<Option<usize>, String> {
    std::env::var_os(JOBS_ENV)
        .map(|value| parse_jobs(&value))
        .transpose()
}

fn parse_jobs(value: &std::ffi::OsStr) -> Result<usize, String> {
    match value.to_str().and_then(|v| v.parse::<usize>().ok()) {
        Some(jobs) if (1..=MAX_JOBS).contains(&jobs) => Ok(jobs),
        _ => Err(format!(
            "{JOBS_ENV}={value:?} is not a number of workers from 1 to {MAX_JOBS}"
        )),
    }
}

/// Workers and queue slots for `jobs` asked, when the process may still open `free`
/// descriptors: fewer workers when their windows do not fit (down to 1, the sequential
/// walk, which copes with `EMFILE` by holding fewer). Slots: 0 with one worker.
pub(crate) fn plan(jobs: usize, free: u64) -> (usize, usize) {
    let usable = free.saturating_sub(RESERVED_FDS);
    let mut workers = jobs.clamp(1, MAX_JOBS) as u64;
    while workers > 1 && workers * (FDS_PER_WORKER + SLOTS_PER_WORKER) > usable {
        workers -= 1;
    }
    if workers == 1 {
        return (1, 0);
    }
    let slots = (usable - workers * FDS_PER_WORKER).min(MAX_SLOTS);
    (workers as usize, slots as usize)
}

/// Descriptors this process may still open: `RLIMIT_NOFILE` less those open now
/// (counted in `/proc/self/fd`; 64 are assumed without `/proc`).
pub(crate) fn free_descriptors() -> u64 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let open = std::fs::read_dir("/proc/self/fd").map_or(64, |dir| dir.count() as u64);
    limit.saturating_sub(open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_fit_in_the_descriptor_limit() {
        // Plenty: as asked, the most slots.
        assert_eq!(plan(8, 1 << 20), (8, MAX_SLOTS as usize));
        assert_eq!(plan(1, 1 << 20), (1, 0));
        assert_eq!(plan(0, 1 << 20), (1, 0));
        assert_eq!(plan(10_000, 1 << 20), (MAX_JOBS, MAX_SLOTS as usize));
        // The usual 1,024: 16 workers and what is left of the descriptors as slots.
        assert_eq!(plan(16, 1_010), (16, 1_010 - 12 - 16 * 34));
        // `ulimit -n 16`: the sequential walk.
        assert_eq!(plan(8, 12), (1, 0));
        // `ulimit -n 128`: as many as fit, each within its window.
        let (workers, slots) = plan(8, 120);
        assert_eq!(workers, 2);
        assert!(slots >= 2 * SLOTS_PER_WORKER as usize);
        assert!(workers as u64 * FDS_PER_WORKER + slots as u64 + RESERVED_FDS <= 120);
    }

    #[test]
    fn the_environment_variable_is_a_number_of_workers() {
        for (value, expected) in [
            ("4", Ok(4)),
            ("1", Ok(1)),
            ("256", Ok(256)),
            ("0", Err(())),
            ("-2", Err(())),
            (" 4", Err(())),
            ("lots", Err(())),
            ("257", Err(())),
        ] {
            let parsed = parse_jobs(std::ffi::OsStr::new(value));
            assert_eq!(parsed.map_err(|_| ()), expected, "{value}");
        }
        assert!(default_jobs() >= 1);
    }
}
