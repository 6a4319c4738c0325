"""test/image — the OCI image of hack/build-image.sh (suite "image" of
test/run.sh): built from BUILD/bin without Docker, then read back as a
registry or containerd would: the layout (oci-layout, index.json, blobs by
digest), the config (entrypoint, user, version label), the one layer's
content (the three programs, their libraries and loader, no shell), the
version tag shared by agent/version.h, the manifests, the Helm chart and the
Containerfile, and a reproducible digest. As root the programs run chrooted
into the unpacked layer."""
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("AIQOS_BUILD", os.path.join(TOP, "build"))


def version():
    with open(os.path.join(TOP, "agent", "version.h")) as f:
        m = re.search(r'^#define AIQOS_VERSION "([^"]+)"$', f.read(), re.M)
    assert m, "no AIQOS_VERSION in agent/version.h"
    return m.group(1)


def build(out, *args, epoch="0"):
    env = dict(os.environ, SOURCE_DATE_EPOCH=epoch)
    p = subprocess.run(["bash", os.path.join(TOP, "hack", "build-image.sh"), "--bin-dir",
                        os.path.join(BUILD, "bin"), "--out", out, *args], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


class Image:
    def __init__(self, path):
        self.tar = tarfile.open(path)
        self.names = set(self.tar.getnames())

    def read(self, name):
        return self.tar.extractfile(name).read()

    def blob(self, digest):
        algo, hexd = digest.split(":")
        data = self.read("blobs/%s/%s" % (algo, hexd))
        assert hashlib.sha256(data).hexdigest() == hexd, "blob %s: digest mismatch" % digest
        return data


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    d = tmp_path_factory.mktemp("image")
    out = str(d / "aiqos.oci.tar")
    build(out)
    return out


def test_layout(image):
    img = Image(image)
    assert json.loads(img.read("oci-layout")) == {"imageLayoutVersion": "1.0.0"}
    idx = json.loads(img.read("index.json"))
    assert idx["schemaVersion"] == 2 and len(idx["manifests"]) == 1
    desc = idx["manifests"][0]
    assert desc["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    v = version()
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == v
    assert desc["annotations"]["io.containerd.image.name"] == "docker.io/library/aiqos:" + v
    man = json.loads(img.blob(desc["digest"]))
    assert len(img.blob(desc["digest"])) == desc["size"]
    assert man["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert [l["mediaType"] for l in man["layers"]] == ["application/vnd.oci.image.layer.v1.tar+gzip"]
    docker = json.loads(img.read("manifest.json"))
    assert docker[0]["RepoTags"] == ["docker.io/library/aiqos:" + v]


def test_config(image):
    img = Image(image)
    man = json.loads(img.blob(json.loads(img.read("index.json"))["manifests"][0]["digest"]))
    cfg = json.loads(img.blob(man["config"]["digest"]))
    c = cfg["config"]
    assert cfg["os"] == "linux"
    assert c["Entrypoint"] == ["/usr/local/bin/aiqos-agent"]
    assert c["User"] == "0:0"
    assert c["Labels"]["org.opencontainers.image.version"] == version()
    assert c["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"
    layer = img.blob(man["layers"][0]["digest"])
    diff = "sha256:" + hashlib.sha256(__import__("gzip").decompress(layer)).hexdigest()
    assert cfg["rootfs"]["diff_ids"] == [diff]


def layer_members(image):
    img = Image(image)
    man = json.loads(img.blob(json.loads(img.read("index.json"))["manifests"][0]["digest"]))
    return tarfile.open(fileobj=io.BytesIO(img.blob(man["layers"][0]["digest"])), mode="r:gz")


def test_layer_content(image):
    lt = layer_members(image)
    names = {m.name: m for m in lt.getmembers()}
    for p in ("usr/local/bin/aiqos", "usr/local/bin/aiqos-agent", "usr/local/bin/aiqosctl"):
        assert p in names and names[p].isfile() and names[p].mode & 0o111, p
    for d in ("etc/aiqos", "run/aiqos", "run/netns", "var/lib/aiqos", "host/opt/cni/bin", "host/etc/cni/net.d",
              "host/proc/sys/net", "tmp"):
        assert d in names and names[d].isdir(), d
    # no shell, no package manager, no passwd (the agent runs as uid 0 by number)
    for absent in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/apt", "etc/passwd"):
        assert absent not in names, absent
    assert all(m.uid == 0 and m.gid == 0 and m.mtime == 0 for m in lt.getmembers())
    assert any(re.search(r"ld-linux[^/]*\.so", n) for n in names), "no dynamic loader in the layer"


def test_version_tag_agrees_everywhere():
    v = version()
    with open(os.path.join(TOP, "manifests", "helm", "aiqos", "Chart.yaml")) as f:
        chart = f.read()
    assert re.search(r'^appVersion: "%s"$' % re.escape(v), chart, re.M), "Chart.yaml appVersion != " + v
    assert re.search(r'^version: %s$' % re.escape(v), chart, re.M), "Chart.yaml version != " + v
    for k in ("manifests/kustomization.yaml", "manifests/uninstall/kustomization.yaml"):
        with open(os.path.join(TOP, k)) as f:
            assert 'newTag: "%s"' % v in f.read(), k
    with open(os.path.join(TOP, "agent", "Containerfile")) as f:
        assert "ARG VERSION=%s\n" % v in f.read()


def test_reproducible_and_tagged(image, tmp_path):
    # Another name only changes the index's annotations: the same manifest
    # (config and layer) proves the build reproducible.
    named = str(tmp_path / "named.tar")
    out = build(named, "--name", "registry.example.com/aiqos/aiqos:v9")
    assert "registry.example.com/aiqos/aiqos:v9" in out
    a = json.loads(Image(image).read("index.json"))["manifests"][0]
    b = json.loads(Image(named).read("index.json"))["manifests"][0]
    assert a["digest"] == b["digest"]
    assert b["annotations"]["io.containerd.image.name"] == "registry.example.com/aiqos/aiqos:v9"
    assert b["annotations"]["org.opencontainers.image.ref.name"] == "v9"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("chroot"), reason="needs root (chroot)")
def test_programs_run_in_the_layer(image, tmp_path):
    root = tmp_path / "rootfs"
    root.mkdir()
    lt = layer_members(image)
    lt.extractall(str(root), filter="fully_trusted") if hasattr(tarfile, "data_filter") else lt.extractall(str(root))
    p = subprocess.run(["chroot", str(root), "/usr/local/bin/aiqos-agent", "--version"], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and version() in p.stdout + p.stderr, (p.stdout, p.stderr)
    p = subprocess.run(["chroot", str(root), "/usr/local/bin/aiqosctl", "--help"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
