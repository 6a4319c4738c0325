"""test_agent_coexist_tcx.py — aiqos next to an eBPF CNI with tcx (issue 29):
the Cilium stand-in (standin.py: tcx programs at the tail of both hooks of
the routed lab uplink returning TC_ACT_OK, counting packets, and Cilium's
one-shot deletion of every legacy tc filter on the device). On a kernel
with tcx the agent attaches its egress classifier as a tcx link first on
the hook (TCX_NEXT: the stand-in still sees every packet); the download
tree's redirect stays on clsact behind the stand-in, whose TC_ACT_OK ends
the hook first: the agent lists the stand-in's programs (status
tcxForeign). Outcome checked: class and stand-in packet counters. Root,
network namespaces, a kernel with tcx (>= 6.6; skipped without)."""
import socket
import threading
import time

import pytest

import agentlab
import standin
from agentlab import class_packets, wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
CONFIG = {"uplinkRate": "500mbit", "downlink": True, "downlinkRate": "400mbit", "debounceMs": 50,
          "mixedHoldSeconds": 1, "driftRepairSeconds": 300}


@pytest.fixture
def cni(node):
    try:
        s = standin.attach(node.node.name, "up0")
    except RuntimeError as e:
        if "Invalid argument" in str(e):
            pytest.skip(f"no tcx in this kernel: {e}")
        raise
    try:
        yield s
    finally:
        s.close()


def ingress_hooked(node):
    out = node.sh("tc", "filter", "show", "dev", "up0", "ingress").stdout
    return "aiqos_dcls" in out and "aiqos_gate" in out and "aiqos-ifb0" in out


def test_tcx_classifier_first_next_to_the_standin(node, cni):
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)

    def ready():
        s = node.status(check=False)
        r = node.root()
        t = node.tcx()
        return (s and s["mode"] == "mixed" and r and r["kind"] == "htb" and t["egress"][:1] == ["aiqos_cls_edt"]
                and t["egress"][-1:] == ["cil_to_netdev"] and ingress_hooked(node)
                and {"1:10", "1:20", "1:30"} <= set(class_packets(node)))
    try:
        wait_until(ready, 10, "mixed, the classifier first on tcx egress, the download hooks")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tcx()}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None
    up = node.status()["uplink"]
    assert up["classifierHook"] == "tcx", up
    assert any(f.startswith("ingress cil_from_netdev") for f in up["tcxForeign"]), up["tcxForeign"]
    assert any(f.startswith("egress cil_to_netdev") for f in up["tcxForeign"]), up["tcxForeign"]
    assert "aiqos_cls" not in node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout

    # upload: each pod's packets in its class, and the stand-in sees every one
    time.sleep(0.3)
    for pod, cls, other in ((inf, "1:10", "1:30"), (train, "1:30", "1:10")):
        before, cb = class_packets(node), cni.counts()
        agentlab.send_udp(pod.ns, f"{node.uplink_net}.1", n=100)
        after = wait_until(lambda: (lambda c: c if c[cls] - before[cls] >= 100 else None)(class_packets(node)), 5,
                           f"{pod.name}'s 100 packets in {cls}")
        assert after[other] - before[other] < 5, (pod.name, before, after)
        assert cni.counts()["egress"] - cb["egress"] >= 100, (cb, cni.counts())

    # Cilium's loader deletes every legacy filter once: aiqos's ingress
    # hooks are back within 5 s (the rtnetlink monitor), counted; the tcx
    # classifier and the stand-in's programs are untouched
    t0 = time.monotonic()
    assert cni.flush_legacy() >= 3
    wait_until(lambda: ingress_hooked(node), 5, "aiqos's ingress filters back")
    assert time.monotonic() - t0 < 5
    m = node.metrics()
    assert 'aiqos_hook_deletions_total{direction="ingress",hook="clsact"} ' in m
    n = [x for x in m.splitlines() if x.startswith('aiqos_hook_deletions_total{direction="ingress",hook="clsact"}')]
    assert n and float(n[0].split()[-1]) >= 3, n
    assert node.tcx()["egress"][:1] == ["aiqos_cls_edt"] and cni.attached()

    # cleanup: aiqos's link and filters go, the stand-in's programs stay and count
    node.stop_agent()
    node.cleanup_uplink()
    t = node.tcx()
    assert "aiqos_cls_edt" not in t["egress"] and cni.attached(), t
    assert "aiqos" not in node.sh("tc", "filter", "show", "dev", "up0", "ingress").stdout
    cb = cni.counts()
    agentlab.send_udp(inf.ns, f"{node.uplink_net}.1", n=50)
    wait_until(lambda: cni.counts()["egress"] - cb["egress"] >= 50, 5, "the stand-in still counting")


