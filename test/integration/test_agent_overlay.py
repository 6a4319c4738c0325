"""test_agent_overlay.py — a lab node whose pod network is a VXLAN overlay
built as Flannel builds it (the pods routed; `vx0`, VNI 42 on UDP 8472 over
the uplink, and Calico's `vxlan.calico` on 4789; the other node's pod CIDR routed through it with a permanent
neighbour and an fdb entry toward that node): the pods' packets reach the
uplink encapsulated, the node's address outside, and still land in their
pod's class of the uplink's tree, by the address inside the encapsulation.
Outcome checked, not layout: the packets each class sent. Root, network
namespaces, the CI kernel (vxlan)."""
import time

import pytest

import agentlab
from agentlab import class_packets, wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
CONFIG = {"uplinkRate": "500mbit", "downlink": False, "debounceMs": 50, "mixedHoldSeconds": 1}
REMOTE_CIDR, REMOTE_GW, REMOTE_MAC = "10.98.1.0/24", "10.98.1.0", "0e:00:00:00:01:01"


def vxlan_overlay(node, dev="vx0", port=8472):
    """Flannel's VXLAN (flannel.1, 8472); Calico's is vxlan.calico on 4789."""
    up_ip = f"{node.uplink_net}.2"
    node.sh("ip", "link", "add", dev, "type", "vxlan", "id", "42", "dev", "up0", "dstport", str(port), "local", up_ip,
            "nolearning")
    node.sh("ip", "link", "set", dev, "mtu", "1450", "up")
    node.sh("ip", "addr", "add", "10.98.0.0/32", "dev", dev)
    node.sh("ip", "route", "add", REMOTE_CIDR, "via", REMOTE_GW, "dev", dev, "onlink")
    node.sh("ip", "neigh", "add", REMOTE_GW, "lladdr", REMOTE_MAC, "dev", dev, "nud", "permanent")
    node.sh("bridge", "fdb", "append", REMOTE_MAC, "dev", dev, "dst", f"{node.uplink_net}.1")


@pytest.mark.parametrize("dev,port", [("vx0", 8472), ("vxlan.calico", 4789)], ids=["flannel", "calico"])
def test_pods_classified_inside_the_vxlan_encapsulation(node, dev, port):
    vxlan_overlay(node, dev, port)
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)

    def tree():
        s = node.status(check=False)
        r = node.root()
        return s and s["mode"] == "mixed" and r and r["kind"] == "htb" and \
            {"1:10", "1:20", "1:30"} <= set(class_packets(node)) and len(node.filters()) == 2
    try:
        wait_until(tree, 10, "mixed, the HTB tree on up0")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None
    time.sleep(0.3)
    for pod, cls, others in ((inf, "1:10", ("1:30",)), (train, "1:30", ("1:10",))):
        before = class_packets(node)
        agentlab.send_udp(pod.ns, "10.98.1.5", n=100)
        after = wait_until(lambda: (lambda c: c if c[cls] - before[cls] >= 100 else None)(class_packets(node)), 5,
                           f"{pod.name}'s 100 encapsulated packets in {cls}")
        for o in others:
            assert after[o] - before[o] < 5, (pod.name, before, after)
    # they were encapsulated: the node's address outside, UDP 8472
    # the classifier did it (a clsact filter, or a tcx link where the kernel has tcx)
    assert node.classifier_hooked(), node.tc_summary()
    # the agent knows the datapath: vx0 sends by the uplink, 50 bytes a
    # packet, counted in uplinkOverhead (not set in the config: 24 + 50)
    dp = node.status()["datapath"]
    assert dp["encapsulation"] == "vxlan" and dp["tunnelHeaderBytes"] == 50, dp
    assert dp["uplinkOverhead"] == 74 and dp["uplinkOverheadFrom"] == "auto", dp
    assert [{k: t[k] for k in ("device", "kind", "port", "link", "outer", "viaUplink", "headerBytes")}
            for t in dp["tunnels"]] == [{"device": dev, "kind": "vxlan", "port": port, "link": "up0",
                                         "outer": "ipv4", "viaUplink": True, "headerBytes": 50}], dp
    assert "overhead 74" in node.sh("tc", "class", "show", "dev", "up0").stdout
    m = node.metrics()
    assert f'aiqos_datapath_info{{encapsulation="vxlan",tunnel="{dev}",port="{port}",header_bytes="50",' in m, m
    assert 'aiqos_uplink_overhead_bytes{from="auto"} 74' in m, m
    text = node.aiqosctl("status").stdout
    assert f"datapath: encapsulation vxlan ({dev} vxlan port {port} on up0 over ipv4, 50 bytes, via the uplink)" in \
        text, text
    assert "uplinkOverhead: 74 bytes (auto)" in text, text


