"""test_agent_uplink_tree.py — the agent and what the uplink already has
(root, network namespaces, the CI kernel): an
operator's classful HTB tree is left intact (never deleted, never
"restored" from a dump the kernel refuses), with a warning, an Event and
status; an mq root with grafted children is left whole by the gated HTB,
recorded whole and restored on idle and on --cleanup after HTB replaced it; a virtual uplink's reported speed is never a rate (no
HTB below a veth's fictional 10000 Mb/s); a multi-queue uplink in
mixed mode keeps mq with a child per tx queue and the BPF classifier,
adopted on restart and removed on idle; a noqueue uplink (a veth as the
kernel makes it) gets no tree unless uplinkRate asks for a shaper. The kernel is read back with tc."""

import json
import os
import re
import signal
import time

import pytest

import agentlab
import cni
from agentlab import wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
SHAPED = {"uplinkRate": "500mbit", "debounceMs": 50, "mixedHoldSeconds": 1}
UNSHAPED = {"debounceMs": 50, "mixedHoldSeconds": 1}
def tc_text(node, what):
    return node.sh("tc", what, "show", "dev", "up0").stdout


@pytest.fixture(autouse=True)
def _clsact(monkeypatch):
    """These tests are about the clsact the egress classifier shares (the
    path of kernels without tcx): the agent keeps it there (AIQOS_TCX=0)."""
    monkeypatch.setenv("AIQOS_TCX", "0")



def egress_filters(node):
    return node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout


def assert_mode(node, mode, timeout_s=8):
    return wait_until(lambda: (lambda s: s if s and s["mode"] == mode else None)(node.status(check=False)),
                      timeout_s, f"mode {mode}")


def wait_for(node, pred, what, timeout_s=8):
    try:
        return wait_until(pred, timeout_s, what)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n--- agent log ---\n{node.agent_log_tail()}") from None


def operator_htb(node):
    """The issue's tree: htb 1: default 99, classes 1:1, 1:99, 1:5, a u32 filter to 1:5."""
    for cmd in (["qdisc", "replace", "dev", "up0", "root", "handle", "1:", "htb", "default", "99"],
                ["class", "add", "dev", "up0", "parent", "1:", "classid", "1:1", "htb", "rate", "900mbit"],
                ["class", "add", "dev", "up0", "parent", "1:1", "classid", "1:99", "htb", "rate", "100mbit",
                 "ceil", "900mbit"],
                ["class", "add", "dev", "up0", "parent", "1:1", "classid", "1:5", "htb", "rate", "800mbit",
                 "ceil", "900mbit"],
                ["filter", "add", "dev", "up0", "parent", "1:", "protocol", "ip", "prio", "3", "u32", "match",
                 "ip", "dst", "10.250.0.0/16", "flowid", "1:5"]):
        node.sh("tc", *cmd)
    return (tc_text(node, "qdisc"), tc_text(node, "class"), tc_text(node, "filter"))


def test_operator_htb_tree_is_left_intact(node):
    before = operator_htb(node)
    node.start_agent(SHAPED)
    inf = node.add_api_pod(INF, "10.79.0.1")
    train = node.add_api_pod(TRAIN, "10.79.0.2")
    assert_mode(node, "mixed")
    st = wait_for(node, lambda: (lambda s: s if s and s.get("uplink", {}).get("foreign") else None)(
        node.status(check=False)), "status says the uplink is foreign")
    assert "class" in st["uplink"]["foreign"], st["uplink"]
    ev = wait_for(node, lambda: node.events(reason="UplinkForeignTree"), "an UplinkForeignTree Event")
    assert ev[0]["type"] == "Warning" and ev[0]["involvedObject"]["name"] in (inf.name, train.name), ev
    time.sleep(0.5)  # a few reconcile passes
    assert (tc_text(node, "qdisc"), tc_text(node, "class"), tc_text(node, "filter")) == before
    log = node.agent_log_tail(200000)
    assert "stale uplink object deleted" not in log, log[-3000:]
    assert not os.path.exists(os.path.join(node.state_dir, "uplink.json"))
    # idle, and --cleanup: still the operator's, untouched
    inf.delete_api()
    train.delete_api()
    assert_mode(node, "idle")
    time.sleep(0.3)
    assert (tc_text(node, "qdisc"), tc_text(node, "class"), tc_text(node, "filter")) == before
    assert node.stop_agent(signal.SIGTERM) == 0
    assert node.cleanup_uplink().returncode == 0
    assert (tc_text(node, "qdisc"), tc_text(node, "class"), tc_text(node, "filter")) == before


