"""test_agent_coexist.py — aiqos next to another tool's tc programs on the
uplink's clsact hooks (issue 29, review H2/M2): a foreign cls_bpf filter at
egress pref 1 handle 1 (where Cilium's legacy-tc cil_to_netdev sits: a
verdict that ends the hook) survives the agent's start, drift repair and
give-back, and still counts every packet while aiqos's classifier, joined
to its slot at the head, puts each pod in its class. Outcome checked: the
classes' and the foreign filter's packet counters. These run the clsact
path (AIQOS_TCX=0: Debian 12's kernel has no tcx); test_agent_coexist_tcx.py
the tcx path next to the Cilium stand-in. Root, network namespaces."""
import re
import time

import agentlab
from agentlab import class_packets, wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
CONFIG = {"uplinkRate": "500mbit", "downlink": False, "debounceMs": 50, "mixedHoldSeconds": 1,
          "driftRepairSeconds": 300}
CLSACT = {"AIQOS_TCX": "0"}
# classic BPF "return -1" with a counting action (a mirror to a spare veth:
# the CI kernel has mirred and no gact): matches every packet and ends the
# classification there, as Cilium's program does (TC_ACT_OK)
FOREIGN = ("bpf", "bytecode", "1,6 0 0 4294967295", "action", "mirred", "egress", "mirror", "dev", "mon0")


def foreign_add(node, hook="egress", pref="1", handle="1"):
    if node.sh("ip", "link", "show", "mon0", check=False).returncode != 0:
        node.sh("ip", "link", "add", "mon0", "type", "veth", "peer", "name", "mon1")
        node.sh("ip", "link", "set", "mon0", "up")
        node.sh("ip", "link", "set", "mon1", "up")
    node.sh("tc", "filter", "add", "dev", "up0", hook, "pref", pref, "handle", handle, "protocol", "all", *FOREIGN)


def foreign_packets(node, hook="egress", pref="1"):
    """Packets the foreign filter's action counted, None when it is gone."""
    out = node.sh("tc", "-s", "filter", "show", "dev", "up0", hook).stdout
    block = None
    for part in re.split(r"\n(?=filter )", out):
        if f"pref {pref} " in part and "bytecode" in part:
            block = part
    if block is None:
        return None
    m = re.search(r"Sent \d+ bytes (\d+) pkt", block)
    return int(m.group(1)) if m else 0


def ours_present(node):
    return "aiqos_cls_edt" in node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout


def mixed_tree(node):
    def tree():
        s = node.status(check=False)
        r = node.root()
        return s and s["mode"] == "mixed" and r and r["kind"] == "htb" and \
            {"1:10", "1:20", "1:30"} <= set(class_packets(node)) and ours_present(node)
    try:
        wait_until(tree, 10, "mixed, the HTB tree and the classifier on up0")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None


def classified(node, inf, train, pref="1"):
    """Each pod's 100 packets land in its class; the foreign filter counts them all."""
    time.sleep(0.3)
    for pod, cls, other in ((inf, "1:10", "1:30"), (train, "1:30", "1:10")):
        before, fb = class_packets(node), foreign_packets(node, pref=pref)
        agentlab.send_udp(pod.ns, f"{node.uplink_net}.1", n=100)
        after = wait_until(lambda: (lambda c: c if c[cls] - before[cls] >= 100 else None)(class_packets(node)), 5,
                           f"{pod.name}'s 100 packets in {cls}")
        assert after[other] - before[other] < 5, (pod.name, before, after)
        fa = foreign_packets(node, pref=pref)
        assert fa is not None and fa - fb >= 100, (pod.name, fb, fa)


