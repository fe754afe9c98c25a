use super::without_agent::match_host;
use super::*;

fn mount(root: &str, point: &str) -> MountEntry {
    MountEntry {
        id: 1,
        parent: 0,
        major: 8,
        minor: 1,
        root: root.as_bytes().to_vec(),
        mount_point: point.as_bytes().to_vec(),
        fs_type: "ext4".into(),
    }
}

#[test]
fn the_mount_is_the_longest_prefix_topmost() {
    let mut entries = vec![
        mount("/", "/"),
        mount("/a", "/data"),
        mount("/b", "/data"),
        mount("/c", "/data2"),
        mount("/d", "/data/x/y"),
    ];
    for (i, e) in entries.iter_mut().enumerate() {
        e.id = i as u64;
    }
    let found = |path: &str| find_mount(&entries, path.as_bytes()).map(|m| m.id);
    assert_eq!(found("/data"), Some(2));
    assert_eq!(found("/data/x"), Some(2));
    assert_eq!(found("/data/x/y/z"), Some(4));
    assert_eq!(found("/data2/q"), Some(3));
    assert_eq!(found("/datax"), Some(0));
    assert_eq!(suffix_below(b"/data/x", b"/data"), Some(&b"/x"[..]));
    assert_eq!(suffix_below(b"/data", b"/data"), Some(&b""[..]));
    assert_eq!(suffix_below(b"/datax", b"/data"), None);
    assert_eq!(suffix_below(b"/a", b"/"), Some(&b"/a"[..]));
}

#[test]
fn host_paths_match_the_whole_root_component_wise() {
    let ok = |host: &str, suffix: &str, root: &str| {
        match_host(host, suffix.as_bytes(), &mount(root, "/data"), false)
    };
    assert_eq!(ok("/mnt/scratch/cache", "", "/mnt/scratch/cache"), Ok(()));
    assert_eq!(
        ok("/mnt/scratch/cache/x", "/x", "/mnt/scratch/cache"),
        Ok(())
    );
    // A pseudo filesystem's root is no directory of the node, whatever the host path.
    assert!(ok("/mnt/net:[4026532321]", "", "net:[4026532321]").is_err());
    // The suffix is all of the host path: the mount shows the node's `/`, not /x.
    assert!(ok("/x", "/x", "/x").is_err());
    for (host, suffix, root) in [
        ("/mnt/scratch/cache", "", "/var/lib/containerd"),
        ("/mnt/scratch/cache", "", "/che"),
        ("/mnt/scratch/cache", "", "/mnt/scratch/cache/sub"),
        ("/mnt/scratch/cache/x", "/y", "/mnt/scratch/cache"),
        ("/mnt/scratch/cachex", "/x", "/mnt/scratch/cache"),
        ("/mnt/scratch/cache", "", "/"),
        // Issue 26: a root that is only a tail of the host path. Accepted before
        // (/mnt/scratch may be its own disk, whose root is /cache), it is also what a
        // symlink on the node shows: without the node agent, refused.
        ("/mnt/scratch/cache", "", "/cache"),
        ("/mnt/scratch/ci-7/var/lib/kubelet", "", "/var/lib/kubelet"),
        ("/data/tmp/keep", "", "/keep"),
        ("/data/tmp/keep/x", "/x", "/keep"),
    ] {
        let err = ok(host, suffix, root).unwrap_err();
        assert!(err.contains(host), "{err}");
        if host.ends_with(suffix) {
            assert!(err.contains("node agent"), "{err}");
        }
    }
    // A whole filesystem is the node's `/` (hostPath `/`) or needs the node agent.
    let whole = mount("/", "/data");
    let err = match_host("/mnt/disk", b"", &whole, true).unwrap_err();
    assert!(err.contains("whole filesystem"), "{err}");
    assert!(err.contains("only with the node agent"), "{err}");
    assert_eq!(match_host("/x", b"/x", &whole, true), Ok(()));
    let err = match_host("/x", b"/x", &whole, false).unwrap_err();
    assert!(err.contains("allowedHostPathPrefixes"), "{err}");
}

#[test]
fn expected_hosts_are_expanded_and_normalized() {
    let env = |name: &str| (name == "POD_NAME").then(|| "p-1".to_owned());
    let host = |text: Option<&str>| {
        let target = Target {
            path: "/data".into(),
            host: text.map(str::to_owned),
            whole_filesystem: false,
        };
        expected_host(&target, &env)
    };
    assert_eq!(host(Some("/mnt/$(POD_NAME)/x")), Ok("/mnt/p-1/x".into()));
    assert_eq!(host(Some("/mnt//a/./b/")), Ok("/mnt/a/b".into()));
    assert_eq!(host(Some("/mnt/$$x")), Ok("/mnt/$x".into()));
    assert!(host(None).unwrap_err().contains("older"));
    assert!(host(Some("/mnt/$(NOPE)")).is_err());
    assert!(host(Some("/mnt/../etc")).is_err());
    assert!(host(Some("mnt")).is_err());
}
