"""CHECK (cniVersion >= 0.4.0): passes on what ADD left, fails with code 101
naming the item after the kernel drifted (changed behind the plugin's back)."""

import os

import pytest

import cni

BW = {"egressRate": 10_000_000, "ingressRate": 10_000_000}


@pytest.mark.parametrize("version", ["0.4.0", "1.0.0", "1.1.0"])
def test_check_passes_after_add(lab, version):
    att = lab.add(version=version, annotations={"ai.workload": "inference"}, bandwidth=BW)
    r = att.check()
    r.assert_ok(output=False)
    assert r.stdout.strip() == "", f"CHECK success must print nothing{r.describe()}"


def test_check_passes_for_training_and_default(lab):
    for ann in ({"ai.workload": "training"}, {}):
        att = lab.add(annotations=ann)
        att.check().assert_ok(output=False)


def test_check_detects_deleted_pod_qdisc(lab):
    att = lab.add(annotations={"ai.workload": "inference"}, bandwidth=BW)
    ns = att.netns.name
    assert cni.root_qdisc(ns, "eth0")["kind"] == "htb"
    cni.sh(*cni.in_ns(ns, "tc", "qdisc", "del", "dev", "eth0", "root"))
    r = att.check()
    e = r.assert_error(101)
    s = att.state()
    # the message names an applied egress item of eth0
    items = [c["id"] for c in s["choices"] if c["status"] in ("applied", "degraded") and c["id"].startswith("egress")]
    assert items, s["choices"]
    text = r.error_text()
    assert any(i in text for i in items), f"CHECK error does not name any of {items}: {e}"


def test_check_detects_changed_rate(lab):
    att = lab.add(bandwidth={"egressRate": 10_000_000})
    ns = att.netns.name
    assert "1:10" in {c["handle"] for c in cni.tc_classes(ns, "eth0")}, cni.tc_summary(ns, "eth0")
    cni.sh(*cni.in_ns(ns, "tc", "class", "change", "dev", "eth0", "parent", "1:", "classid", "1:10",
                      "htb", "rate", "20mbit"))
    assert {c["handle"]: c for c in cni.tc_classes(ns, "eth0")}["1:10"]["rate_bps"] == 20_000_000
    r = att.check()
    r.assert_error(101)


def test_check_detects_deleted_host_qdisc(lab):
    att = lab.add(bandwidth={"ingressRate": 10_000_000})
    host = att.host_veth()
    assert cni.root_qdisc(None, host)["kind"] == "htb", cni.tc_summary(None, host)
    cni.sh("tc", "qdisc", "del", "dev", host, "root")
    r = att.check()
    r.assert_error(101)
    assert host in r.error_text() or "ingress" in r.error_text(), r.describe()


def test_check_detects_sysctl_drift(lab):
    att = lab.add(annotations={"ai.workload": "inference"})
    ns = att.netns.name
    assert cni.read_sysctl(ns, "net.ipv4.tcp_ecn") == "1"
    cni.write_sysctl(ns, "net.ipv4.tcp_ecn", "2")
    assert cni.read_sysctl(ns, "net.ipv4.tcp_ecn") == "2"
    r = att.check()
    r.assert_error(101)
    assert "tcp_ecn" in r.error_text(), r.describe()


def test_check_detects_cc_drift(lab):
    att = lab.add(annotations={"ai.workload": "training"})
    ns = att.netns.name
    cni.write_sysctl(ns, "net.ipv4.tcp_congestion_control", "reno")
    r = att.check()
    r.assert_error(101)
    assert "congestion" in r.error_text() or "cc" in r.error_text(), r.describe()


def test_check_skipped_items_are_not_drift(lab):
    # fq_codel is missing here: CHECK must not demand it
    att = lab.add(annotations={"ai.workload": "inference"})
    att.check().assert_ok(output=False)


def test_check_without_state_is_error(lab):
    att = lab.add(annotations={"ai.workload": "inference"})
    for f in att.state_files():
        os.unlink(os.path.join(lab.state_dir, f))
    r = att.check()
    r.assert_error()
