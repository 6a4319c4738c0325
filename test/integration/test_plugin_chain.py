"""aiqos chained after the reference plugins, the way runtimes do it: a
kindnet-like ptp + host-local conflist (0.3.1, as kind writes it), every
supported cniVersion, and bridge + host-local (two host-side interfaces in
the result: the bridge and the veth)."""

import pytest

import cni

ANN = {"ai.workload": "inference"}


def _kindnet_conflist(lab, version="0.3.1"):
    """What kindnetd writes to /etc/cni/net.d/10-kindnet.conflist (portmap
    left out: it would touch the host's iptables), with aiqos appended."""
    ptp = {
        "type": "ptp",
        "ipMasq": False,
        "ipam": {
            "type": "host-local",
            "dataDir": lab.ipam_dir,
            "ranges": [[{"subnet": lab.subnet()}]],
            "routes": [{"dst": "0.0.0.0/0"}],
        },
        "mtu": 1500,
    }
    return {"cniVersion": version, "name": "kindnet", "plugins": [ptp, lab.aiqos_conf()]}


def test_kindnet_031_conflist(lab):
    att = lab.attachment(conflist=_kindnet_conflist(lab), annotations=ANN,
                         bandwidth={"egressRate": 10_000_000, "egressBurst": cni.BURST_CONTAINERD})
    run = att.add()
    out = run.json
    base = att.base_result()
    assert out["cniVersion"] == "0.3.1", run.describe()
    # a valid 0.3.1 result: ips carry "version", interface indexes point into interfaces
    assert out == base, run.describe()
    assert out["ips"] and all(ip.get("version") == "4" for ip in out["ips"]), run.describe()
    for ip in out["ips"]:
        assert 0 <= ip["interface"] < len(out["interfaces"]), out
    assert any(i.get("sandbox") == att.netns.path for i in out["interfaces"]), out
    ns = att.netns.name
    assert cni.read_sysctl(ns, "net.ipv4.tcp_ecn") == "1"
    assert cni.root_qdisc(ns, "eth0")["kind"] == "htb", cni.tc_summary(ns, "eth0")
    s = att.state()
    assert s is not None and s["class"] == "inference", lab.state_dir_entries()
    # kind never calls CHECK with 0.3.1; DEL of the whole list in reverse
    for r in att.delete():
        r.assert_ok(output=False)
    assert lab.state_jsons() == []


@pytest.mark.parametrize("version", cni.ALL_VERSIONS)
def test_ptp_chain_every_version(lab, version):
    att = lab.attachment(version=version, annotations=ANN)
    run = att.add()
    assert run.json == cni.convert_result(att.base_result(), version), run.describe()
    assert run.json["cniVersion"] == version
    if cni.version_tuple(version) < (1, 0, 0):
        assert all("version" in ip for ip in run.json["ips"]), run.json
    assert cni.read_sysctl(att.netns.name, "net.ipv4.tcp_notsent_lowat") == "16384"
    if cni.version_tuple(version) >= (0, 4, 0):
        att.check().assert_ok(output=False)
    for r in att.delete():
        r.assert_ok(output=False)
    assert lab.state_jsons() == [], lab.state_dir_entries()


@pytest.mark.parametrize("version", ["0.4.0", "1.0.0"])
def test_bridge_chain_shapes_the_veth_not_the_bridge(lab, version):
    bridge = lab.bridge_name()
    att = lab.attachment(
        version=version,
        base_conf=lab.bridge_conf(bridge),
        annotations=ANN,
        bandwidth={"ingressRate": 10_000_000, "egressRate": 10_000_000},
    )
    run = att.add()
    assert run.json == cni.convert_result(att.base_result(), version), run.describe()
    host = att.host_veth()
    assert host and host != bridge, att.base_result()
    assert cni.link(None, host).get("master") == bridge
    hc = {c["handle"]: c for c in cni.tc_classes(None, host)}
    assert hc.get("1:10", {}).get("rate_bps") == 10_000_000, cni.tc_summary(None, host)
    assert [q["kind"] for q in cni.tc_qdiscs(None, bridge)] == ["noqueue"], cni.tc_summary(None, bridge)
    ns = att.netns.name
    pc = {c["handle"]: c for c in cni.tc_classes(ns, "eth0")}
    assert pc.get("1:10", {}).get("rate_bps") == 10_000_000, cni.tc_summary(ns, "eth0")
    att.check().assert_ok(output=False)
    r = att.delete(only_aiqos=True)[0]
    r.assert_ok(output=False)
    assert [q["kind"] for q in cni.tc_qdiscs(None, host)] == ["noqueue"], cni.tc_summary(None, host)


def test_two_pods_on_one_bridge(lab):
    bridge = lab.bridge_name()
    conf = lab.bridge_conf(bridge)
    a = lab.add(base_conf=conf, annotations=ANN, bandwidth={"ingressRate": 10_000_000})
    b = lab.add(base_conf=conf, annotations={"ai.workload": "training"}, bandwidth={"ingressRate": 20_000_000})
    ra = {c["handle"]: c for c in cni.tc_classes(None, a.host_veth())}.get("1:10", {}).get("rate_bps")
    rb = {c["handle"]: c for c in cni.tc_classes(None, b.host_veth())}.get("1:10", {}).get("rate_bps")
    assert (ra, rb) == (10_000_000, 20_000_000)
    # deleting one leaves the other alone
    a.delete(only_aiqos=True)[0].assert_ok(output=False)
    assert cni.root_qdisc(None, b.host_veth())["kind"] == "htb"
    b.check().assert_ok(output=False)


def test_chain_with_cni_args_of_containerd(lab):
    # containerd's CNI_ARGS; aiqos must accept them (IgnoreUnknown=1)
    cid = "f" * 64
    att = lab.attachment(annotations=ANN, container_id=cid,
                         cni_args="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=infer-0;"
                         f"K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID=0f8c6a0e-1b2c-4d3e-8f90-123456789abc;"
                         "SOME_FUTURE_KEY=1")
    att.add()
    s = att.state()
    assert s is not None and s["class"] == "inference"


def test_dual_stack_ptp_chain(lab):
    """prevResult with an IPv4 and an IPv6 address: passed through intact,
    recorded in the state, and both addresses stay on the pod interface."""
    v4 = lab.subnet()
    n = v4.split(".")[2]
    ipam = lab.ipam(v4)
    ipam["ranges"] = [[{"subnet": v4}], [{"subnet": f"fd00:199:{int(n):x}::/64"}]]
    ipam["routes"] = [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
    base = {"type": "ptp", "ipMasq": False, "mtu": 1500, "ipam": ipam}
    att = lab.attachment(base_conf=base, annotations=ANN, bandwidth={"egressRate": 10_000_000})
    run = att.add()
    assert run.json == cni.convert_result(att.base_result(), att.version), run.describe()
    fams = sorted(":" in ip["address"] for ip in run.json["ips"])
    assert fams == [False, True], run.json["ips"]
    s = att.assert_tuned()
    assert len(s.get("ips", [])) == 2, s.get("ips")
    att.check().assert_ok(output=False)
