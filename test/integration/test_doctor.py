"""test_doctor.py — `aiqosctl doctor` (agent/doctor.c) on crafted nodes: a
CNI conf dir per case and an uplink in a network namespace of its own, and
the kernel probe checked against tc(8) in a scratch netns. Exit codes 0 ok,
1 errors, 2 usage, 3 warnings only; each missing kernel feature listed once
with its module and CONFIG_ option; every finding a stable id, every warning
and error a fix; fallback reasons in words, never errno text; the install
step logs the same findings."""
import json
import os
import subprocess
import uuid

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(os.environ.get("AIQOS_BUILD") or os.path.join(REPO, "build"))
CTL = os.path.join(BUILD, "bin", "aiqosctl")
AGENT = os.path.join(BUILD, "bin", "aiqos-agent")
ERRNO_TEXTS = ("No such file or directory", "Operation not supported", "Invalid argument")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, qdiscs)")


def sh(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture
def netns():
    name = "opsdoc-" + uuid.uuid4().hex[:6]
    sh("ip", "netns", "add", name)
    sh("ip", "-n", name, "link", "add", "up0", "type", "veth", "peer", "name", "up0p")
    sh("ip", "-n", name, "link", "set", "up0p", "up")
    sh("ip", "-n", name, "link", "set", "up0", "up")
    sh("ip", "-n", name, "addr", "add", "192.0.2.2/24", "dev", "up0")
    sh("ip", "-n", name, "route", "add", "default", "via", "192.0.2.1")
    yield name
    sh("ip", "netns", "del", name, check=False)


def conf(tmp_path, files):
    d = tmp_path / "net.d"
    d.mkdir()
    for name, body in files.items():
        (d / name).write_text(body if isinstance(body, str) else json.dumps(body))
    return str(d)


def conflist(name, *types):
    return {"cniVersion": "1.0.0", "name": name, "plugins": [{"type": t} for t in types]}


def doctor(netns, conf_dir, *args, state_dir="/nonexistent"):
    p = subprocess.run(["ip", "netns", "exec", netns, CTL, "doctor", "--json", "--cni-conf-dir", conf_dir,
                        "--state-dir", state_dir, *args], capture_output=True, text=True, timeout=120)
    j = json.loads(p.stdout)
    assert j["exitCode"] == p.returncode, (p.returncode, p.stdout, p.stderr)
    for f in j["findings"]:
        assert f["id"] and " " not in f["id"], f
        if f["level"] in ("warn", "error"):
            assert f["fix"], f
    return p.returncode, j["findings"]


def texts(findings, section=None, level=None):
    return [f["text"] for f in findings if (section is None or f["section"] == section) and
            (level is None or f["level"] == level)]


def test_clean_node_exits_0(netns, tmp_path):
    d = conf(tmp_path, {"10-kindnet.conflist": conflist("kindnet", "ptp", "portmap")})
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert code == 0, f
    assert any("10-kindnet.conflist" in t and "ptp,portmap" in t for t in texts(f, "cni", "ok"))
    assert any("up0" in t and "kernel's default" in t for t in texts(f, "uplink", "ok"))
    assert any("not chained yet" in t for t in texts(f, "cni", "info"))


def test_bandwidth_in_calico_chain_warns_with_way_out(netns, tmp_path):
    d = conf(tmp_path, {"10-calico.conflist": conflist("k8s-pod-network", "calico", "bandwidth", "portmap")})
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert code == 3
    w = [x for x in f if x["level"] == "warn" and x["section"] == "cni"]
    assert len(w) == 1 and "bandwidth plugin (Calico's default chain includes it)" in w[0]["text"]
    assert w[0]["id"] == "cni.bandwidth-plugin"
    assert "remove the bandwidth entry" in w[0]["fix"]


def test_broken_primary_is_an_error(netns, tmp_path):
    d = conf(tmp_path, {"10-broken.conflist": "{not json"})
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert code == 1
    assert any("10-broken.conflist" in t for t in texts(f, "cni", "error"))


def test_chained_copy_is_seen(netns, tmp_path):
    d = conf(tmp_path, {"10-kindnet.conflist": conflist("kindnet", "ptp")})
    sh(AGENT, "install", "--cni-conf-dir", d)
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert code == 0, f
    assert any("00-aiqos-10-kindnet.conflist" in t and "ptp,aiqos" in t for t in texts(f, "cni", "ok"))


def test_foreign_uplink_tree_warns_and_ours_does_not(netns, tmp_path):
    d = conf(tmp_path, {"10-kindnet.conflist": conflist("kindnet", "ptp")})
    sh("ip", "netns", "exec", netns, "tc", "qdisc", "add", "dev", "up0", "root", "handle", "7:", "htb")
    sh("ip", "netns", "exec", netns, "tc", "class", "add", "dev", "up0", "parent", "7:", "classid", "7:1", "htb",
       "rate", "1mbit")
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert code == 3
    w = [x for x in f if x["section"] == "uplink" and x["level"] == "warn"]
    # a classful tree aiqos cannot re-create is left alone (as README and
    # docs/operations/coexistence.md say), not replaced
    assert len(w) == 1 and "foreign qdisc tree (root htb 7:)" in w[0]["text"] and "up0" in w[0]["fix"], w
    assert w[0]["id"] == "uplink.foreign-tree" and "leaves it alone" in w[0]["text"], w
    # with the agent's record of the original root, the tree is aiqos's own
    st = tmp_path / "state"
    st.mkdir()
    (st / "uplink.json").write_text("{}")
    code, f = doctor(netns, d, "--no-kernel-probe", state_dir=str(st))
    assert code == 0, f
    assert any("set by aiqos" in t for t in texts(f, "uplink", "ok"))


def test_cilium_primary_is_named(netns, tmp_path):
    d = conf(tmp_path, {"05-cilium.conflist": conflist("cilium", "cilium-cni")})
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert any("Cilium" in t for t in texts(f, "cni", "ok"))
    assert any("bandwidth manager off" in t for t in texts(f, "uplink", "info"))


def test_no_uplink_warns(tmp_path):
    name = "opsdoc-" + uuid.uuid4().hex[:6]
    sh("ip", "netns", "add", name)
    try:
        d = conf(tmp_path, {"10-kindnet.conflist": conflist("kindnet", "ptp")})
        code, f = doctor(name, d, "--no-kernel-probe")
        assert code == 3 and any("no default route" in t for t in texts(f, "uplink", "warn"))
    finally:
        sh("ip", "netns", "del", name, check=False)


def kernel_has(kind):
    """Independent answer: does tc(8) create this root qdisc in a scratch netns?"""
    p = subprocess.run(["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", kind], capture_output=True,
                       text=True, timeout=30)
    return p.returncode == 0


def test_kernel_probe_matches_tc(netns, tmp_path):
    d = conf(tmp_path, {"10-kindnet.conflist": conflist("kindnet", "ptp")})
    code, f = doctor(netns, d)
    sections = {x["section"] for x in f}
    for prof in ("inference", "inference-strict", "training", "training-dctcp"):
        assert "profile " + prof in sections
    for x in f:
        for e in ERRNO_TEXTS:
            assert e not in x["text"], x
    inf = texts(f, "profile inference")
    trn = texts(f, "profile training")
    missing = {x["id"]: x for x in f if x["id"].startswith("kernel.missing.")}
    # each missing feature once, in the kernel section, with its module and option
    ids = [x["id"] for x in f if x["id"].startswith("kernel.missing.")]
    assert len(ids) == len(set(ids)), ids
    assert all(x["section"] == "kernel" and x["level"] == "warn" for x in missing.values())
    if kernel_has("fq_codel"):
        assert any("egress.root=fq_codel" in t for t in inf), inf
        assert "kernel.missing.sch_fq_codel" not in missing
    else:
        assert any("egress.root=nothing (not fq_codel)" in t for t in inf), inf
        m = missing["kernel.missing.sch_fq_codel"]
        assert "the fq_codel qdisc (CONFIG_NET_SCH_FQ_CODEL)" in m["text"], m
        assert m["fix"].startswith("modprobe sch_fq_codel") and "CONFIG_NET_SCH_FQ_CODEL=m" in m["fix"], m
    if kernel_has("fq"):
        assert any("egress.root=fq" in t for t in trn), trn
    else:
        assert missing["kernel.missing.sch_fq"]["fix"].startswith("modprobe sch_fq "), missing
    # htb is on every kernel this runs on: a limited pod gets its shaper
    lim = texts(f, "profile training with kubernetes.io/egress-bandwidth 1G")
    assert kernel_has("htb") and any("egress.root=htb" in t for t in lim), lim
    # a warning per missing feature (and per refusal), not per profile
    n_warn = sum(1 for x in f if x["level"] == "warn")
    assert n_warn == len(missing) + sum(1 for x in f if x["id"].endswith(".refused")), f
    assert code in (0, 3)


def test_text_output_and_exit_code(netns, tmp_path):
    d = conf(tmp_path, {"10-calico.conflist": conflist("k8s-pod-network", "calico", "bandwidth")})
    p = subprocess.run(["ip", "netns", "exec", netns, CTL, "doctor", "--no-kernel-probe", "--cni-conf-dir", d],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 3
    assert "  warn  the chain already has the bandwidth plugin" in p.stdout
    assert "[cni.bandwidth-plugin]" in p.stdout
    assert "        fix: remove the bandwidth entry" in p.stdout
    assert p.stdout.rstrip().endswith("1 warning, 0 errors (exit 3)")
    assert "not probed (--no-kernel-probe)" in p.stdout
    p = subprocess.run([CTL, "doctor", "--bogus"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "Usage: aiqosctl doctor" in p.stderr


def test_install_logs_the_findings(netns, tmp_path):
    d = conf(tmp_path, {"10-calico.conflist": conflist("k8s-pod-network", "calico", "bandwidth")})
    p = subprocess.run(["ip", "netns", "exec", netns, AGENT, "install", "--cni-conf-dir", d], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stderr.splitlines() if 'msg="doctor"' in l]
    assert any("section=cni" in l and "bandwidth plugin" in l and "level=warn" in l for l in lines), p.stderr
    assert any("section=uplink" in l for l in lines), p.stderr
    assert "exit=3" in p.stderr
    assert any("id=cni.bandwidth-plugin" in l for l in lines), p.stderr


def test_datapath_routed_then_vxlan_overlay(netns, tmp_path):
    """The datapath section: routed while no tunnel sends by the uplink;
    with Flannel's VXLAN device on it, encapsulated (vxlan, 50 bytes, the
    auto uplinkOverhead 74); a VXLAN on a port the classifiers do not parse
    is a warning; pod CIDRs from the primary's host-local ranges."""
    primary = {"cniVersion": "1.0.0", "name": "kindnet", "plugins": [
        {"type": "ptp", "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.3.0/24"}],
                                                                 [{"subnet": "fd00:10:244:3::/64"}]]}}]}
    d = conf(tmp_path, {"10-kindnet.conflist": primary})
    code, f = doctor(netns, d, "--no-kernel-probe")
    assert any("up0" in t and "routed" in t for t in texts(f, "datapath", "ok")), f
    assert any("10.244.3.0/24 fd00:10:244:3::/64" in t for t in texts(f, "datapath", "info")), f
    sh("ip", "-n", netns, "link", "add", "flannel.1", "type", "vxlan", "id", "1", "dev", "up0", "dstport", "8472",
       "local", "192.0.2.2", "nolearning")
    sh("ip", "-n", netns, "link", "set", "flannel.1", "up")
    code, f = doctor(netns, d, "--no-kernel-probe")
    ok = texts(f, "datapath", "ok")
    assert any("encapsulated (vxlan, 50 bytes" in t and "counts 74 bytes" in t for t in ok), f
    assert any(t.startswith("flannel.1: vxlan, port 8472, on up0, over IPv4, 50 bytes a packet, via the uplink")
               for t in texts(f, "datapath", "info")), f
    assert not texts(f, "datapath", "warn"), f
    # a VXLAN on 4790 by the uplink: its pods cannot be told apart
    sh("ip", "-n", netns, "link", "add", "vx9", "type", "vxlan", "id", "9", "dev", "up0", "dstport", "4790")
    sh("ip", "-n", netns, "link", "set", "vx9", "up")
    code, f = doctor(netns, d, "--no-kernel-probe")
    warn = [x for x in f if x["id"] == "datapath.tunnel-unparsed"]
    assert len(warn) == 1 and "vx9" in warn[0]["text"] and "4790" in warn[0]["text"], f
    assert code == 3, f
