"""test_agent_bands.py — interactive first, bulk shares, inside the inference
class (issue 30; node.h BANDS): on a lab node in mixed mode with both
directions shaped, an inference pod's long transfer (one flow, a few MB)
lands in the inference-bulk band's class 1:11 once past bulkThreshold, its
short requests (another flow, meanwhile) stay in the inference class 1:10,
the long flow is promoted back after a silence of 1 s, and a pod annotated
ai.workload/bulk is in the band from its first byte. Outcome checked by the
tc class counters of the uplink's tree (upload) and the ifb's (download).
Root, network namespaces, the CI kernel."""
import socket
import time

import agentlab
from agentlab import class_packets, wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
THRESHOLD = 262144  # bytes: ~180 datagrams of 1400 bytes
CONFIG = {"uplinkRate": "500mbit", "downlink": True, "downlinkRate": "400mbit", "debounceMs": 50,
          "mixedHoldSeconds": 1, "bulkThreshold": THRESHOLD, "bulkIdleMs": 200}
# (an idle gap longer than the default's 20 ms: a sender descheduled on a busy
# machine must not look quiet)
LONG_N, CHUNK, SHORT_N = 1500, 30, 50  # 30 x 1400 bytes a millisecond: < 336 Mbit/s, past the download gate


def transfer(ns, dst, long_n=LONG_N, short_n=SHORT_N):
    """From netns ns to dst: a long flow (long_n 1400-byte datagrams, paced
    CHUNK a millisecond) and, interleaved, a short flow (short_n 200-byte
    datagrams from another socket): two 5-tuples."""
    def run():
        lg = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sh = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        every = max(1, long_n // max(1, short_n))
        sent_short = 0
        try:
            for i in range(long_n):
                lg.sendto(b"x" * 1400, (dst, 9))
                if i % every == 0 and sent_short < short_n:
                    sh.sendto(b"y" * 200, (dst, 9))
                    sent_short += 1
                if i % CHUNK == CHUNK - 1:
                    time.sleep(0.001)
            return lg.getsockname()[1]
        finally:
            lg.close()
            sh.close()
    return agentlab.in_netns_call(ns, run)


def send_from(ns, dst, port, n):
    """n 1400-byte datagrams from source port port (the long flow again)."""
    def run():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind(("0.0.0.0", port))
            for _ in range(n):
                s.sendto(b"x" * 1400, (dst, 9))
        finally:
            s.close()
    agentlab.in_netns_call(ns, run)


def delta(before, after):
    return {k: after.get(k, 0) - before.get(k, 0) for k in after}


def check_split(d, what, gated=False):
    """The long flow's first THRESHOLD bytes interactive, the rest in the
    band; the short flow all interactive. gated: the download gate lets
    what arrives below half the rate skip the ifb (its counters), so only
    bounds: most of the long flow in the band, never more than its first
    THRESHOLD bytes and the short flow interactive."""
    first = THRESHOLD // 1442  # datagrams of 1400 bytes + UDP, IP and Ethernet headers
    assert d.get("1:11", 0) >= (LONG_N // 4 if gated else LONG_N - first - 150), (what, d)
    assert (SHORT_N // 2 if gated else SHORT_N + first // 2) <= d.get("1:10", 0) <= SHORT_N + first + 150, (what, d)


def up_tree(node, ifb="aiqos-ifb0"):
    def tree():
        s = node.status(check=False)
        return s and s["mode"] == "mixed" and s["uplink"].get("bands") and \
            {"1:10", "1:11", "1:30"} <= set(class_packets(node)) and \
            {"1:10", "1:11", "1:30"} <= set(class_packets(node, ifb))
    try:
        wait_until(tree, 10, "mixed, both trees with the inference-bulk band")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None


def test_long_flow_demoted_short_flow_first_upload(node):
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    node.add_pod(TRAIN)
    up_tree(node)
    st = node.status()
    assert st["uplink"]["bands"]["thresholdBytes"] == THRESHOLD, st["uplink"]["bands"]
    fab_ip = f"{node.uplink_net}.1"
    before = class_packets(node)
    port = transfer(inf.ns, fab_ip)
    after = wait_until(lambda: (lambda c: c if c.get("1:11", 0) - before.get("1:11", 0) >= LONG_N // 2 else None)(
        class_packets(node)), 5, "the long flow in 1:11")
    time.sleep(0.2)
    check_split(delta(before, class_packets(node)), "upload")
    # quiet for BPF_BAND_PROMOTE_IDLE_MS (1 s; bulkIdleMs restarts the
    # count only): promoted, its next packets interactive
    time.sleep(1.1)
    before = class_packets(node)
    send_from(inf.ns, fab_ip, port, 20)
    after = wait_until(lambda: (lambda c: c if c["1:10"] - before["1:10"] >= 20 else None)(class_packets(node)), 5,
                       "the long flow back in 1:10")
    assert after["1:11"] - before["1:11"] < 3, (before, after)
    # the per-band counters in /metrics
    m = node.metrics()
    assert 'class="inference-bulk",object="class"' in m, m[:2000]


def test_long_flow_demoted_short_flow_first_download(node):
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    ifb = "aiqos-ifb0"
    up_tree(node, ifb)
    # the fabric reaches the pods through the node, as a switch would
    for pod in (inf, train):
        agentlab.cni.sh("ip", "-n", node.fabric.name, "route", "replace", f"{pod.ip()}/32", "via",
                        f"{node.uplink_net}.2")
    # a burst toward the training pod trips the download gate (bpf_gate.h):
    # everything after it takes the ifb (the transfer keeps it tripped)
    agentlab.send_udp(node.fabric.name, train.ip(), n=0, burst=300)
    before = class_packets(node, ifb)
    transfer(node.fabric.name, inf.ip())
    wait_until(lambda: class_packets(node, ifb).get("1:11", 0) - before.get("1:11", 0) >= LONG_N // 4, 5,
               "the long flow in 1:11 on the ifb")
    time.sleep(0.2)
    check_split(delta(before, class_packets(node, ifb)), "download", gated=True)


def test_bulk_pod_in_the_band_from_its_first_byte(node):
    node.start_agent(CONFIG)
    node.add_pod(INF)
    loader = node.add_pod(dict(INF, **{"ai.workload/bulk": "true"}))
    node.add_pod(TRAIN)
    up_tree(node)
    before = class_packets(node)
    agentlab.send_udp(loader.ns, f"{node.uplink_net}.1", n=50)
    after = wait_until(lambda: (lambda c: c if c["1:11"] - before["1:11"] >= 50 else None)(class_packets(node)), 5,
                       "the loader's 50 packets in 1:11")
    assert after["1:10"] - before["1:10"] < 3, (before, after)
    why = node.aiqosctl("explain", f"aqt/{loader.name}").stdout
    assert "ai.workload/bulk=true" in why, why


def test_bands_bound_the_inference_receive_window_too(node):
    """With the download bands on, an inference pod's bulk (a model load
    over many connections) shares with training on the ifb: unbounded, its
    senders would fill the link's upstream queue as training's would, so
    inference pods get twice the training pods' receive window bound (node.h
    DOWNLOAD, 392e6 / 8 x 150 us + 64 KiB = 72886 bytes for training, 145772 for
    inference: a response keeps two TSO bursts in flight); without the bands they keep
    their own (test_agent_downlink)."""
    node.start_agent(CONFIG)
    inf = node.add_pod(INF)
    train = node.add_pod(TRAIN)
    up_tree(node)

    def rmem(pod):
        return agentlab.cni.read_sysctl(pod.ns, "net.ipv4.tcp_rmem").split()[2]
    wait_until(lambda: rmem(train) == "72886" and rmem(inf) == "145772", 10, "both pods' tcp_rmem bounded")
    dl = node.status()["uplink"]["downlink"]
    assert (dl["trainingRcvWindowBytes"], dl["inferenceRcvWindowBytes"]) == (72886, 145772), dl
    assert "inference receive window (tcp_rmem max, the bands are on): 145772 bytes" in node.aiqosctl("status").stdout
    node.write_config(dict(CONFIG, bulkThreshold="off"))
    wait_until(lambda: rmem(inf) not in ("72886", "145772") and rmem(train) == "72886", 10,
               "the inference pod's window back without the bands")
    assert node.status()["uplink"]["downlink"]["inferenceRcvWindowBytes"] == 0
