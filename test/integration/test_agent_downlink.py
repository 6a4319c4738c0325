"""test_agent_downlink.py — the download direction on a lab node (root,
network namespaces; agentlab.py): with a rate configured, aiqos-agent
redirects the uplink's ingress (clsact + u32 match-all + mirred) to its ifb
aiqos-ifb0 and shapes it with the node's class tree; a BPF gate in front
of the redirect lets light traffic skip the ifb, and once a window's bytes
cross its threshold, traffic from the fabric toward an inference pod lands
in the inference class on the ifb (tc -s), a training pod's in the
training class; a restart adopts without touching the
kernel; idle removes the ifb and the ingress hook; --cleanup removes them; a
foreign ingress qdisc is left alone with a warning; "downlink": false and an
unknown rate shape nothing (a warning names downlinkRate); training pods' receive
window is bounded while the tree shapes (trainingRcvWindow, downlinkRttUs)."""

import os
import re
import signal
import time

import pytest

import agentlab
import cni
from agentlab import class_packets, wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
IFB = "aiqos-ifb0"
CONFIG = {"uplinkRate": "500mbit", "downlinkRate": "400mbit", "debounceMs": 50, "mixedHoldSeconds": 0}


@pytest.fixture(autouse=True)
def _clsact(monkeypatch):
    """These tests are about the clsact the egress classifier shares (the
    path of kernels without tcx): the agent keeps it there (AIQOS_TCX=0)."""
    monkeypatch.setenv("AIQOS_TCX", "0")



def links(node):
    p = node.sh("ip", "-o", "link", "show")
    return {m.group(1) for m in re.finditer(r"^\d+: ([^:@]+)[:@]", p.stdout, re.M)}


def ifindex(node, dev):
    p = node.sh("ip", "-o", "link", "show", "dev", dev)
    return int(p.stdout.split(":", 1)[0])


def ingress_qdiscs(node, dev="up0"):
    return [q for q in node.qdiscs(dev) if q.get("kind") in ("clsact", "ingress")]


def redirect_filters(node):
    """The u32 filters on up0's ingress hook that redirect to the ifb."""
    p = node.sh("tc", "filter", "show", "dev", "up0", "ingress", check=False)
    return [line for line in p.stdout.splitlines() if "mirred" in line or "Redirect" in line]


def route_fabric_to(node, ip):
    """The fabric reaches pod addresses through the node (as a switch would)."""
    cni.sh("ip", "-n", node.fabric.name, "route", "replace", f"{ip}/32", "via", f"{node.uplink_net}.2")
    node.sh("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")


def send_udp(node, ip, n=200, burst_to=None, burst=0):
    """From the fabric: n small datagrams to ip, after burst 1400-byte ones to burst_to."""
    agentlab.send_udp(node.fabric.name, ip, n=n, burst=burst, burst_to=burst_to)


def down_tree_ready(node):
    if IFB not in links(node):
        return False
    r = node.root(IFB)
    return r and r["kind"] == "htb" and set(class_packets(node, IFB)) >= {"1:1", "1:10", "1:20", "1:30"} \
        and ingress_qdiscs(node) and redirect_filters(node)


def wait_down(node, pred, what, timeout_s=8):
    try:
        return wait_until(pred, timeout_s, what)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{cni.tc_summary(node.node.name, IFB) if IFB in links(node) else ''}"
                             f"\n--- agent log ---\n{node.agent_log_tail()}") from None


