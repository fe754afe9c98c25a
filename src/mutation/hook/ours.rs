//! Recognising the containers we add, by their exact command (never by name, which a
//! suffix may change): the installer init container and the cleanup sidecar. One owner,
//! so `targets` (which skips our sidecar's copied mounts), `inject` and the patch agree.

use super::{sidecar_targets, IMAGE_PROGRAM, PROGRAM_DIR};
use crate::json::Value;
use prestop_clean::argv::INSTALL;

/// The command of the installer: copy the program from the image into the volume.
pub fn installer_argv() -> [&'static str; 3] {
    [IMAGE_PROGRAM, INSTALL, PROGRAM_DIR]
}

/// Whether an init container is the installer we generated.
pub(in crate::mutation) fn is_installer(container: &Value) -> bool {
    container
        .get("command")
        .and_then(Value::as_array)
        .is_some_and(|argv| {
            argv.iter()
                .map(Value::as_str)
                .eq(installer_argv().map(Some))
        })
}

/// Whether a container is the sidecar we generated.
pub(in crate::mutation) fn is_our_sidecar(container: &Value) -> bool {
    container
        .get("command")
        .and_then(Value::as_array)
        // Not copied to be read when it cannot be one: the shell sidecar has at least four
        // words, the program sidecar's starts with the program (see `sidecar_identified_targets`).
        .filter(|argv| argv.len() >= 4 || argv.first().is_some_and(|p| p == IMAGE_PROGRAM))
        .and_then(|argv| {
            argv.iter()
                .map(|a| a.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        })
        .is_some_and(|argv| sidecar_targets(&argv).is_some())
}
