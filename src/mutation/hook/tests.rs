use super::*;
use proptest::prelude::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn targets(items: &[&str]) -> Vec<Target> {
    items.iter().map(|s| Target::path_only(*s)).collect()
}

fn hook(before: Before, action: Action) -> Hook {
    Hook {
        shell: "/bin/sh".to_owned(),
        before,
        action,
    }
}

#[test]
fn argv_shape() {
    let h = hook(
        Before::Exec(strings(&["/bin/echo", "bye"])),
        Action::Cleanup(targets(&["/data", "/cache"])),
    );
    let argv = h.to_shell_argv();
    assert_eq!(argv[0], "/bin/sh");
    assert_eq!(argv[1], "-c");
    assert_eq!(argv[3], "prestop-injector");
    assert_eq!(argv[4..], strings(&["/data", "/cache", "/bin/echo", "bye"]));
    assert!(!argv[2].contains("/data") && !argv[2].contains("bye"));
}

#[test]
fn foreign_argv_is_not_ours() {
    let ours = hook(Before::Nothing, Action::Cleanup(targets(&["/data"]))).to_shell_argv();
    let mut edited = ours.clone();
    edited[2].push_str("echo extra\n");
    let mut extra_arg = ours.clone();
    extra_arg.push("/more".to_owned());
    let mut renamed = ours.clone();
    renamed[3] = "other".to_owned();
    let custom_two = {
        let mut argv = hook(Before::Nothing, Action::Custom("x".to_owned())).to_shell_argv();
        argv.push("y".to_owned());
        argv
    };
    for argv in [
        vec![],
        strings(&["/bin/sh", "-c", "sleep 5"]),
        strings(&[
            "/bin/sh",
            "-c",
            "# prestop-injector hook v1",
            "prestop-injector",
        ]),
        edited,
        extra_arg,
        renamed,
        custom_two,
        ours[..3].to_vec(),
    ] {
        assert_eq!(Hook::from_argv(&argv), None, "{argv:?}");
        assert_eq!(sidecar_targets(&argv), None, "{argv:?}");
    }
    assert_eq!(
        Hook::from_argv(&sidecar_argv("/bin/sh", &strings(&["/a"]))),
        None
    );
}

#[test]
fn hooks_of_earlier_releases_are_ours() {
    let h = hook(
        Before::Exec(strings(&["/bin/echo", "bye"])),
        Action::Cleanup(targets(&["/data"])),
    );
    let mut old = h.to_shell_argv();
    old[2] = old[2].replace(
        "rc=$?\n[ \"$status\" -eq 0 ] || exit \"$status\"\nexit \"$rc\"\n",
        "exit \"$status\"\n",
    );
    assert_ne!(old, h.to_shell_argv());
    assert_eq!(Hook::from_argv(&old), Some(h));
    let mut edited = old.clone();
    edited[2].push_str("echo extra\n");
    assert_eq!(Hook::from_argv(&edited), None);
}

#[test]
fn sidecar_round_trip() {
    let paths = strings(&["/data", "/with space"]);
    let argv = sidecar_argv("/bin/sh", &paths);
    assert_eq!(
        sidecar_identified_targets(&argv),
        Some(targets(&["/data", "/with space"]))
    );
    assert_eq!(sidecar_targets(&argv), Some(paths));
    let mut changed = argv.clone();
    changed[1] = "-ec".to_owned();
    assert_eq!(sidecar_targets(&changed), None);
}

#[test]
fn sleep_estimate() {
    let cases = [
        (hook(Before::Nothing, Action::Cleanup(vec![])), 0),
        (hook(Before::Sleep(20), Action::Cleanup(vec![])), 20),
        (
            hook(
                Before::Exec(strings(&["sh", "-c", "sleep 5; sleep 1m"])),
                Action::Cleanup(vec![]),
            ),
            65,
        ),
        (
            hook(
                Before::Exec(strings(&["sleep", "10"])),
                Action::Custom("sleep 2".to_owned()),
            ),
            12,
        ),
        (
            hook(
                Before::Exec(strings(&["/bin/sleep", "60"])),
                Action::Cleanup(vec![]),
            ),
            60,
        ),
        (
            hook(
                Before::Sleep(3),
                Action::Custom("mysleep 9; sleep $X".to_owned()),
            ),
            3,
        ),
    ];
    for (h, want) in cases {
        assert_eq!(h.literal_sleep_seconds(), want, "{h:?}");
    }
}