def test_download_traffic_goes_to_the_destination_pods_class(node):
    node.start_agent(CONFIG)
    train = node.add_pod(TRAIN)
    inf = node.add_pod(INF)
    wait_down(node, lambda: down_tree_ready(node) and len(node.filters(IFB)) == 2, "the download tree on the ifb")
    st = node.status()
    dl = st["uplink"]["downlink"]
    assert dl["shaped"] is True and dl["ifb"] == IFB, dl
    assert dl["shapedBps"] == 392_000_000 and dl["rateBps"] == 400_000_000, dl
    assert dl["classes"]["inference"]["ceilBps"] == 392_000_000, dl
    # one filter per pod address on the ifb, on the destination
    fl = [f for f in node.filters(IFB) if f["flowid"] in ("1:10", "1:30")]
    assert sorted(f["flowid"] for f in fl) == ["1:10", "1:30"], node.filters(IFB)
    gate = dl["gate"]
    assert gate["thresholdBps"] == 196_000_000 and gate["redirecting"] is False, gate
    assert "aiqos_gate" in node.sh("tc", "filter", "show", "dev", "up0", "ingress").stdout
    for pod in (inf, train):
        route_fabric_to(node, pod.ip())
    # light (40 kB): under the gate's threshold (~260 kB per 10.7 ms): not through the ifb
    before = class_packets(node, IFB)
    send_udp(node, inf.ip())
    time.sleep(0.2)
    light = class_packets(node, IFB)
    assert light["1:10"] - before["1:10"] < 20, (before, light)
    # a 420 kB burst toward the training pod crosses it: what follows takes the ifb
    send_udp(node, inf.ip(), burst_to=train.ip(), burst=300)
    after = wait_down(node, lambda: (lambda c: c if c["1:10"] - light["1:10"] >= 200 else None)(
        class_packets(node, IFB)), "200 packets toward the inference pod in class 1:10 on the ifb")
    assert after["1:30"] - light["1:30"] >= 50, (light, after)  # the burst's tail
    send_udp(node, train.ip(), burst_to=inf.ip(), burst=300)
    after2 = wait_down(node, lambda: (lambda c: c if c["1:30"] - after["1:30"] >= 200 else None)(
        class_packets(node, IFB)), "200 packets toward the training pod in class 1:30")
    assert node.status()["uplink"]["downlink"]["gate"]["redirecting"] is True
    # explain shows the pod's download filter; /metrics the shaped rate
    ex = node.aiqosctl("explain", f"aqt/{inf.name}").stdout
    assert "download items:" in ex and IFB in ex, ex
    text = node.aiqosctl("status").stdout
    assert "download:" in text and IFB in text, text
    port = None
    for line in open(node.agent_log):
        if "metrics_port=" in line:
            port = int(line.split("metrics_port=")[1].split()[0])
    assert port, node.agent_log_tail()

    def get():
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        return c.getresponse().read().decode()
    m = agentlab.in_netns_call(node.node.name, get)
    want = f'aiqos_uplink_shaped_rate_bytes_per_second{{dev="{IFB}",direction="ingress"}} 49000000'
    assert want in m, [x for x in m.splitlines() if "shaped_rate" in x]
    assert f'dev="{IFB}"' in "".join(x for x in m.splitlines() if x.startswith("aiqos_uplink_queue_"))


def test_download_restart_adopts_and_a_pod_adds_only_its_filter(node):
    node.start_agent(CONFIG)
    node.add_api_pod(TRAIN, "10.77.0.1")
    node.add_api_pod(INF, "10.77.1.1")
    wait_down(node, lambda: down_tree_ready(node) and len(node.filters(IFB)) == 2, "2 download filters")
    idx = ifindex(node, IFB)
    before = (node.qdiscs(IFB), node.classes(IFB), node.filters(IFB), ingress_qdiscs(node), redirect_filters(node))
    out = node.restart_tc_events(CONFIG)
    assert out == "", f"the restart changed the kernel:\n{out}\n{node.agent_log_tail()}"
    assert ifindex(node, IFB) == idx
    assert (node.qdiscs(IFB), node.classes(IFB), node.filters(IFB), ingress_qdiscs(node),
            redirect_filters(node)) == before
    # one more inference pod: only its filters come (the tree stays)
    handles = {f["handle"] for f in node.filters(IFB)}
    node.add_api_pod(INF, "10.77.1.2")
    wait_down(node, lambda: len(node.filters(IFB)) == 3, "3 download filters")
    assert handles <= {f["handle"] for f in node.filters(IFB)}
    assert ifindex(node, IFB) == idx and node.root(IFB)["handle"] == "1:"


def test_download_idle_removes_the_ifb_and_the_hook(node):
    node.start_agent(CONFIG)
    pods = [node.add_api_pod(TRAIN, "10.77.0.1"), node.add_api_pod(INF, "10.77.1.1")]
    wait_down(node, lambda: down_tree_ready(node), "the download tree")
    assert os.path.exists(os.path.join(node.state_dir, "downlink.json"))
    for p in pods:
        p.delete_api()
    wait_down(node, lambda: IFB not in links(node) and not ingress_qdiscs(node), "no ifb, no ingress hook")
    assert node.status()["mode"] == "idle"
    assert not os.path.exists(os.path.join(node.state_dir, "downlink.json"))


