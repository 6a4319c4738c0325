"""test_agent_upload_gate.py — the gated upload tree (node.h, GATED HTB) on
this kernel (no fq): uplinkRate on a multi-queue uplink leaves the root as
it is and puts the HTB tree on aiqos-ifb1, behind the upload gate at the
clsact egress hook. Light traffic leaves without touching the ifb; a burst
over half the shaped rate takes every packet through the ifb's tree, each
pod's in its class, and back out of the uplink; the ifb and its record are
adopted on restart, and removed on idle, when the shape changes and on
--cleanup; an ifb deleted behind the agent's back comes back. The kernel
is read back with tc."""

import json
import os
import signal
import time

import agentlab
import cni
from agentlab import class_packets, send_udp, wait_until

IFB = "aiqos-ifb1"
INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
# no download tree: these tests look at the upload direction alone
CONFIG = {"uplinkRate": "400mbit", "downlink": False, "debounceMs": 50, "mixedHoldSeconds": 1}


def links(node):
    return [l["ifname"] for l in json.loads(node.sh("ip", "-j", "link", "show").stdout)]


def egress_filters(node):
    return node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout


def tree_ready(node):
    if IFB not in links(node):
        return False
    r = node.root(IFB)
    f = egress_filters(node)
    return (r and r["kind"] == "htb" and set(class_packets(node, IFB)) >= {"1:1", "1:10", "1:20", "1:30"}
            and node.classifier_hooked() and "aiqos_ugate" in f and f"Redirect to device {IFB}" in f)


def wait(node, pred, what, timeout_s=8):
    try:
        return wait_until(pred, timeout_s, what)
    except AssertionError as e:
        extra = cni.tc_summary(node.node.name, IFB) if IFB in links(node) else ""
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{extra}\n--- agent log ---\n{node.agent_log_tail()}") \
            from None


def fab_packets(node):
    """Packets the fabric's end of the uplink received."""
    st = json.loads(cni.sh("ip", "-n", node.fabric.name, "-j", "-s", "link", "show", "fab0").stdout)[0]
    return st["stats64"]["rx"]["packets"]