#[test]
fn program_argv_shape() {
    assert_eq!(
        PROGRAM,
        format!("{PROGRAM_DIR}/{}", prestop_clean::argv::PROGRAM_NAME)
    );
    let h = hook(
        Before::Exec(strings(&["/usr/sbin/nginx", "-s", "quit"])),
        Action::Cleanup(vec![
            Target::on_host("/data", "/mnt/data"),
            Target {
                whole_filesystem: true,
                ..Target::on_host("/cache", "/mnt/disk/$(POD_NAME)")
            },
        ]),
    );
    assert_eq!(
        h.to_program_argv(),
        strings(&[
            PROGRAM,
            "hook",
            "--target",
            "/data",
            "--host",
            "/mnt/data",
            "--target",
            "/cache",
            "--host",
            "/mnt/disk/$(POD_NAME)",
            "--whole-filesystem",
            "--",
            "/usr/sbin/nginx",
            "-s",
            "quit"
        ])
    );
    let custom = hook(Before::Sleep(5), Action::Custom("echo bye".into()));
    assert_eq!(
        custom.to_argv(CleanerMode::Binary, None),
        strings(&[PROGRAM, "hook", "--sleep", "5", "--shell", "/bin/sh", "--script", "echo bye"])
    );
    assert_eq!(Hook::from_argv(&custom.to_program_argv()), Some(custom));
    // The shell of a cleanup hook is not in the program's argv.
    let read_back = Hook::from_argv(&h.to_program_argv()).unwrap();
    assert_eq!(read_back.shell, "");
    assert_eq!((read_back.before, read_back.action), (h.before, h.action));
}

#[test]
fn hooks_and_sidecars_asking_the_node_agent_are_ours() {
    let socket = "/.prestop-injector-node/agent.sock";
    let h = hook(
        Before::Exec(strings(&["/bin/stop"])),
        Action::Cleanup(vec![Target::on_host("/data", "/mnt/data")]),
    );
    let argv = h.to_argv(CleanerMode::Binary, Some(socket));
    assert_eq!(
        argv[..4],
        strings(&[PROGRAM, "hook", "--node-agent", socket])[..]
    );
    let read_back = Hook::from_argv(&argv).expect("ours");
    assert_eq!(
        (&read_back.before, &read_back.action),
        (&h.before, &h.action)
    );
    // The shell form cannot ask the agent: it is the same with or without.
    assert_eq!(
        h.to_argv(CleanerMode::Shell, Some(socket)),
        h.to_argv(CleanerMode::Shell, None)
    );
    let targets = vec![Target::on_host("/a", "/mnt/a")];
    let sidecar = program_sidecar_argv(&targets, Some(socket), false);
    assert_eq!(sidecar[2..4], strings(&["--node-agent", socket])[..]);
    assert_eq!(sidecar_identified_targets(&sidecar), Some(targets));
    // Out of its place the option is no part of our argv.
    let mut misplaced = h.to_program_argv();
    misplaced.splice(4..4, strings(&["--node-agent", socket]));
    assert_eq!(Hook::from_argv(&misplaced), None, "{misplaced:?}");
}

#[test]
fn foreign_program_argv_is_not_ours() {
    for argv in [
        strings(&[PROGRAM]),
        strings(&[PROGRAM, "sidecar", "--target", "/a"]),
        strings(&["/bin/prestop-clean", "hook", "--target", "/a"]),
        strings(&[PROGRAM, "hook", "/a"]),
        strings(&[
            PROGRAM, "hook", "--target", "/a", "--shell", "/bin/sh", "--script", "x",
        ]),
        strings(&[IMAGE_PROGRAM, "sidecar", "--target", "/a", "x"]),
    ] {
        assert_eq!(Hook::from_argv(&argv), None, "{argv:?}");
        assert_eq!(sidecar_targets(&argv), None, "{argv:?}");
    }
    let targets = vec![
        Target::on_host("/a", "/mnt/a"),
        Target::path_only("/--target"),
    ];
    assert_eq!(
        sidecar_identified_targets(&program_sidecar_argv(&targets, None, false)),
        Some(targets)
    );
    assert_eq!(
        program_sidecar_argv(&[], None, false)[..2],
        [IMAGE_PROGRAM, "sidecar"]
    );
}