def mq_tree(node):
    """mq root with the kernel's default children and two grafted ones."""
    qs = {q.get("parent"): q for q in node.qdiscs() if not q.get("root")}
    root = node.root()
    return (root["kind"], root["handle"],
            sorted((p, q["kind"], q["handle"], json.dumps(q.get("options", {}), sort_keys=True))
                   for p, q in qs.items() if p and p.startswith("1:")))


def operator_mq(node):
    node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "1:", "mq")
    node.sh("tc", "qdisc", "replace", "dev", "up0", "parent", "1:1", "handle", "11:", "pfifo", "limit", "50")
    node.sh("tc", "qdisc", "replace", "dev", "up0", "parent", "1:2", "handle", "12:", "bfifo", "limit", "100000")
    node.sh("tc", "qdisc", "replace", "dev", "up0", "parent", "1:3", "handle", "13:", "tbf", "rate", "1gbit",
            "burst", "64kb", "latency", "10ms")
    t = mq_tree(node)
    assert [c[1] for c in t[2]] == ["pfifo", "bfifo", "tbf", "pfifo_fast"], t
    return t


def shape(node):
    st = node.status(check=False)
    return st and st["uplink"]["shape"]


def test_mq_with_children_restored_whole_on_idle_and_cleanup(mqnode):
    node = mqnode
    before = operator_mq(node)
    # uplinkRate on this kernel (no fq): the gated HTB on aiqos-ifb1; the mq tree is left whole
    node.start_agent(SHAPED)
    pods = [node.add_api_pod(INF, "10.79.0.1"), node.add_api_pod(TRAIN, "10.79.0.2")]
    assert_mode(node, "mixed")
    wait_for(node, lambda: shape(node) == "htb-ifb" and "aiqos_ugate" in egress_filters(node), "the gated tree")
    assert mq_tree(node) == before
    # EDT (mq + fq per queue) needs fq: this kernel has none, and the agent
    # asked a scratch netns before planning, so it never tried fq here
    log = node.agent_log_tail()
    assert "the kernel has no fq" in log, log
    rec = json.load(open(os.path.join(node.state_dir, "uplink.json")))
    assert rec["kind"] == "mq" and len(rec["children"]) == 3, rec
    for p in pods:
        p.delete_api()
    assert_mode(node, "idle")
    wait_for(node, lambda: "aiqos-ifb1" not in node.sh("ip", "link", "show").stdout, "the shaper's ifb gone")
    assert mq_tree(node) == before
    # again, with HTB at the root (the kernel refuses the classifier: no gate), and --cleanup gives it back
    node.stop_agent(signal.SIGTERM)
    node.start_agent(SHAPED, env={"AIQOS_TEST_FAILPOINTS": "agent-classifier-load=refuse"})
    node.add_api_pod(INF, "10.79.0.3")
    assert_mode(node, "inference")
    wait_for(node, lambda: node.root()["kind"] == "htb" and shape(node) == "htb", "the HTB tree at the root")
    wait_for(node, lambda: "aiqos-ifb1" not in node.sh("ip", "link", "show").stdout, "no shaper ifb")
    assert node.stop_agent(signal.SIGTERM) == 0
    assert node.cleanup_uplink().returncode == 0
    assert mq_tree(node) == before
    assert not os.path.exists(os.path.join(node.state_dir, "uplink.json"))


def test_virtual_uplink_speed_is_not_a_rate(node):
    # a veth reports 10000 Mb/s; today's code shaped it with HTB at 9.7 Gbit/s
    assert node.sh("cat", "/sys/class/net/up0/speed", check=False).stdout.strip() == "10000"
    node.start_agent(UNSHAPED)
    inf = node.add_api_pod(INF, "10.79.0.1")
    train = node.add_api_pod(TRAIN, "10.79.0.2")
    st = assert_mode(node, "mixed")
    st = wait_for(node, lambda: (lambda s: s if s and s.get("uplink", {}).get("warnings") else None)(
        node.status(check=False)), "an uplink warning")
    assert any("set uplinkRate" in w for w in st["uplink"]["warnings"]), st["uplink"]
    ev = wait_for(node, lambda: [e for e in node.events(reason="UplinkWarning") if "uplinkRate" in e["message"]],
                  "an UplinkWarning Event naming uplinkRate")
    assert ev[0]["involvedObject"]["name"] in (inf.name, train.name)
    time.sleep(0.3)
    assert (node.root() or {}).get("kind") != "htb", node.tc_summary()
    assert not [c for c in node.classes() if c["kind"] == "htb"], node.tc_summary()


