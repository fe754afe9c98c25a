//! The program shipped into pods is static: `scripts/build-cleaner.sh` builds it
//! (`+crt-static`, profile `release-cleaner`), and this test reads its ELF program headers
//! (no `PT_INTERP`, no `DT_NEEDED`) and runs it in a chroot that holds nothing but the
//! program, as in a `scratch` or distroless image — and `/proc`, which every container
//! has and the identity check reads (`/proc/self/mountinfo`).

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NEEDED: u64 = 1;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// The program header types of a little-endian ELF64 file, and its `DT_NEEDED` count.
fn program_headers(elf: &[u8]) -> (Vec<u32>, usize) {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not ELF64");
    assert_eq!(elf[5], 1, "not little-endian");
    let phoff = u64_at(elf, 0x20) as usize;
    let phentsize = u16_at(elf, 0x36) as usize;
    let phnum = u16_at(elf, 0x38) as usize;
    let mut types = Vec::new();
    let mut needed = 0;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let p_type = u32_at(elf, ph);
        types.push(p_type);
        if p_type == PT_DYNAMIC {
            let (offset, size) = (
                u64_at(elf, ph + 0x08) as usize,
                u64_at(elf, ph + 0x20) as usize,
            );
            for entry in elf[offset..offset + size].chunks_exact(16) {
                match u64_at(entry, 0) {
                    0 => break,
                    DT_NEEDED => needed += 1,
                    _ => {}
                }
            }
        }
    }
    (types, needed)
}

fn build() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("bash")
        .arg(root.join("scripts/build-cleaner.sh"))
        .current_dir(&root)
        .output()
        .expect("run scripts/build-cleaner.sh");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = out
        .lines()
        .last()
        .and_then(|line| line.split(':').next())
        .expect("the script names the binary");
    root.join(path)
}

#[test]
fn the_release_binary_is_static_and_runs_with_nothing_around_it() {
    let bin = build();
    let elf = fs::read(&bin).expect("read the binary");
    let (types, needed) = program_headers(&elf);
    assert!(
        !types.contains(&PT_INTERP),
        "{} has an interpreter",
        bin.display()
    );
    assert_eq!(needed, 0, "{} needs shared libraries", bin.display());
    eprintln!("{}: {} bytes, static", bin.display(), elf.len());

    // The debug binary the other tests run is dynamic: the check can tell them apart.
    let (debug_types, _) = program_headers(&fs::read(support::BIN).expect("read"));
    assert!(debug_types.contains(&PT_INTERP));

    if !support::is_root() {
        return support::skip("chroot needs root");
    }
    let Some(unshare) = support::unshare(&["-m"]) else {
        return;
    };
    let sandbox = support::Sandbox::new();
    let root = sandbox.dir.path();
    fs::copy(&bin, root.join("prestop-clean")).expect("copy");
    fs::write(sandbox.target.join("f"), "x").expect("write");
    std::os::unix::fs::symlink("/canary", sandbox.target.join("link")).expect("symlink");
    // As a container runtime does: the root is a bind mount of a directory of the node
    // (so mountinfo shows its host path as the root field), with /proc inside, and the
    // node agent's socket directory mounted as the webhook mounts it.
    let agent = support::agent::NodeAgent::start();
    let script = r#"
R=$1 AGENT_DIR=$2
mount --make-rprivate /
mount --bind "$R" "$R"
mkdir "$R/proc" "$R/agent"
mount -t proc proc "$R/proc"
mount --bind -o ro "$AGENT_DIR" "$R/agent"
exec chroot "$R" /prestop-clean hook --node-agent /agent/agent.sock --target /target \
  --host "$R/target"
"#;
    let output = Command::new(unshare)
        .args(["-m", "sh", "-euc", script, "sh"])
        .arg(root)
        .arg(agent.socket.parent().expect("socket directory"))
        .output()
        .expect("run chroot");
    let err = support::stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{err}");
    assert!(
        err.starts_with("prestop-clean: emptied /target: 2 entries, 1 B in "),
        "{err}"
    );
    sandbox.assert_emptied();
    sandbox.assert_canary();
}