def test_upload_gate_passes_light_traffic_and_shapes_a_burst(mqnode):
    node = mqnode
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    wait(node, lambda: tree_ready(node), "the HTB tree on the ifb, the classifier, gate and redirect")
    wait(node, lambda: all(p["ips"] for p in node.status()["pods"]), "both pods' addresses known")
    time.sleep(0.3)  # the classifier's map follows within a debounce
    # the root is as the kernel made it: nothing replaced it
    assert node.root()["kind"] == "noqueue", node.tc_summary()
    st = node.status()["uplink"]
    assert st["shape"] == "htb-ifb" and st["shaperIfb"] == IFB, st
    assert st["shapedBps"] == 396_000_000, st
    assert st["gate"]["thresholdBps"] == 198_000_000 and st["gate"]["redirecting"] is False, st
    assert os.path.exists(os.path.join(node.state_dir, "shaper.json"))
    # no filters on the ifb: the classifier names every packet's class
    assert node.filters(IFB) == [], node.filters(IFB)
    node.sh("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    fabric = f"{node.uplink_net}.1"
    # light (40 kB) from the inference pod: under the threshold, straight out of the uplink
    before, rx0 = class_packets(node, IFB), fab_packets(node)
    send_udp(inf.ns, fabric)
    wait(node, lambda: fab_packets(node) - rx0 >= 190, "the light datagrams at the fabric")
    light = class_packets(node, IFB)
    assert light["1:10"] - before["1:10"] < 20, (before, light)
    # a 420 kB burst from the training pod crosses it: what follows takes the ifb, in each pod's class
    send_udp(train.ns, fabric, n=0, burst=300)
    send_udp(inf.ns, fabric)
    after = wait(node, lambda: (lambda c: c if c["1:10"] - light["1:10"] >= 150 else None)(
        class_packets(node, IFB)), "the inference pod's datagrams in class 1:10 on the ifb")
    assert after["1:30"] - light["1:30"] >= 50, (light, after)  # the burst's tail, in training's class
    assert node.status()["uplink"]["gate"]["redirecting"] is True
    text = node.aiqosctl("status").stdout
    assert f"upload: HTB on {IFB} behind a gate at 198" in text, text
    # and they left the uplink: the ifb sends them back out, not in a loop
    rx1 = fab_packets(node)
    assert rx1 - rx0 >= 190 + 300 + 190 - 5, (rx0, rx1)
    # the classes' statistics are the egress direction's metrics
    m = node.metrics()
    assert f'aiqos_uplink_shaped_rate_bytes_per_second{{dev="{IFB}",direction="egress"}} 49500000' in m, \
        [x for x in m.splitlines() if "shaped_rate" in x]


def test_upload_gate_restart_adopts_and_idle_removes(mqnode):
    node = mqnode
    node.start_agent(CONFIG)
    pods = [node.add_api_pod(INF, "10.81.0.1"), node.add_api_pod(TRAIN, "10.81.0.2")]
    wait(node, lambda: tree_ready(node), "the gated tree")
    before = (node.qdiscs(IFB), node.classes(IFB), egress_filters(node), node.root())
    out = node.restart_tc_events(CONFIG)
    assert out == "", f"the restart changed the kernel:\n{out}\n{node.agent_log_tail()}"
    assert (node.qdiscs(IFB), node.classes(IFB), egress_filters(node), node.root()) == before
    # the ifb deleted behind the agent's back: the link event brings it (and its tree) back
    node.sh("ip", "link", "del", IFB)
    wait(node, lambda: tree_ready(node), "the ifb and its tree back", timeout_s=3)
    # idle: the gate, the redirect, the classifier and the ifb go; the root never changed
    for p in pods:
        p.delete_api()
    record = os.path.join(node.state_dir, "shaper.json")
    wait(node, lambda: IFB not in links(node) and egress_filters(node).strip() == "" and not os.path.exists(record),
         "the ifb, the filters and the record gone")
    assert node.root()["kind"] == "noqueue"


def test_upload_gate_gives_way_when_the_shape_changes_and_on_cleanup(mqnode):
    node = mqnode
    node.start_agent(CONFIG)
    node.add_api_pod(INF, "10.81.1.1")
    node.add_api_pod(TRAIN, "10.81.1.2")
    wait(node, lambda: tree_ready(node), "the gated tree")
    # a restart without uplinkRate: nothing to shape on a noqueue uplink, the ifb and our filters go
    node.stop_agent(signal.SIGTERM)
    node.start_agent({k: v for k, v in CONFIG.items() if k != "uplinkRate"})
    record = os.path.join(node.state_dir, "shaper.json")
    wait(node, lambda: IFB not in links(node) and "aiqos" not in egress_filters(node) and not os.path.exists(record),
         "the gated tree and its record gone")
    # back, then --cleanup removes everything
    node.stop_agent(signal.SIGTERM)
    node.start_agent(CONFIG)
    wait(node, lambda: tree_ready(node), "the gated tree again")
    assert node.stop_agent(signal.SIGTERM) == 0
    assert node.cleanup_uplink().returncode == 0
    assert IFB not in links(node), links(node)
    assert egress_filters(node).strip() == "" and node.root()["kind"] == "noqueue", node.tc_summary()
    assert not os.path.exists(record)


def test_upload_gate_foreign_link_named_like_the_ifb_falls_back_to_htb(mqnode):
    """A link named aiqos-ifb1 that is not an ifb is never touched: the
    agent says so and shapes with HTB at the root."""
    node = mqnode
    node.sh("ip", "link", "add", IFB, "type", "veth", "peer", "name", "aqx-peer")
    node.start_agent(CONFIG)
    node.add_api_pod(INF, "10.81.2.1")
    wait(node, lambda: node.root()["kind"] == "htb", "HTB at the root")
    assert "upload shaper ifb not available" in node.agent_log_tail(), node.agent_log_tail()
    assert node.status()["uplink"]["shape"] == "htb"
    assert json.loads(node.sh("ip", "-j", "-d", "link", "show", IFB).stdout)[0]["linkinfo"]["info_kind"] == "veth"