def test_noqueue_multiqueue_uplink_is_left_as_it_is(mqnode):
    # a 4-queue veth as the kernel makes it (noqueue): nothing waits there, so no tree in any mode
    node = mqnode
    assert node.root()["kind"] == "noqueue", node.tc_summary()
    before = (tc_text(node, "qdisc"), tc_text(node, "filter"))
    node.start_agent(UNSHAPED)
    pods = [node.add_api_pod(INF, "10.79.0.1"), node.add_api_pod(TRAIN, "10.79.0.2")]
    assert_mode(node, "mixed")
    st = wait_for(node, lambda: (lambda s: s if s and s.get("uplink", {}).get("warnings") else None)(
        node.status(check=False)), "an uplink warning")
    assert st["uplink"]["shape"] == "none", st["uplink"]
    assert any("holds no queue" in w and "set uplinkRate" in w for w in st["uplink"]["warnings"]), st["uplink"]
    wait_for(node, lambda: [e for e in node.events(reason="UplinkWarning") if "holds no queue" in e["message"]],
             "an UplinkWarning Event saying the uplink holds no queue")
    time.sleep(0.3)
    assert (tc_text(node, "qdisc"), tc_text(node, "filter")) == before, node.tc_summary()
    # the operator asks for a shaper: the gated HTB on its ifb (no fq here); the root stays noqueue
    node.stop_agent(signal.SIGTERM)
    node.start_agent(SHAPED)
    wait_for(node, lambda: shape(node) == "htb-ifb" and "aiqos_ugate" in egress_filters(node), "the gated tree")
    assert node.root()["kind"] == "noqueue", node.tc_summary()
    for p in pods:
        p.delete_api()
    assert_mode(node, "idle")
    wait_for(node, lambda: egress_filters(node).strip() == "", "the egress hook emptied")
    assert node.root()["kind"] == "noqueue"


def nic_mq(node):
    """What a multi-queue NIC has: mq with the kernel's default child per queue."""
    node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "1:", "mq")
    t = mq_tree(node)
    assert t[0] == "mq" and len(t[2]) == 4, t
    return t


def test_mixed_on_multiqueue_uplink_keeps_mq_with_classifier(mqnode):
    node = mqnode
    before = nic_mq(node)
    node.start_agent(UNSHAPED)
    pods = [node.add_api_pod(INF, "10.79.0.1"), node.add_api_pod(TRAIN, "10.79.0.2")]
    assert_mode(node, "mixed")

    def mq_layout():
        r = node.root()
        children = [q for q in node.qdiscs() if (q.get("parent") or "").startswith("1:")]
        return (r and r["kind"] == "mq" and r["handle"] == "1:" and len(children) == 4 and
                all(q["handle"] in ("100:", "101:", "102:", "103:") for q in children) and
                "aiqos_cls" in egress_filters(node))
    wait_for(node, mq_layout, "mq + 4 per-queue children + the classifier")
    assert not node.classes() or all(c["kind"] == "mq" for c in node.classes()), node.tc_summary()
    st = node.status()
    assert st["uplink"]["shape"] == "mq", st["uplink"]
    prog = egress_filters(node)
    # a restart adopts: the same program stays attached
    node.stop_agent(signal.SIGKILL)
    node.start_agent(dict(UNSHAPED, driftRepairSeconds=1))
    pods.append(node.add_api_pod(INF, "10.79.0.5"))
    time.sleep(0.5)
    assert egress_filters(node) == prog, (prog, egress_filters(node))
    # drift: the classifier and a queue's child removed by hand come back
    node.sh("tc", "filter", "del", "dev", "up0", "egress", "pref", "1")
    node.sh("tc", "qdisc", "del", "dev", "up0", "parent", "1:2")
    wait_for(node, mq_layout, "the classifier and the child repaired", timeout_s=10)
    # idle: the NIC's mq and its children back, no clsact left
    for p in pods:
        p.delete_api()
    assert_mode(node, "idle")
    wait_for(node, lambda: mq_tree(node) == before, "the original mq tree back")
    assert "clsact" not in tc_text(node, "qdisc"), tc_text(node, "qdisc")


