//! What we know about container images: which have no bash, which have no shell at all.
//!
//! OWNER: shell helper.

use crate::config::Config;

/// busybox, alpine, `*-alpine` tags and `config.images_without_bash` patterns.
pub fn lacks_bash(image: &str, config: &Config) -> bool {
    let _ = (image, config);
    todo!()
}

/// distroless, scratch-like static images and `config.images_without_shell` patterns.
pub fn lacks_shell(image: &str, config: &Config) -> bool {
    let _ = (image, config);
    todo!()
}
