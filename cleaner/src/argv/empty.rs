//! `prestop-clean empty --uid U --gid G [--groups G1,G2,...] PATH`: the node reaper's walk
//! of one directory, as the pod's own user (`src/reaper`, docs/REAPER.md).

use super::{bad, BadArgs, EMPTY};

/// The arguments of `prestop-clean empty`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmptyArgs {
    /// The pod's user; its `groups` sorted, each once.
    pub user: crate::as_user::User,
    /// The directory to empty, absolute and normalized.
    pub path: String,
}

impl EmptyArgs {
    /// The arguments after the program's name.
    pub fn render(&self) -> Vec<String> {
        let user = &self.user;
        let mut argv = vec![
            EMPTY.to_owned(),
            "--uid".to_owned(),
            user.uid.to_string(),
            "--gid".to_owned(),
            user.gid.to_string(),
        ];
        if !user.groups.is_empty() {
            let groups: Vec<String> = user.groups.iter().map(u32::to_string).collect();
            argv.push("--groups".to_owned());
            argv.push(groups.join(","));
        }
        argv.push(self.path.clone());
        argv
    }

    /// Parses the arguments after the program name; `args[0]` must be `empty`. Exactly
    /// what [`EmptyArgs::render`] writes: the groups in ascending order, each once.
    pub fn parse(args: &[String]) -> Result<EmptyArgs, BadArgs> {
        let id = |flag: &str, text: &str| -> Result<u32, BadArgs> {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(format!("{flag} takes a number, got {text:?}")));
            }
            text.parse()
                .map_err(|_| bad(format!("{flag} {text:?} is out of range")))
        };
        let (uid, gid, groups, path) = match args {
            [first, u, uid, g, gid, path] if first == EMPTY && u == "--uid" && g == "--gid" => {
                (uid, gid, None, path)
            }
            [first, u, uid, g, gid, gs, groups, path]
                if first == EMPTY && u == "--uid" && g == "--gid" && gs == "--groups" =>
            {
                (uid, gid, Some(groups), path)
            }
            _ => {
                return Err(bad(
                    "empty takes --uid U --gid G [--groups G1,G2,...] PATH, in that order",
                ))
            }
        };
        let groups = match groups {
            None => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|g| id("--groups", g))
                .collect::<Result<Vec<u32>, _>>()?,
        };
        if groups.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(bad("--groups must be in ascending order, each once"));
        }
        Ok(EmptyArgs {
            user: crate::as_user::User {
                uid: id("--uid", uid)?,
                gid: id("--gid", gid)?,
                groups,
            },
            path: path.clone(),
        })
    }
}