fn any_hook() -> impl Strategy<Value = Hook> {
    let text = any::<String>();
    let list = prop::collection::vec(any::<String>(), 0..4);
    let before = prop_oneof![
        Just(Before::Nothing),
        any::<u64>().prop_map(Before::Sleep),
        list.clone().prop_map(Before::Exec),
    ];
    let target = (any::<String>(), any::<Option<String>>(), any::<bool>()).prop_map(
        |(path, host, whole_filesystem)| Target {
            path,
            host,
            whole_filesystem,
        },
    );
    let action = prop_oneof![
        prop::collection::vec(target, 0..4).prop_map(Action::Cleanup),
        any::<String>().prop_map(Action::Custom),
    ];
    (text, before, action).prop_map(|(shell, before, action)| Hook {
        shell,
        before,
        action,
    })
}

proptest! {
    #[test]
    fn round_trip(h in any_hook()) {
        let argv = h.to_shell_argv();
        // The shell form carries paths only: what it cannot check, it does not keep.
        let paths_only = match &h.action {
            Action::Cleanup(targets) => Hook {
                action: Action::Cleanup(
                    targets.iter().map(|t| Target::path_only(t.path.clone())).collect(),
                ),
                ..h.clone()
            },
            Action::Custom(_) => h.clone(),
        };
        prop_assert_eq!(Hook::from_argv(&argv), Some(paths_only));
        // Rebuilding what we recognised is a fixed point (idempotent injection).
        prop_assert_eq!(Hook::from_argv(&argv).map(|h| h.to_shell_argv()), Some(argv));
    }

    #[test]
    fn program_round_trip(h in any_hook(), socket in prop::option::of(any::<String>())) {
        let argv = h.to_program_argv_asking(socket.as_deref());
        let read_back = Hook::from_argv(&argv).expect("ours");
        prop_assert_eq!(&read_back.before, &h.before);
        prop_assert_eq!(&read_back.action, &h.action);
        prop_assert_eq!(read_back.to_program_argv_asking(socket.as_deref()), argv);
    }

    #[test]
    fn sidecar_round_trip_any(shell in any::<String>(), targets in prop::collection::vec(any::<String>(), 0..4)) {
        prop_assert_eq!(sidecar_targets(&sidecar_argv(&shell, &targets)), Some(targets));
    }
}

/// A container is our sidecar by its whole command, whatever its length: the short
/// commands `is_our_sidecar` passes over without reading (empty, `sh -c`) are not, and
/// each sidecar we write, program and shell, is, down to no target at all (the
/// program's is then two words: why a command that starts with it is always read).
#[test]
fn our_sidecar_by_its_command_short_ones_included() {
    use crate::json::{json, Value};
    let container = |argv: Vec<String>| json!({"name": "x", "command": argv});
    for argv in [
        vec![],
        strings(&[IMAGE_PROGRAM]),
        strings(&[IMAGE_PROGRAM, "hook"]),
        strings(&["/bin/sh", "-c", "sleep 1"]),
    ] {
        assert!(!ours::is_our_sidecar(&container(argv.clone())), "{argv:?}");
    }
    assert!(!ours::is_our_sidecar(&json!({"command": []})));
    assert!(!ours::is_our_sidecar(&json!({"command": [1, 2, 3, 4]})));
    assert!(!ours::is_our_sidecar(&json!({"name": "x"})));
    let targets = vec![Target::on_host("/a", "/mnt/a")];
    for sidecar in [
        program_sidecar_argv(&targets, None, false),
        program_sidecar_argv(&[], None, false),
        sidecar_argv("/bin/sh", &strings(&["/a", "/b"])),
        sidecar_argv("/bin/sh", &[]),
    ] {
        assert_eq!(
            ours::is_our_sidecar(&container(sidecar.clone())),
            sidecar_targets(&sidecar).is_some(),
            "{sidecar:?}"
        );
        let value: Value = container(sidecar.clone());
        assert!(ours::is_our_sidecar(&value), "{sidecar:?}");
    }
}
