"""test_kind_tools.py — the two helpers the offline kind run depends on.

hack/lib/kind-runc: dockerd's runtime that drops from an OCI spec the
capabilities the bounding set lacks (kind's `--privileged` nodes on a host
whose root lacks CAP_SYS_RESOURCE). Run for real: under `setpriv
--bounding-set -sys_nice` (one capability fewer than the test's own set) with a
stand-in runc that records the spec it was handed; `create --bundle` and
`exec --process` must lose exactly that capability and keep the rest and the
arguments; with a full bounding set nothing changes.

hack/lib/kind-manifest.py: kind's default CNI/storage manifests are Go
constants built from raw strings and other constants joined by `+`.
"""
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KIND_RUNC = os.path.join(REPO, "hack", "lib", "kind-runc")
KIND_MANIFEST = os.path.join(REPO, "hack", "lib", "kind-manifest.py")

ALL = ["CAP_CHOWN", "CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_SYS_NICE", "CAP_SYS_RESOURCE"]


def own_bounding():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapBnd:"):
                return int(line.split()[1], 16)
    raise AssertionError("no CapBnd")


def spec(caps):
    return {"ociVersion": "1.0.2", "process": {"args": ["/pause"], "capabilities": {
        s: list(caps) for s in ("bounding", "effective", "inheritable", "permitted", "ambient")}}}


@pytest.fixture
def fake_runc(tmp_path):
    """A runc stand-in: records its argv and the spec file it was pointed at."""
    rec = tmp_path / "rec.json"
    script = tmp_path / "runc"
    script.write_text("""#!%s
import json, os, sys
argv = sys.argv[1:]
path = None
if "--bundle" in argv:
    path = os.path.join(argv[argv.index("--bundle") + 1], "config.json")
if "--process" in argv:
    path = argv[argv.index("--process") + 1]
with open(path) as f:
    doc = json.load(f)
with open(%r, "w") as f:
    json.dump({"argv": argv, "doc": doc}, f)
""" % (sys.executable, str(rec)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, rec


def run_wrapper(fake, args, drop=None):
    script, rec = fake
    cmd = [sys.executable, KIND_RUNC] + args
    if drop:
        if not shutil.which("setpriv"):
            pytest.skip("setpriv (util-linux) not found")
        cmd = ["setpriv", "--bounding-set", "-" + drop] + cmd
    env = dict(os.environ, AIQOS_KIND_RUNC=str(script))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    with open(rec) as f:
        return json.load(f)


@pytest.mark.skipif(not own_bounding() >> 23 & 1, reason="CAP_SYS_NICE not in this bounding set")
def test_create_drops_what_the_bounding_set_lacks(tmp_path, fake_runc):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    have = [c for c in ALL if c != "CAP_SYS_RESOURCE" or own_bounding() >> 24 & 1]
    (bundle / "config.json").write_text(json.dumps(spec(have)))
    args = ["--root", "/run/x", "--log", "/tmp/l.json", "--log-format", "json", "create", "--bundle",
            str(bundle), "--pid-file", "/tmp/p", "cid"]
    got = run_wrapper(fake_runc, args, drop="sys_nice")
    assert got["argv"] == args
    for s, caps in got["doc"]["process"]["capabilities"].items():
        assert caps == [c for c in have if c != "CAP_SYS_NICE"], s
    assert got["doc"]["process"]["args"] == ["/pause"]


@pytest.mark.skipif(not own_bounding() >> 23 & 1, reason="CAP_SYS_NICE not in this bounding set")
def test_exec_process_file_is_filtered(tmp_path, fake_runc):
    proc = tmp_path / "process.json"
    proc.write_text(json.dumps(spec(["CAP_CHOWN", "CAP_SYS_NICE"])["process"]))
    got = run_wrapper(fake_runc, ["exec", "--process", str(proc), "--detach", "cid"], drop="sys_nice")
    assert got["doc"]["capabilities"]["effective"] == ["CAP_CHOWN"]
    assert got["doc"]["capabilities"]["bounding"] == ["CAP_CHOWN"]


def test_nothing_dropped_that_the_bounding_set_has(tmp_path, fake_runc):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    have = ["CAP_CHOWN", "CAP_NET_ADMIN", "CAP_SYS_ADMIN"]
    (bundle / "config.json").write_text(json.dumps(spec(have)))
    got = run_wrapper(fake_runc, ["create", "--bundle", str(bundle), "cid"])
    assert got["doc"]["process"]["capabilities"]["permitted"] == have


def test_kind_manifest_evaluates_concatenated_constants(tmp_path):
    go = tmp_path / "c.go"
    go.write_text('package x\n\nconst img = "docker.io/kindest/kindnetd:v1"\n\n'
                  'const manifest = `\nkind: DaemonSet\n  image: ` + img + `\n  env: {{ .PodSubnet }}\n`\n')
    p = subprocess.run([sys.executable, KIND_MANIFEST, str(go), "manifest"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "\nkind: DaemonSet\n  image: docker.io/kindest/kindnetd:v1\n  env: {{ .PodSubnet }}\n"
    p = subprocess.run([sys.executable, KIND_MANIFEST, str(go), "missing"], capture_output=True, text=True)
    assert p.returncode == 1 and "no constant missing" in p.stderr
