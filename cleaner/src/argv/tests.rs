use super::*;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn targets(items: &[&str]) -> Vec<Target> {
    items.iter().map(|s| Target::from(*s)).collect()
}

/// Lists of targets with every combination of the per-target options.
fn target_lists() -> Vec<Vec<Target>> {
    let whole = Target {
        whole_filesystem: true,
        ..Target::on_host("/data", "/mnt/disk")
    };
    let whole_no_host = Target {
        whole_filesystem: true,
        ..Target::path_only("/data")
    };
    vec![
        vec![],
        targets(&["/scratch"]),
        targets(&["/a b", "/-x", "/\n"]),
        vec![Target::on_host("/data", "/mnt/scratch/$(POD_NAME)/x")],
        vec![
            Target::on_host("/data", "--host"),
            whole.clone(),
            Target::path_only("/old"),
            whole_no_host,
            Target::on_host("/--whole-filesystem", "/$$/--target"),
        ],
    ]
}

/// No agent, an ordinary socket, and sockets spelled like the options that follow.
fn node_agents() -> Vec<Option<String>> {
    vec![
        None,
        Some("/run/prestop-injector/agent.sock".into()),
        Some("--sleep".into()),
        Some("--target".into()),
        Some("--".into()),
        Some(String::new()),
    ]
}

/// No deadline (a pod of an older release), the smallest, an ordinary one, the largest.
fn deadlines() -> impl Iterator<Item = Option<u64>> + Clone {
    [None, Some(1), Some(28), Some(u64::MAX)].into_iter()
}

fn round_trip(args: HookArgs) {
    let argv = args.render("/.prestop-injector/prestop-clean");
    assert_eq!(argv[1], HOOK);
    assert_eq!(HookArgs::parse(&argv[1..]), Ok(args), "{argv:?}");
}

#[test]
fn hook_round_trips() {
    let script = Some(Script {
        shell: "/bin/sh".into(),
        text: "echo bye; rm -rf /x/*".into(),
    });
    for before in [
        Before::Nothing,
        Before::Sleep(0),
        Before::Sleep(u64::MAX),
        Before::Exec(vec![]),
        Before::Exec(strings(&["--target", "/etc", "--", "-c"])),
    ] {
        for targets in target_lists() {
            for script in [None, script.clone()] {
                for (node_agent, deadline) in node_agents().into_iter().zip(deadlines().cycle()) {
                    round_trip(HookArgs {
                        deadline,
                        node_agent,
                        before: before.clone(),
                        targets: targets.clone(),
                        script: script.clone(),
                    });
                }
            }
        }
    }
}

#[test]
fn user_argv_is_never_read_as_options() {
    let args = HookArgs {
        deadline: Some(28),
        node_agent: None,
        before: Before::Exec(strings(&[
            "/bin/sh",
            "-c",
            "x",
            "--target",
            "/",
            "--host",
            "/",
            "--whole-filesystem",
            "--node-agent",
            "/tmp/evil.sock",
            "--deadline",
            "99999",
        ])),
        targets: vec![Target::on_host("/scratch", "/mnt/scratch")],
        script: None,
    };
    let parsed = HookArgs::parse(&args.render("p")[1..]).unwrap();
    assert_eq!(
        parsed.targets,
        [Target::on_host("/scratch", "/mnt/scratch")]
    );
    assert_eq!(parsed.node_agent, None);
    assert_eq!(parsed.deadline, Some(28));
}

/// A pod injected by the release before `--deadline` keeps its exact argv: it must
/// parse, with no deadline, and render back to itself (so the webhook still recognises
/// its own hook and the reaper its sealed targets).
#[test]
fn argv_of_the_previous_release_parses_without_a_deadline() {
    let hook = strings(&[
        "/.prestop-injector/prestop-clean",
        "hook",
        "--node-agent",
        "/run/prestop-injector/agent.sock",
        "--target",
        "/scratch",
        "--host",
        "/mnt/scratch",
        "--",
        "/bin/drain",
    ]);
    let parsed = HookArgs::parse(&hook[1..]).unwrap();
    assert_eq!(parsed.deadline, None);
    assert_eq!(parsed.render(&hook[0]), hook);
    let sidecar = strings(&[
        "/usr/local/bin/prestop-clean",
        "sidecar",
        "--target",
        "/scratch",
        "--host",
        "/mnt/scratch",
    ]);
    let parsed = SidecarArgs::parse(&sidecar[1..]).unwrap();
    assert_eq!(parsed.deadline, None);
    assert_eq!(parsed.render(&sidecar[0]), sidecar);
}