def test_download_off_and_unknown_rate(node):
    node.start_agent(dict(CONFIG, downlink=False))
    node.add_api_pod(TRAIN, "10.77.0.1")
    node.add_api_pod(INF, "10.77.1.1")
    wait_until(lambda: node.status()["mode"] == "mixed" and node.root() and node.root()["kind"] == "htb", 5, "mixed")
    time.sleep(0.3)
    assert IFB not in links(node) and not redirect_filters(node)  # (clsact: the egress classifier's)
    assert node.status()["uplink"]["downlink"]["shaped"] is False
    # no rate at all: the veth's speed is fiction; nothing shaped, the warning says what to set
    node.stop_agent()
    node.cleanup_uplink()
    node.start_agent({"debounceMs": 50, "mixedHoldSeconds": 0})
    st = wait_until(lambda: (lambda s: s if s["mode"] == "mixed" and s["uplink"].get("warnings") else None)(
        node.status()), 5, "a warning")
    assert any('"downlinkRate"' in w for w in st["uplink"]["warnings"]), st["uplink"]
    # (a clsact may be there: the multi-queue layout's egress classifier; nothing redirects)
    assert IFB not in links(node) and not redirect_filters(node)


def test_download_without_uplink_rate_on_a_noqueue_uplink(node):
    # downlinkRate alone: the uplink (a veth: noqueue) keeps its root, the download tree is there
    assert node.root()["kind"] == "noqueue", node.tc_summary()
    node.start_agent({"downlinkRate": "400mbit", "debounceMs": 50, "mixedHoldSeconds": 0})
    pods = [node.add_api_pod(TRAIN, "10.77.0.1"), node.add_api_pod(INF, "10.77.1.1")]
    wait_down(node, lambda: down_tree_ready(node), "the download tree without an uplink tree")
    st = node.status()
    assert st["mode"] == "mixed" and st["uplink"]["shape"] == "none", st["uplink"]
    assert st["uplink"]["downlink"]["shaped"] is True, st["uplink"]
    assert any("holds no queue" in w for w in st["uplink"]["warnings"]), st["uplink"]
    assert node.root()["kind"] == "noqueue", node.tc_summary()
    for p in pods:
        p.delete_api()
    wait_down(node, lambda: IFB not in links(node) and not ingress_qdiscs(node), "no ifb, no ingress hook")
    assert node.root()["kind"] == "noqueue", node.tc_summary()


def test_download_turned_on_shares_the_classifiers_hook(node):
    """The clsact the egress classifier made (shaped uplink, download off)
    is aiqos's, not a foreign hook: turning the download on uses it."""
    node.start_agent(dict(CONFIG, downlink=False))
    node.add_api_pod(TRAIN, "10.77.0.1")
    node.add_api_pod(INF, "10.77.1.1")
    wait_down(node, lambda: "aiqos_cls" in node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout,
              "the egress classifier on its clsact")
    node.stop_agent()
    node.start_agent(CONFIG)
    wait_down(node, lambda: down_tree_ready(node), "the download tree on the same hook")
    dl = node.status()["uplink"]["downlink"]
    assert dl["shaped"] is True and not dl.get("foreignIngress"), dl
    assert [q["kind"] for q in ingress_qdiscs(node)] == ["clsact"]


def download_and_classifier_up(node):
    """A mixed node with the download tree and the egress classifier on one
    clsact; returns the egress filters as tc shows them."""
    node.start_agent(CONFIG)
    node.add_api_pod(TRAIN, "10.77.0.1")
    node.add_api_pod(INF, "10.77.1.1")
    wait_down(node, lambda: down_tree_ready(node) and
              "aiqos_cls" in node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout,
              "the download tree and the egress classifier")
    return node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout


def test_download_turned_off_keeps_the_classifiers_hook(node):
    """Turning the download off (config reload) removes the ifb and the
    redirect, not the clsact the egress classifier sits on."""
    prog = download_and_classifier_up(node)
    node.write_config(dict(CONFIG, downlink=False))
    wait_down(node, lambda: IFB not in links(node) and not redirect_filters(node), "no ifb, no redirect")
    time.sleep(0.3)
    assert node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout == prog
    assert [q["kind"] for q in ingress_qdiscs(node)] == ["clsact"]
    assert not node.sh("tc", "filter", "show", "dev", "up0", "ingress").stdout.strip()  # the gate went too


def test_download_turned_off_across_a_restart_keeps_the_classifiers_hook(node):
    """The same when the agent restarts with the download off: nothing is in
    force yet when the download is given back, and the classifier on the
    shared clsact is never removed, not even for a moment (tc monitor)."""
    prog = download_and_classifier_up(node)
    out = node.restart_tc_events(dict(CONFIG, downlink=False), then=lambda: wait_down(
        node, lambda: IFB not in links(node) and not redirect_filters(node), "no ifb, no redirect"))
    gone = [line for line in out.splitlines() if line.startswith("deleted") and
            ("clsact" in line or "egress" in line or "aiqos_cls" in line)]
    assert not gone, f"the restart took the classifier's hook away:\n{out}\n{node.agent_log_tail()}"
    assert node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout == prog
    assert [q["kind"] for q in ingress_qdiscs(node)] == ["clsact"]
    assert not node.sh("tc", "filter", "show", "dev", "up0", "ingress").stdout.strip()  # the gate went too


def test_download_foreign_ingress_qdisc_is_left_alone(node):
    node.sh("tc", "qdisc", "add", "dev", "up0", "ingress")
    node.start_agent(CONFIG)
    node.add_api_pod(TRAIN, "10.77.0.1")
    node.add_api_pod(INF, "10.77.1.1")
    st = wait_until(lambda: (lambda s: s if s["mode"] == "mixed" and any(
        "did not create" in w for w in s["uplink"].get("warnings", [])) else None)(node.status()), 5, "warning")
    assert st["uplink"]["downlink"]["foreignIngress"] is True
    assert IFB not in links(node)
    assert [q["kind"] for q in ingress_qdiscs(node)] == ["ingress"]
    # the egress side shapes all the same: HTB classified by its u32 filters
    # (no clsact can join an ingress qdisc, so no classifier), no failure
    wait_down(node, lambda: node.root()["kind"] == "htb" and len(node.filters()) == 2, "the egress tree")
    assert "aiqos_cls" not in node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout
    assert "uplink tuning failed" not in node.agent_log_tail(), node.agent_log_tail()
    node.stop_agent()
    node.cleanup_uplink()
    assert [q["kind"] for q in ingress_qdiscs(node)] == ["ingress"]  # still there, untouched


def test_download_cleanup_removes_everything(node):
    node.start_agent(CONFIG)
    node.add_api_pod(TRAIN, "10.77.0.1")
    node.add_api_pod(INF, "10.77.1.1")
    wait_down(node, lambda: down_tree_ready(node), "the download tree")
    node.stop_agent(signal.SIGKILL)
    p = node.cleanup_uplink()
    assert p.returncode == 0, p.stderr
    assert IFB not in links(node)
    assert not ingress_qdiscs(node)
    assert not os.path.exists(os.path.join(node.state_dir, "downlink.json"))
    # and drift: a restart with the ifb deleted behind its back recreates it
    node.start_agent(CONFIG)
    wait_down(node, lambda: down_tree_ready(node), "the download tree again")
    node.sh("ip", "link", "del", IFB)
    node.add_api_pod(TRAIN, "10.77.0.2")  # any event: the next pass recreates it
    wait_down(node, lambda: down_tree_ready(node) and len(node.filters(IFB)) == 3, "the ifb recreated")


def rmem(pod):
    return cni.read_sysctl(pod.ns, "net.ipv4.tcp_rmem").split()


