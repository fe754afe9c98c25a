//! What the reaper looks at before it walks a gone pod's directory, read-only: whether
//! anything is left to empty, whose rights the walk would run with, and whether a
//! cleanup cut off by its deadline left its marker (for a counter only).

use crate::reaper::ledger::Due;
use crate::reaper::user::{PodUser, RecordedUser};
use std::path::Path;

/// Whether the directory holds the marker of a cleanup cut off by its deadline
/// (docs/REAPER.md#what-you-see): a regular file, not followed if a link. A read-only look,
/// for a counter only; any error is no marker.
pub(super) fn cut_off_marker(location: &str) -> bool {
    std::fs::symlink_metadata(Path::new(location).join(prestop_clean::CUT_OFF_MARKER))
        .is_ok_and(|meta| meta.file_type().is_file())
}

/// Whether the directory is gone, or an empty directory that is no symlink: a read-only
/// look that decides only whether a walk, and so the pods' user, is needed. Whatever
/// replaced it meanwhile, nothing is removed on its word (the per-pod `rmdir` checks
/// again, and removes only an empty directory).
pub(super) fn nothing_left_in(location: &str) -> bool {
    match std::fs::symlink_metadata(location) {
        Err(error) => error.kind() == std::io::ErrorKind::NotFound,
        Ok(meta) if meta.is_dir() => {
            std::fs::read_dir(location).is_ok_and(|mut entries| entries.next().is_none())
        }
        Ok(_) => false,
    }
}

/// The one user the directory's gone pods would have emptied it as; `Err` is the metric
/// label and the end of a sentence naming the pods.
pub(super) fn walk_user(due: &Due) -> Result<PodUser, (&'static str, String)> {
    let mut found: Option<(&PodUser, String)> = None;
    for pod in &due.pods {
        let user = match &pod.user {
            RecordedUser::Known(user) => user,
            RecordedUser::NotRecorded => {
                let why = format!(
                    "pod {pod} was recorded by an older reaper, which did not record its user"
                );
                return Err(("user_unknown", why));
            }
            RecordedUser::Unknown(why) => {
                return Err(("user_unknown", format!("pod {pod} {why}")));
            }
            RecordedUser::Ambiguous(why) => {
                return Err(("user_ambiguous", format!("pod {pod} {why}")));
            }
        };
        match &found {
            Some((first, by)) if *first != user => {
                let why = format!(
                    "its pods ran as different users ({by} as {first}; {pod} as {user}): the \
                     reaper does not pick one"
                );
                return Err(("user_ambiguous", why));
            }
            Some(_) => {}
            None => found = Some((user, pod.to_string())),
        }
    }
    found
        .map(|(user, _)| user.clone())
        .ok_or(("user_unknown", "no pod recorded it".to_owned()))
}
