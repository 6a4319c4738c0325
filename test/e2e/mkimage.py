#!/usr/bin/env python3
"""test/e2e/mkimage.py — a single-layer OCI image archive from a directory, for
the node e2e's pause and example images (no Docker, no registry, no base image).

  mkimage.py --rootfs DIR --name REF --out FILE [--entrypoint JSON] [--cmd JSON]
             [--user UID:GID] [--env K=V ...] [--gzip-level N]

The image's PATH is /bin:/usr/bin:/usr/local/bin unless an --env sets PATH.

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/...)
with the reference in the io.containerd.image.name annotation, so
`ctr -n k8s.io images import FILE` names the image; a Docker-style
manifest.json is added as hack/build-image.sh does. --gzip-level (default 9;
0: an uncompressed layer, for a large binary such as kubectl: no seconds of
gzip per run). Reproducible: sorted
entries, numeric root ownership, mtime 0, gzip without a timestamp. The
reference is normalised as containerd does ("pause:1" ->
"docker.io/library/pause:1"); the normalised reference is printed.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import stat
import sys
import tarfile


def normalise(ref):
    name, tag = ref, None
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = ref.rsplit(":", 1)
    if tag is None:
        tag = "latest"
    first = name.split("/", 1)[0]
    if "/" not in name:
        name = "docker.io/library/" + name
    elif "." not in first and ":" not in first and first != "localhost":
        name = "docker.io/" + name
    full = name + ":" + tag
    if not re.fullmatch(r"[a-z0-9][a-z0-9._/:-]*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", full) or "//" in full:
        sys.exit("mkimage: %r is not a valid image reference" % ref)
    return full, tag


def layer_tar(rootfs):
    """The uncompressed layer: every entry below rootfs, sorted, root-owned."""
    buf = io.BytesIO()
    entries = []
    for dirpath, dirnames, filenames in os.walk(rootfs):
        dirnames.sort()
        for n in dirnames + filenames:
            entries.append(os.path.join(dirpath, n))
    entries.sort(key=lambda p: os.path.relpath(p, rootfs))
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path in entries:
            rel = os.path.relpath(path, rootfs)
            st = os.lstat(path)
            ti = tarfile.TarInfo(rel)
            ti.mode = stat.S_IMODE(st.st_mode)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            ti.mtime = 0
            if stat.S_ISLNK(st.st_mode):
                ti.type = tarfile.SYMTYPE
                ti.linkname = os.readlink(path)
                tf.addfile(ti)
            elif stat.S_ISDIR(st.st_mode):
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif stat.S_ISREG(st.st_mode):
                ti.size = st.st_size
                with open(path, "rb") as f:
                    tf.addfile(ti, f)
            else:
                sys.exit("mkimage: %s: only files, dirs and symlinks are supported" % path)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rootfs", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--entrypoint", default=None, help="JSON list")
    ap.add_argument("--cmd", default=None, help="JSON list")
    ap.add_argument("--user", default="0:0")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--gzip-level", type=int, default=9, choices=range(0, 10), metavar="0-9")
    a = ap.parse_args()
    if not os.path.isdir(a.rootfs):
        sys.exit("mkimage: %s is not a directory" % a.rootfs)
    ref, tag = normalise(a.name)
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())

    blobs = {}

    def blob(data):
        d = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[d] = data
        return {"digest": d, "size": len(data)}

    raw = layer_tar(a.rootfs)
    if a.gzip_level:
        gz = io.BytesIO()
        with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=a.gzip_level) as g:
            g.write(raw)
        layer = blob(gz.getvalue())
        layer_type = "application/vnd.oci.image.layer.v1.tar+gzip"
    else:
        layer = blob(raw)
        layer_type = "application/vnd.oci.image.layer.v1.tar"
    path = [] if any(e.startswith("PATH=") for e in a.env) else ["PATH=/bin:/usr/bin:/usr/local/bin"]
    config = {"User": a.user, "Env": path + a.env, "WorkingDir": "/"}
    if a.entrypoint:
        config["Entrypoint"] = json.loads(a.entrypoint)
    if a.cmd:
        config["Cmd"] = json.loads(a.cmd)
    created = "1970-01-01T00:00:00Z"
    cfg = blob(json.dumps({
        "architecture": arch, "os": "linux", "created": created, "config": config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
        "history": [{"created": created, "created_by": "test/e2e/mkimage.py"}],
    }, sort_keys=True).encode())
    manifest = blob(json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": dict(cfg, mediaType="application/vnd.oci.image.config.v1+json"),
        "layers": [dict(layer, mediaType=layer_type)],
    }, sort_keys=True).encode())
    index = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [dict(manifest, mediaType="application/vnd.oci.image.manifest.v1+json",
                           platform={"architecture": arch, "os": "linux"},
                           annotations={"io.containerd.image.name": ref,
                                        "org.opencontainers.image.ref.name": tag})],
    }
    docker = [{"Config": "blobs/sha256/" + cfg["digest"][7:], "RepoTags": [ref],
               "Layers": ["blobs/sha256/" + layer["digest"][7:]]}]
    files = [("oci-layout", b'{"imageLayoutVersion":"1.0.0"}\n'),
             ("index.json", json.dumps(index, sort_keys=True).encode()),
             ("manifest.json", json.dumps(docker).encode())]
    files += [("blobs/sha256/" + d[7:], data) for d, data in sorted(blobs.items())]
    tmp = a.out + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tf:
        for d in ("blobs", "blobs/sha256"):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 0
            tf.addfile(ti)
        for name, data in files:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tf.addfile(ti, io.BytesIO(data))
    os.replace(tmp, a.out)
    print(ref)


if __name__ == "__main__":
    main()