def test_download_bounds_the_training_receive_window(node):
    """While the download tree shapes at Rd * 98 % (392 Mbit/s), training
    pods' tcp_rmem maximum is 392e6 / 8 x downlinkRttUs 150 us + 64 KiB =
    72886 bytes (the default field follows it down); with the bands off
    inference pods keep theirs (with them on, the default, they get twice
    the bound: test_agent_bands); "trainingRcvWindow": "off" gives training its profile's (here:
    the netns's own value back), an explicit byte count is used as given."""
    node.start_agent(dict(CONFIG, bulkThreshold="off"))
    train = node.add_pod(TRAIN)
    inf = node.add_pod(INF)
    wait_down(node, lambda: down_tree_ready(node), "the download tree on the ifb")
    wait_down(node, lambda: rmem(train) == ["4096", "72886", "72886"], "the training pod's tcp_rmem bounded")
    fresh = rmem(inf)  # no profile of the inference class sets tcp_rmem: the netns's own
    assert fresh[2] != "72886", fresh
    assert node.status()["uplink"]["downlink"]["trainingRcvWindowBytes"] == 72886
    assert "training receive window (tcp_rmem max): 72886 bytes" in node.aiqosctl("status").stdout
    node.write_config(dict(CONFIG, bulkThreshold="off", trainingRcvWindow="off"))
    wait_down(node, lambda: rmem(train) == fresh, "the training pod's tcp_rmem as before aiqos")
    assert node.status()["uplink"]["downlink"]["trainingRcvWindowBytes"] == 0
    node.write_config(dict(CONFIG, bulkThreshold="off", trainingRcvWindow=100000, downlinkRttUs=2000))
    wait_down(node, lambda: rmem(train) == ["4096", "100000", "100000"], "an explicit window")
    node.write_config(dict(CONFIG, bulkThreshold="off", downlinkRttUs=2000))
    # 392e6 / 8 x 2 ms + 64 KiB (above the kernel's default field, 128 KiB, which stays)
    wait_down(node, lambda: rmem(train) == ["4096", "131072", "163536"], "the window from downlinkRttUs")


def test_download_window_never_raises_the_kernels(node):
    """L8: at 400 Gbit/s over a 1 ms path the bound (392e9 / 8 x 1 ms + 64 KiB
    = 49 MB) is over the kernel's tcp_rmem maximum: a training pod keeps the
    kernel's window."""
    node.start_agent(dict(CONFIG, downlinkRate="400gbit", downlinkRttUs=1000))
    train = node.add_pod(TRAIN)
    fresh = cni.read_sysctl(node.node.name, "net.ipv4.tcp_rmem").split()
    wait_down(node, lambda: IFB in links(node) and node.root(IFB)["kind"] == "htb" and redirect_filters(node),
              "the download tree on the ifb")
    time.sleep(0.5)  # a few passes: the window would follow within one
    assert rmem(train)[2] == fresh[2], (rmem(train), fresh)
    assert node.status()["uplink"]["downlink"]["trainingRcvWindowBytes"] == int(fresh[2])


def test_download_left_alone_with_a_foreign_uplink_tree(node):
    """L8, L10: an operator's tree on the uplink: the pass stops at "left
    alone", no download tree exists, so training pods keep their window and
    no ifb or download record is left behind; once the operator's tree goes,
    the download tree comes."""
    node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "1:", "htb")
    node.sh("tc", "class", "add", "dev", "up0", "parent", "1:", "classid", "1:1", "htb", "rate", "100mbit")
    node.start_agent(dict(CONFIG, driftRepairSeconds=1))  # a tree removed is seen at the next drift repair
    train = node.add_pod(TRAIN)
    fresh = cni.read_sysctl(node.node.name, "net.ipv4.tcp_rmem").split()
    wait_down(node, lambda: (lambda s: s if s and s.get("uplink", {}).get("foreign") else None)(
        node.status(check=False)), "status says the uplink is foreign")
    time.sleep(0.5)
    assert rmem(train)[2] == fresh[2], (rmem(train), fresh)
    dl = node.status()["uplink"]["downlink"]
    assert dl["trainingRcvWindowBytes"] == 0 and dl["shaped"] is False, dl
    assert IFB not in links(node), links(node)
    assert not os.path.exists(os.path.join(node.state_dir, "downlink.json"))
    node.sh("tc", "qdisc", "del", "dev", "up0", "root")
    wait_down(node, lambda: IFB in links(node) and redirect_filters(node) and node.root(IFB)["kind"] == "htb",
              "the download tree once the uplink is ours to shape")
