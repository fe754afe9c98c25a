use super::*;
use rustix::fs::{openat, CWD};
use std::cell::Cell;
use std::fs;
use std::path::PathBuf;
use std::rc::Rc;

/// `target/l0/…/l79` with files at the bottom; returns the path of `l10`.
fn deep_tree(target: &std::path::Path) -> PathBuf {
    let mut dir = target.to_path_buf();
    let mut middle = PathBuf::new();
    for level in 0..80 {
        dir.push(format!("l{level}"));
        if level == 10 {
            middle = dir.clone();
        }
    }
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("f"), "junk").unwrap();
    middle
}

/// Filesystems that report `DT_UNKNOWN` (some FUSE, old XFS): every entry is
/// looked at with `fstatat(AT_SYMLINK_NOFOLLOW)` first, links are still never
/// followed and file sizes still counted.
#[test]
fn entries_of_unknown_type_are_looked_at_first() {
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("target");
    let canary = base.path().join("canary");
    fs::create_dir_all(target.join("d/e")).unwrap();
    fs::create_dir(&canary).unwrap();
    fs::write(canary.join("keep"), "canary").unwrap();
    fs::write(target.join("d/e/f"), "12345").unwrap();
    std::os::unix::fs::symlink(&canary, target.join("d/link")).unwrap();
    let root = openat(CWD, &target, DIR_FLAGS, Mode::empty()).unwrap();
    let mut walk = Walk::new(target.to_str().unwrap(), root.as_fd());
    walk.unknown_types = true;
    walk.run();
    assert_eq!((walk.removed, walk.bytes, walk.left), (4, 5, 0));
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
    assert_eq!(fs::read_to_string(canary.join("keep")).unwrap(), "canary");
}

/// The walk climbs back by `..` above the descriptor window. When a directory was
/// moved out of the target meanwhile, `..` is not the directory it came from: the
/// walk stops (the caller walks again) and never removes anything beside it.
#[test]
fn a_directory_moved_out_mid_walk_is_noticed_on_the_way_up() {
    let base = tempfile::tempdir().unwrap();
    let target = base.path().join("target");
    let outside = base.path().join("outside");
    fs::create_dir_all(outside.join("canary")).unwrap();
    fs::write(outside.join("canary/keep"), "canary").unwrap();
    let middle = deep_tree(&target);
    let root = openat(CWD, &target, DIR_FLAGS, Mode::empty()).unwrap();
    let target_str = target.to_str().unwrap();
    let mut walk = Walk::new(target_str, root.as_fd());
    let climbs = Rc::new(Cell::new(0));
    let (counter, from, to) = (climbs.clone(), middle.clone(), outside.join("moved"));
    walk.before_climb = Some(Box::new(move || {
        if counter.get() == 0 {
            fs::rename(&from, &to).unwrap();
        }
        counter.set(counter.get() + 1);
    }));
    walk.run();
    assert!(climbs.get() > 1, "the walk never climbed by ..");
    assert!(walk.changed);
    assert_eq!(walk.survivors.len(), 1);
    assert_eq!(walk.survivors[0].reason, Reason::Changing);
    assert!(walk.survivors[0].path.ends_with(b"/l9/l10"));
    // Beside the moved directory, in `outside`, nothing was touched.
    assert_eq!(
        fs::read_to_string(outside.join("canary/keep")).unwrap(),
        "canary"
    );
    assert!(outside.join("moved").is_dir());
    // A second pass (as empty_directory does) empties what is still in the target.
    let mut again = Walk::new(target_str, root.as_fd());
    again.run();
    assert!(!again.changed);
    assert_eq!(
        again.left,
        0,
        "{:?}",
        again
            .survivors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    assert_eq!(fs::read_dir(&target).unwrap().count(), 0);
}