def test_uplink_overhead_set_in_the_config_is_kept(node):
    """uplinkOverhead in the config wins over the tunnel's header."""
    vxlan_overlay(node)
    node.start_agent(dict(CONFIG, uplinkOverhead=30))
    node.add_pod(INF)
    node.add_pod(TRAIN)
    wait_until(lambda: "overhead 30" in node.sh("tc", "class", "show", "dev", "up0").stdout, 10,
               "HTB classes counting 30 bytes")
    dp = node.status()["datapath"]
    assert dp["uplinkOverhead"] == 30 and dp["uplinkOverheadFrom"] == "config", dp


def test_download_classified_inside_the_vxlan_encapsulation(node):
    """The download direction: VXLAN from the other node toward the pods
    arrives at the uplink with the node's address outside; the download
    classifier names the pod's class on the ifb's tree from the inner
    destination (the ifb's u32 filters on destination see only the node)."""
    vxlan_overlay(node)
    node.start_agent(dict(CONFIG, downlink=True, downlinkRate="400mbit"))
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    ifb = "aiqos-ifb0"

    def tree():
        s = node.status(check=False)
        return s and s["uplink"]["downlink"].get("classifier") and \
            {"1:10", "1:20", "1:30"} <= set(class_packets(node, ifb)) and len(node.filters(ifb)) == 2
    try:
        wait_until(tree, 10, "the download tree, its classifier and both pods")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None
    # the other node: its vxlan device toward this node's uplink
    fab = node.fabric.name
    for cmd in (["ip", "link", "add", "vx1", "type", "vxlan", "id", "42", "dev", "fab0", "dstport", "8472",
                 "local", f"{node.uplink_net}.1", "nolearning"],
                ["ip", "link", "set", "vx1", "mtu", "1450", "up"],
                ["ip", "addr", "add", "10.98.1.0/32", "dev", "vx1"],
                ["ip", "neigh", "add", "10.98.0.0", "lladdr", "0e:00:00:00:00:01", "dev", "vx1", "nud", "permanent"],
                ["bridge", "fdb", "append", "0e:00:00:00:00:01", "dev", "vx1", "dst", f"{node.uplink_net}.2"]):
        agentlab.cni.sh("ip", "netns", "exec", fab, *cmd)
    for pod in (inf, train):
        agentlab.cni.sh("ip", "netns", "exec", fab, "ip", "route", "replace", f"{pod.ip()}/32", "via", "10.98.0.0",
                        "dev", "vx1", "onlink")
    # a burst toward the training pod trips the gate; what follows toward
    # the inference pod takes the ifb, in its class
    before = class_packets(node, ifb)
    agentlab.send_udp(fab, inf.ip(), n=200, burst=300, burst_to=train.ip())
    after = wait_until(lambda: (lambda c: c if c["1:10"] - before["1:10"] >= 150 else None)(class_packets(node, ifb)),
                       5, "the inference pod's packets in 1:10 on the ifb")
    assert after["1:30"] - before["1:30"] >= 50, (before, after)
    assert after["1:20"] - before["1:20"] < 20, (before, after)


def test_a_tunnel_that_appears_later_is_discovered(node):
    """Flannel creates flannel.1 after the agent started: the link monitor
    sees the tunnel device, the datapath becomes vxlan and the classes count
    its header (24 -> 74) without a restart; it goes again: back to 24."""
    node.start_agent(CONFIG)
    node.add_pod(INF)
    node.add_pod(TRAIN)
    wait_until(lambda: "overhead 24" in node.sh("tc", "class", "show", "dev", "up0").stdout, 10,
               "HTB classes counting 24 bytes")
    assert node.status()["datapath"]["encapsulation"] == "none"
    vxlan_overlay(node)
    wait_until(lambda: "overhead 74" in node.sh("tc", "class", "show", "dev", "up0").stdout, 10,
               "HTB classes counting 74 bytes once vx0 exists")
    assert node.status()["datapath"]["encapsulation"] == "vxlan"
    node.sh("ip", "link", "del", "vx0")
    wait_until(lambda: "overhead 24" in node.sh("tc", "class", "show", "dev", "up0").stdout, 10,
               "HTB classes counting 24 bytes once vx0 is gone")
    assert node.status()["datapath"]["tunnels"] == []