def route_fabric_to(node, *pods):
    """The fabric reaches the pods through the node, as a switch would."""
    node.sh("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    for pod in pods:
        agentlab.cni.sh("ip", "-n", node.fabric.name, "route", "replace", f"{pod.ip()}/32", "via",
                        f"{node.uplink_net}.2")


def reach(node):
    """status' downlink.reach once measured, else None."""
    s = node.status(check=False)
    return ((s or {}).get("uplink") or {}).get("downlink", {}).get("reach")


def tcp_delivers(src_ns, pod, n=262144):
    """n bytes over TCP from netns src_ns to the pod: every byte arrives (the
    data through the tree, the ACKs back)."""
    srv = agentlab.in_netns_call(pod.ns, lambda: socket.create_server(("0.0.0.0", 0)))
    port, got = srv.getsockname()[1], {}

    def serve():
        srv.settimeout(10)
        c, _ = srv.accept()
        total = 0
        with c:
            while True:
                b = c.recv(65536)
                if not b:
                    break
                total += len(b)
        got["n"] = total
    t = threading.Thread(target=serve)
    t.start()
    try:
        c = agentlab.in_netns_call(src_ns, lambda: socket.create_connection((pod.ip(), port), timeout=10))
        with c:
            c.sendall(b"x" * n)
    finally:
        t.join(15)
        srv.close()
    return got.get("n") == n


def pod_hooks(node, pod):
    """aiqos's download hooks on a pod's host-side interface (egress)."""
    out = node.sh("tc", "filter", "show", "dev", pod.host_veth(), "egress").stdout
    return "aiqos_dcls" in out and "aiqos-ifb0" in out


def test_download_behind_a_hook_ending_cni_fed_at_the_pods(node, cni):
    """The stand-in's ingress program ends the uplink's hook (TC_ACT_OK):
    no received packet reaches aiqos's download filters there. The agent
    measures it (the download classifier's count against the uplink's
    received packets), says so (a DownloadBypassed Event naming the
    stand-in's program, status, /metrics) and feeds the download tree at the
    pods' host-side interfaces instead (the classifier and a redirect to the
    ifb at their egress hooks): each pod's download lands in its class, the
    pods still get every packet, the stand-in still sees every one. When
    the stand-in goes, the tree is fed at the uplink again and the pods'
    hooks go."""
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    ifb = "aiqos-ifb0"
    wait_until(lambda: ingress_hooked(node) and (node.status(check=False) or {}).get("mode") == "mixed", 10,
               "mixed, the download hooks")
    route_fabric_to(node, inf, train)
    cb = cni.counts()
    for _ in range(4):
        agentlab.send_udp(node.fabric.name, inf.ip(), n=1000)
        time.sleep(0.5)
    r = wait_until(lambda: (lambda x: x if x and x["bypassed"] else None)(reach(node)), 6,
                   "the uplink's hook reported bypassed")
    assert r["receivedPackets"] >= 1000 and r["reachedPackets"] * 2 < r["receivedPackets"], r
    wait_until(lambda: pod_hooks(node, inf) and pod_hooks(node, train), 5, "the pods' download hooks")
    dl = node.status()["uplink"]["downlink"]
    assert dl["fedAt"] == "pods" and dl["podInterfaces"] == 2 and dl["shaped"] is True, dl
    assert "fed at the pods' interfaces (2)" in node.aiqosctl("status").stdout
    ev = wait_until(lambda: node.events("DownloadBypassed"), 5, "the DownloadBypassed Event")
    assert "cil_from_netdev" in ev[0]["message"] and "pods' host-side interfaces" in ev[0]["message"], \
        ev[0]["message"]
    assert "aiqos_download_bypassed 1" in node.metrics()
    # Cilium's loader deletes the legacy filters of the devices it attaches
    # to: a pod's hooks deleted are back at once
    n0 = node.status()["uplink"].get("hookDeleted", {}).get("at", 0)
    node.sh("tc", "filter", "del", "dev", train.host_veth(), "egress")
    wait_until(lambda: pod_hooks(node, train), 5, "the training pod's hooks back")
    assert node.status()["uplink"]["hookDeleted"]["at"] >= n0
    # each pod's download in its class on the ifb; delivered (TCP through the tree)
    for pod, cls, other in ((inf, "1:10", "1:30"), (train, "1:30", "1:10")):
        before = class_packets(node, ifb)
        agentlab.send_udp(node.fabric.name, pod.ip(), n=200)
        after = wait_until(lambda: (lambda c: c if c.get(cls, 0) - before.get(cls, 0) >= 200 else None)(
            class_packets(node, ifb)), 5, f"{pod.name}'s download in {cls} on the ifb")
        assert after.get(other, 0) - before.get(other, 0) < 5, (pod.name, before, after)
        assert tcp_delivers(node.fabric.name, pod)
    assert cni.counts()["ingress"] - cb["ingress"] >= 4400, (cb, cni.counts())
    # BPF host routing: the stand-in puts the pods' packets straight into
    # them (bpf_redirect_peer), past the pods' hooks too: not shaped, said so
    for pod in (inf, train):
        cni.peer(pod.ip(), pod.host_veth())
    for _ in range(4):
        agentlab.send_udp(node.fabric.name, train.ip(), n=1000)
        time.sleep(0.5)
    r = wait_until(lambda: (lambda x: x if x and x.get("podsBypassed") else None)(reach(node)), 6,
                   "the pods' hooks reported bypassed")
    assert r["podPackets"] * 10 < r["receivedPackets"], r
    assert node.status()["uplink"]["downlink"]["shaped"] is False
    ev = wait_until(lambda: node.events("DownloadNotShaped"), 5, "the DownloadNotShaped Event")
    assert "hostLegacyRouting" in ev[0]["message"], ev[0]["message"]
    assert tcp_delivers(node.fabric.name, train)
    # the stand-in gone: received packets reach the uplink's hook again
    cni.close()
    for _ in range(4):
        agentlab.send_udp(node.fabric.name, inf.ip(), n=1000)
        time.sleep(0.5)
    wait_until(lambda: (node.status()["uplink"]["downlink"].get("fedAt") == "uplink"
                        and not pod_hooks(node, inf) and not pod_hooks(node, train)), 8,
               "the tree fed at the uplink again, the pods' hooks gone")
    assert tcp_delivers(node.fabric.name, inf)


def test_tcx_classifier_detached_behind_our_back_comes_back_first(node, cni):
    """Someone detaches aiqos's tcx link (or puts a program before it): the
    next pass attaches it first again (here the drift repair, every 1 s)."""
    node.start_agent(dict(CONFIG, downlink=False, driftRepairSeconds=1))
    node.add_pod(INF)
    node.add_pod(TRAIN)
    wait_until(lambda: node.tcx()["egress"][:1] == ["aiqos_cls_edt"], 10, "the classifier on tcx")
    node.stop_agent()  # no pin here (the lab's netns exec has no bpffs): the link goes with the agent
    assert "aiqos_cls_edt" not in node.tcx()["egress"]
    node.start_agent(dict(CONFIG, downlink=False, driftRepairSeconds=1))
    wait_until(lambda: node.tcx()["egress"][:1] == ["aiqos_cls_edt"], 10, "the classifier first again")
    assert node.tcx()["egress"][-1:] == ["cil_to_netdev"]


def test_gated_upload_tree_not_used_behind_a_tcx_program(mqnode):
    """A multi-queue uplink with a rate plans the gated upload tree (gate and
    redirect on clsact egress); behind the stand-in's tcx egress program
    (TC_ACT_OK) they would never run: HTB at the root instead, said why."""
    node = mqnode
    try:
        s = standin.attach(node.node.name, "up0")
    except RuntimeError as e:
        pytest.skip(f"no tcx in this kernel: {e}")
    try:
        node.start_agent(dict(CONFIG, downlink=False))
        inf = node.add_pod(INF)
        node.add_pod(TRAIN)
        wait_until(lambda: (node.root() or {}).get("kind") == "htb" and node.tcx()["egress"][:1] == ["aiqos_cls_edt"],
                   10, "HTB at the root, the classifier first on tcx")
        st = node.status()["uplink"]
        assert st["shape"] == "htb", st
        assert any("a tcx program" in w for w in st.get("warnings", [])), st.get("warnings")
        cb = s.counts()
        agentlab.send_udp(inf.ns, f"{node.uplink_net}.1", n=100)
        wait_until(lambda: s.counts()["egress"] - cb["egress"] >= 100, 5, "the stand-in sees the pod's packets")
    finally:
        node.stop_agent()
        s.close()


def test_pinned_tcx_link_is_adopted_on_restart_and_removed_by_cleanup(node, cni, tmp_path):
    """With a bpffs to pin in ($AIQOS_BPFFS) the link outlives the agent: a
    restart adopts the same program (same id: never detached), --cleanup
    detaches it and removes the pin."""
    fs = tmp_path / "bpffs"
    fs.mkdir()
    agentlab.cni.sh("mount", "-t", "bpf", "bpf", str(fs))
    env = {"AIQOS_BPFFS": str(fs)}
    try:
        node.start_agent(dict(CONFIG, downlink=False), env=env)
        node.add_pod(INF)
        node.add_pod(TRAIN)
        wait_until(lambda: node.tcx()["egress"][:1] == ["aiqos_cls_edt"], 10, "the classifier on tcx")
        pin = fs / "aiqos" / "cls-egress-up0"
        assert pin.exists()
        node.stop_agent()
        assert node.tcx()["egress"][:1] == ["aiqos_cls_edt"]  # pinned: still there
        node.start_agent(dict(CONFIG, downlink=False), env=env)
        time.sleep(1.5)
        assert "attached as a tcx link" not in node.agent_log_tail().split("=== start")[-1], node.agent_log_tail()
        assert node.tcx()["egress"][:1] == ["aiqos_cls_edt"]
        node.stop_agent()
        r = agentlab.cni.sh("ip", "netns", "exec", node.node.name, "env", f"AIQOS_BPFFS={fs}",
                            agentlab.os.path.join(agentlab.cni_build(), "bin", "aiqos-agent"), "--cleanup",
                            "--state-dir", node.state_dir, check=False)
        assert r.returncode == 0, r.stderr
        assert "aiqos_cls_edt" not in node.tcx()["egress"], node.tcx()
        assert not pin.exists()
        assert cni.attached()
    finally:
        agentlab.cni.sh("umount", str(fs), check=False)


def test_next_to_a_handing_on_cni_both_directions_are_classified(node):
    """A CNI whose tcx programs hand on (TCX_NEXT; Calico's eBPF dataplane
    does for stack-bound packets; its stand-in here): the classifier runs
    first on egress, the download hooks behind the CNI's ingress program
    still see every packet: each pod's packets land in its class in both
    directions, and the CNI's programs count them all. Doctor names Calico's
    peer redirect and the Felix setting that keeps packets off it."""
    try:
        cal = standin.attach(node.node.name, "up0", calico=True)
    except RuntimeError as e:
        pytest.skip(f"no tcx in this kernel: {e}")
    try:
        node.start_agent(CONFIG)
        inf = node.add_pod(INF)
        train = node.add_pod(TRAIN)
        ifb = "aiqos-ifb0"

        def ready():
            s = node.status(check=False)
            return (s and s["mode"] == "mixed" and node.tcx()["egress"][:1] == ["aiqos_cls_edt"]
                    and ingress_hooked(node) and {"1:10", "1:20", "1:30"} <= set(class_packets(node))
                    and {"1:10", "1:30"} <= set(class_packets(node, ifb)))
        try:
            wait_until(ready, 10, "mixed, the classifier on tcx, the download tree")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{node.tcx()}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None
        assert any(f.startswith("ingress cali_tc_ingress") for f in node.status()["uplink"]["tcxForeign"])
        time.sleep(0.3)
        # upload
        for pod, cls, other in ((inf, "1:10", "1:30"), (train, "1:30", "1:10")):
            before, cb = class_packets(node), cal.counts()
            agentlab.send_udp(pod.ns, f"{node.uplink_net}.1", n=100)
            after = wait_until(lambda: (lambda c: c if c[cls] - before[cls] >= 100 else None)(
                class_packets(node)), 5, f"{pod.name}'s 100 packets in {cls}")
            assert after[other] - before[other] < 5, (pod.name, before, after)
            assert cal.counts()["egress"] - cb["egress"] >= 100
        # download: the fabric reaches the pods through the node; a burst
        # opens the gate, what follows takes the ifb's tree
        route_fabric_to(node, inf, train)
        before, cb = class_packets(node, ifb), cal.counts()
        agentlab.send_udp(node.fabric.name, inf.ip(), n=200, burst_to=train.ip(), burst=300)
        after = wait_until(lambda: (lambda c: c if c["1:10"] - before["1:10"] >= 150 else None)(
            class_packets(node, ifb)), 5, "the inference pod's download packets in 1:10 on the ifb")
        assert after["1:30"] - before["1:30"] >= 50, (before, after)
        assert cal.counts()["ingress"] - cb["ingress"] >= 500, (cb, cal.counts())
        # the received packets reach the download tree: reported shaped
        for _ in range(3):
            agentlab.send_udp(node.fabric.name, inf.ip(), n=1000)
            time.sleep(0.5)
        r = wait_until(lambda: reach(node), 6, "the download's reach measured")
        assert not r["bypassed"] and r["reachedPackets"] * 2 >= r["receivedPackets"], r
        assert node.status()["uplink"]["downlink"]["shaped"] is True
        assert not node.events("DownloadBypassed")
        # doctor: Calico's peer redirect, and the setting
        p = agentlab.cni.sh("ip", "netns", "exec", node.node.name,
                            agentlab.os.path.join(agentlab.cni_build(), "bin", "aiqosctl"), "doctor", "--json",
                            "--uplink", "up0", "--no-kernel-probe", check=False)
        found = [f for f in agentlab.json.loads(p.stdout)["findings"] if f["id"] == "uplink.calico-redirect-peer"]
        assert found and "bpfRedirectToPeer" in found[0]["fix"], p.stdout
    finally:
        node.stop_agent()
        cal.close()