#[test]
fn foreign_command_lines_are_refused() {
    for args in [
        vec![],
        strings(&["sidecar"]),
        strings(&["hook", "--sleep", "+5"]),
        strings(&["hook", "--sleep", ""]),
        strings(&["hook", "--sleep", "99999999999999999999"]),
        strings(&["hook", "--target"]),
        strings(&["hook", "--target", "/a", "--sleep", "1"]),
        strings(&["hook", "--script", "x", "--shell", "/bin/sh"]),
        strings(&["hook", "--sleep", "1", "--", "echo"]),
        strings(&["hook", "/scratch"]),
        // --node-agent only first, once, with its socket.
        strings(&["hook", "--node-agent"]),
        strings(&["hook", "--sleep", "1", "--node-agent", "/s"]),
        strings(&["hook", "--target", "/a", "--node-agent", "/s"]),
        strings(&["hook", "--node-agent", "/s", "--node-agent", "/t"]),
        // --deadline only first, once, whole seconds, at least 1.
        strings(&["hook", "--deadline"]),
        strings(&["hook", "--deadline", "0"]),
        strings(&["hook", "--deadline", "-1"]),
        strings(&["hook", "--deadline", "1.5"]),
        strings(&["hook", "--deadline", "99999999999999999999"]),
        strings(&["hook", "--node-agent", "/s", "--deadline", "5"]),
        strings(&["hook", "--deadline", "5", "--deadline", "5"]),
        strings(&["hook", "--target", "/a", "--deadline", "5"]),
        // Per-target options only right after their target, in render order.
        strings(&["hook", "--host", "/mnt/x"]),
        strings(&["hook", "--whole-filesystem"]),
        strings(&[
            "hook",
            "--target",
            "/a",
            "--whole-filesystem",
            "--host",
            "/b",
        ]),
        strings(&["hook", "--target", "/a", "--host"]),
        strings(&["hook", "--target", "/a", "--host", "/b", "--host", "/c"]),
        strings(&[
            "hook",
            "--target",
            "/a",
            "--whole-filesystem",
            "--whole-filesystem",
        ]),
    ] {
        assert!(HookArgs::parse(&args).is_err(), "{args:?}");
    }
    for args in [
        strings(&["hook"]),
        strings(&["sidecar", "--target"]),
        strings(&["sidecar", "--", "x"]),
        strings(&["sidecar", "--host", "/x"]),
        strings(&["sidecar", "--target", "/a", "--host"]),
        strings(&["sidecar", "--node-agent"]),
        strings(&["sidecar", "--target", "/a", "--node-agent", "/s"]),
        strings(&["sidecar", "--node-agent", "/s", "--node-agent", "/t"]),
        strings(&["sidecar", "--deadline", "0"]),
        strings(&["sidecar", "--node-agent", "/s", "--deadline", "5"]),
        // Issue 31: one place, after the socket, and once.
        strings(&["sidecar", "--restartable", "--node-agent", "/s"]),
        strings(&["sidecar", "--restartable", "--restartable"]),
        strings(&["sidecar", "--target", "/s", "--restartable"]),
    ] {
        assert!(SidecarArgs::parse(&args).is_err(), "{args:?}");
    }
}

#[test]
fn sidecar_round_trips() {
    for targets in target_lists()
        .into_iter()
        .chain([targets(&["/scratch", "/--target"])])
    {
        for (node_agent, deadline) in node_agents().into_iter().zip(deadlines().cycle()) {
            for restartable in [false, true] {
                let args = SidecarArgs {
                    deadline,
                    node_agent: node_agent.clone(),
                    restartable,
                    targets: targets.clone(),
                };
                let argv = args.render("/usr/local/bin/prestop-clean");
                assert_eq!(SidecarArgs::parse(&argv[1..]), Ok(args), "{argv:?}");
            }
        }
    }
}

#[test]
fn empty_round_trips_and_refuses_anything_else() {
    use crate::as_user::User;
    for groups in [vec![], vec![0], vec![1000, 2000, u32::MAX]] {
        for (uid, gid) in [(0, 0), (1000, 3000), (u32::MAX, u32::MAX)] {
            let args = EmptyArgs {
                user: User {
                    uid,
                    gid,
                    groups: groups.clone(),
                },
                path: "/host/mnt/scratch/--uid 1".into(),
            };
            assert_eq!(EmptyArgs::parse(&args.render()), Ok(args.clone()));
        }
    }
    for bad in [
        vec!["empty", "/x"],
        vec!["empty", "--gid", "1", "--uid", "1", "/x"],
        vec!["empty", "--uid", "-1", "--gid", "1", "/x"],
        vec!["empty", "--uid", "+1", "--gid", "1", "/x"],
        vec!["empty", "--uid", "4294967296", "--gid", "1", "/x"],
        vec!["empty", "--uid", "1", "--gid", "1", "--groups", "", "/x"],
        vec!["empty", "--uid", "1", "--gid", "1", "--groups", "2,1", "/x"],
        vec!["empty", "--uid", "1", "--gid", "1", "--groups", "1,1", "/x"],
        vec!["empty", "--uid", "1", "--gid", "1", "--groups", "1,", "/x"],
        vec!["empty", "--uid", "1", "--gid", "1", "/x", "/y"],
        vec!["hook", "--uid", "1", "--gid", "1", "/x"],
    ] {
        assert!(EmptyArgs::parse(&strings(&bad)).is_err(), "{bad:?}");
    }
}