def test_shaped_uplink_classifier_before_htb(node):
    """uplinkRate (HTB): the BPF classifier at the clsact egress hook picks
    each packet's class before HTB's lock (unit: node_htb_classifier_picks_the_class
    sends the packets); the pods' u32 filters stay as the fallback. A restart
    adopts it, idle removes it with the clsact aiqos made."""
    node.start_agent(SHAPED)
    pods = [node.add_api_pod(INF, "10.79.1.1"), node.add_api_pod(TRAIN, "10.79.1.2")]
    assert_mode(node, "mixed")

    def htb_layout():
        r = node.root()
        return (r and r["kind"] == "htb" and "aiqos_cls" in egress_filters(node) and
                sorted(f["flowid"] for f in node.filters()) == ["1:10", "1:30"])
    wait_for(node, htb_layout, "htb + the classifier + the pods' u32 filters")
    prog = egress_filters(node)
    node.stop_agent(signal.SIGKILL)
    node.start_agent(dict(SHAPED, driftRepairSeconds=1))
    pods.append(node.add_api_pod(TRAIN, "10.79.1.3"))
    wait_for(node, lambda: len(node.filters()) == 3, "the new pod's filter")
    assert egress_filters(node) == prog, (prog, egress_filters(node))
    for p in pods:
        p.delete_api()
    assert_mode(node, "idle")
    wait_for(node, lambda: "clsact" not in tc_text(node, "qdisc") and (node.root() or {}).get("kind") != "htb",
             "the uplink back, no clsact left")


def test_classifier_refused_plans_without_it(node):
    """A program the kernel will not load (failpoint agent-classifier-load)
    is learnt missing like a refused qdisc kind: a warning, and the next
    plan shapes with the u32 filters alone; the download tree still comes."""
    node.start_agent(SHAPED, env={"AIQOS_TEST_FAILPOINTS": "agent-classifier-load=refuse"})
    node.add_api_pod(INF, "10.79.2.1")
    node.add_api_pod(TRAIN, "10.79.2.2")
    assert_mode(node, "mixed")

    def fallback():
        r = node.root()
        return (r and r["kind"] == "htb" and "aiqos_cls" not in egress_filters(node) and
                sorted(f["flowid"] for f in node.filters()) == ["1:10", "1:30"] and
                "mirred" in node.sh("tc", "filter", "show", "dev", "up0", "ingress").stdout)
    wait_for(node, fallback, "htb with u32 filters, no classifier, the download redirect")
    time.sleep(0.5)
    assert "aiqos_cls" not in egress_filters(node), egress_filters(node)
    assert "uplink classifier not loaded: planning without it" in node.agent_log_tail(), node.agent_log_tail()
    st = node.status()
    assert st["uplink"]["shape"] == "htb", st["uplink"]


@pytest.mark.parametrize("rate", ["3mbit", "100kbit"])
def test_drift_repair_settles_at_low_rates(node, rate):
    """L4: at rates whose classes are not a multiple of 8 bit/s, or whose
    buckets pass 2^32 ticks, the HTB classes read back must match what the
    agent wants: drift repair every 2 s changes nothing once settled."""
    cfg = {"uplinkRate": rate, "downlinkRate": rate, "debounceMs": 50, "mixedHoldSeconds": 0,
           "driftRepairSeconds": 2}
    node.start_agent(cfg)
    node.add_api_pods([(INF, "10.83.0.1"), (TRAIN, "10.83.0.2"), (TRAIN, "10.83.0.3")])
    wait_for(node, lambda: node.root()["kind"] == "htb" and "aiqos-ifb0" in cni.link_names(node.node.name)
             and node.status()["mode"] == "mixed", "the mixed HTB trees")
    time.sleep(1)  # settled

    def repairs():
        return int(re.search(r"^aiqos_drift_repairs_total (\d+)", node.metrics(), re.M).group(1))

    before = repairs()
    mon = agentlab.subprocess.Popen(cni.in_ns(node.node.name, "tc", "monitor"), stdout=agentlab.subprocess.PIPE,
                                    stderr=agentlab.subprocess.STDOUT, text=True, start_new_session=True)
    try:
        time.sleep(5.5)  # two drift repairs at least
    finally:
        os.killpg(mon.pid, signal.SIGTERM)
        out, _ = mon.communicate(timeout=5)
    assert out.strip() == "", f"drift repair re-applied at {rate}:\n{out[:3000]}\n{node.agent_log_tail()}"
    assert repairs() == before, node.agent_log_tail()