def test_foreign_filter_at_pref1_survives_start_drift_and_give_back(node):
    node.sh("tc", "qdisc", "add", "dev", "up0", "clsact")
    foreign_add(node)
    node.start_agent(CONFIG, env=CLSACT)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    mixed_tree(node)
    assert foreign_packets(node) is not None, node.tc_summary()
    classified(node, inf, train)
    s = node.status()
    assert any("pref 1 " in f for f in s["uplink"].get("foreignFilters", [])), (s["uplink"].get("foreignFilters"), node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout)

    # drift: our classifier deleted behind the agent's back comes back; theirs stays
    t0 = time.monotonic()
    node.sh("tc", "filter", "del", "dev", "up0", "egress", "pref", "1", "handle", "0xa10", "bpf")
    wait_until(lambda: ours_present(node), 5, "the classifier back (the rtnetlink monitor; drift repair is 300 s)")
    assert time.monotonic() - t0 < 5
    m = node.metrics()
    assert 'aiqos_hook_deletions_total{direction="egress",hook="clsact"} 1' in m, \
        [x for x in m.splitlines() if "hook_deletions" in x]
    hd = node.status()["uplink"].get("hookDeleted", {})
    assert "pref 1 handle 0xa10" in hd.get("message", "") and "deleted by " in hd["message"], hd
    assert wait_until(lambda: node.events("UplinkHookDeleted"), 5, "the UplinkHookDeleted Event")
    assert foreign_packets(node) is not None
    classified(node, inf, train)

    # give-back (idle): ours gone, theirs and the clsact holding it stay
    inf.cni_del()
    train.cni_del()
    inf.delete_api()
    train.delete_api()
    wait_until(lambda: not ours_present(node) and (node.root() or {}).get("kind") != "htb", 15, "idle")
    assert foreign_packets(node) is not None, node.tc_summary()
    node.stop_agent()
    node.cleanup_uplink()
    assert foreign_packets(node) is not None, node.tc_summary()


def test_foreign_filter_joining_later_is_run_after_ours(node):
    """Another tool that adds its program to pref 1 after aiqos lands at the
    head of the slot's list: the next read moves aiqos's classifier ahead
    again (deleted and added: the head), never touching the other."""
    node.start_agent(dict(CONFIG, driftRepairSeconds=1), env=CLSACT)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    mixed_tree(node)
    foreign_add(node)

    def ours_first():
        out = node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout
        i, j = out.find("aiqos_cls_edt"), out.find("bytecode")
        return 0 <= i < j
    wait_until(ours_first, 10, "the classifier ahead of the other program")
    classified(node, inf, train)


def test_cleanup_keeps_a_clsact_with_foreign_filters(node):
    """M2 (a): the clsact aiqos made gets another tool's ingress filter
    later; --cleanup deletes aiqos's filters only, and the clsact stays."""
    node.start_agent(CONFIG, env=CLSACT)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    mixed_tree(node)
    foreign_add(node, hook="ingress", pref="100", handle="7")
    node.stop_agent()
    node.cleanup_uplink()
    assert not ours_present(node), node.tc_summary()
    assert foreign_packets(node, hook="ingress", pref="100") is not None, node.tc_summary()
    del inf, train


def test_gated_upload_tree_gives_way_to_a_later_foreign_egress_filter(mqnode):
    """M2 (b): the gated upload tree's gate and redirect (prefs 27/28) end
    the egress hook (TC_ACT_OK, STOLEN, and the ifb's packets passed by the
    redirect's action); another tool's egress filter at a higher pref would
    never see a packet. The agent shapes with HTB at the root instead, says
    why, and the other filter counts every packet."""
    node = mqnode
    node.sh("tc", "qdisc", "add", "dev", "up0", "clsact")
    foreign_add(node, pref="100", handle="5")
    node.start_agent(CONFIG, env=CLSACT)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    mixed_tree(node)
    st = node.status()["uplink"]
    assert st["shape"] == "htb", st
    assert any("clsact filter after pref 28" in w for w in st.get("warnings", [])), st.get("warnings")
    assert "aiqos_ugate" not in node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout
    classified(node, inf, train, pref="100")
