#!/usr/bin/env python3
"""Writes a single-layer docker-archive image (the format `docker save` writes and
`ctr images import` reads) from files on this machine, so the node suite needs no registry.

    mkimage.py OUT.tar NAME:TAG [--cmd JSON] [--user UID] ENTRY...

ENTRY is `PATH=SOURCE` (a file copied with its mode), `PATH->TARGET` (a symlink) or
`PATH/` (a directory). Parent directories are created. Timestamps are zero, so the same
inputs give the same image id.
"""
import argparse
import hashlib
import io
import json
import os
import tarfile


def layer(entries):
    buf = io.BytesIO()
    seen = set()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        def add_dir(path):
            path = path.strip("/")
            if not path or path in seen:
                return
            add_dir(os.path.dirname(path))
            seen.add(path)
            info = tarfile.TarInfo(path)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if path == "tmp" else 0o755
            tar.addfile(info)

        for entry in entries:
            if "->" in entry:
                path, target = entry.split("->", 1)
                path = path.strip("/")
                add_dir(os.path.dirname(path))
                info = tarfile.TarInfo(path)
                info.type = tarfile.SYMTYPE
                info.linkname = target
                info.mode = 0o777
                tar.addfile(info)
            elif "=" in entry:
                path, source = entry.split("=", 1)
                path = path.strip("/")
                add_dir(os.path.dirname(path))
                with open(source, "rb") as f:
                    data = f.read()
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = os.stat(source).st_mode & 0o7777
                tar.addfile(info, io.BytesIO(data))
            elif entry.endswith("/"):
                add_dir(entry)
            else:
                raise SystemExit(f"mkimage: cannot read entry {entry!r}")
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("name")
    p.add_argument("--cmd", default=None, help="JSON list")
    p.add_argument("--user", default="")
    p.add_argument("entries", nargs="+")
    a = p.parse_args()

    data = layer(a.entries)
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": json.loads(a.cmd) if a.cmd else None,
            "User": a.user,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    layer_name = diff_id[len("sha256:"):] + "/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": [a.name], "Layers": [layer_name]}]

    with tarfile.open(a.out, "w") as out:
        for name, payload in [
            (config_name, config_bytes),
            (layer_name, data),
            ("manifest.json", json.dumps(manifest).encode()),
        ]:
            if "/" in name:
                d = tarfile.TarInfo(os.path.dirname(name))
                d.type = tarfile.DIRTYPE
                d.mode = 0o755
                out.addfile(d)
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            info.mode = 0o644
            out.addfile(info, io.BytesIO(payload))


if __name__ == "__main__":
    main()
