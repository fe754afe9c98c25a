//! The concurrent walk's batches: the root's files and other non-directories gathered
//! and given to another worker to remove through the root's descriptor, so that the
//! removals in one large directory overlap.

use super::*;

/// Takes a batch of the root's non-directory entries for another worker to remove through
/// the root's descriptor (`Ok`), or gives it back (`Err`) when no batch may be queued.
pub(crate) type ShareFiles<'a> = dyn Fn(Vec<Entry>) -> Result<(), Vec<Entry>> + 'a;

/// Non-directory entries of the root given to another worker at a time (`share_files`).
pub(crate) const FILES_PER_BATCH: usize = 256;

impl Walk<'_> {
    /// Whether `entry` (of the root) goes into a batch for another worker: files and
    /// other non-directories whose kind the listing gave. Directories are handed off
    /// whole, after their checks (`descend`); an unknown kind is looked at here.
    pub(super) fn shares(&self, entry: &Entry) -> bool {
        self.share_files.is_some() && matches!(entry.kind, Kind::File | Kind::Other)
    }

    /// Gives the gathered batch to another worker, or removes it here when none may take it.
    pub(super) fn offer_batch(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let back = match self.share_files {
            Some(share) => share(batch).err(),
            None => Some(batch),
        };
        if let Some(back) = back {
            self.remove_entries(back);
        }
    }

    /// Removes entries listed directly below the root, exactly as the walk does (a name
    /// since swapped for a directory is not entered without the root's stream: it is
    /// left to the next pass, [`Walk::descend`]). Also what another worker runs on a
    /// batch, in a walk of its own on the same root.
    pub(crate) fn remove_entries(&mut self, entries: Vec<Entry>) {
        for entry in entries {
            if self.stopped || self.halted() {
                // Stopped (read-only, or the deadline): what is left stays, uncounted, as in `run`.
                self.stopped = true;
                return;
            }
            self.entry(entry);
            self.report_progress();
        }
    }
}
