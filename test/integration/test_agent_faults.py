"""test_agent_faults.py — "never worse than without aiqos": on a lab node
(agentlab.MqNodeLab: a 4-queue uplink, so upload is the gated HTB on
aiqos-ifb1 and download the gated tree on aiqos-ifb0) with the agent
running, a training pod saturating both directions (over the gates'
thresholds: every packet takes the ifbs) and an inference pod's UDP probe
in both directions (200 datagrams/s, numbered), each fault an operator or
another daemon can cause is applied: an ifb set down, given another MTU,
deleted, renamed; the uplink's root qdisc replaced; the clsact deleted;
aiqos's filters deleted, a gate program detached; the agent SIGKILLed
inside a pass; the state dir read-only. For each: the probe's lost datagrams add up to under 1 s
in both directions, and the agent restores its layout (the probe's
packets land in the inference class on the ifbs again) or says why
(status, metric). Outcomes are checked (packets flow, the class they land
in), not one layout of tc objects. And L1 in the kernel: at 2 Mbit/s the
upload gate's hold keeps a flow that falls back under its threshold behind
its own backlog (no reordering)."""

import contextlib
import os
import re
import signal
import socket
import struct
import threading
import time

import pytest

import agentlab
import cni
from agentlab import class_packets, wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
IFB_DOWN, IFB_UP = "aiqos-ifb0", "aiqos-ifb1"
# low rates so that a Python sender crosses the gates' thresholds (half the
# shaped rate); drift repair far away: what restores is the agent's reaction
CONFIG = {"uplinkRate": "20mbit", "downlinkRate": "20mbit", "debounceMs": 50, "mixedHoldSeconds": 0,
          "driftRepairSeconds": 300}
PROBE_PPS = 200
MAX_LOSS_S = 1.0
PROBE_PORT, BLAST_PORT = 7101, 7002


def _sock_in(ns, bind=None):
    """A UDP socket created in netns ns (it stays there), bound if asked."""
    def make():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        if bind:
            s.bind(bind)
        return s
    return agentlab.in_netns_call(ns, make)


class Probe:
    """Numbered datagrams at `pps` from netns src to ip:port (received in
    netns dst): the time lost (every gap added up), in seconds."""

    def __init__(self, src, dst, ip, port, pps=PROBE_PPS):
        self.ip, self.port, self.interval = ip, port, 1.0 / pps
        self.rx = _sock_in(dst, ("0.0.0.0", port))
        self.rx.settimeout(0.2)
        self.tx = _sock_in(src)
        self.sent, self.got, self.stop = 0, set(), threading.Event()
        self.threads = [threading.Thread(target=self._send, daemon=True),
                        threading.Thread(target=self._recv, daemon=True)]

    def _send(self):
        t0 = time.monotonic()
        while not self.stop.is_set():
            with contextlib.suppress(OSError):  # a route or neighbour in flux
                self.tx.sendto(struct.pack("!I", self.sent) + b"p" * 96, (self.ip, self.port))
            self.sent += 1
            delay = t0 + self.sent * self.interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def _recv(self):
        while True:
            try:
                data = self.rx.recv(2048)
            except socket.timeout:
                if self.stop.is_set():
                    return
                continue
            except OSError:
                return
            if len(data) >= 4:
                self.got.add(struct.unpack("!I", data[:4])[0])

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(5)
        self.tx.close()
        self.rx.close()
        return self

    def longest_loss_s(self):
        """The longest run of datagrams lost, as time (a run that reaches
        the end counts until the end)."""
        run = best = 0
        for seq in range(self.sent):
            run = 0 if seq in self.got else run + 1
            best = max(best, run)
        return best * self.interval

    def loss_s(self):
        """Every gap added up: the datagrams lost, as time (a gate that
        drops in bursts loses as much as one long gap)."""
        return (self.sent - len(self.got)) * self.interval

    def received(self):
        """Datagrams received so far (for a probe still running)."""
        return len(self.got)

    def __repr__(self):
        return f"probe {self.ip}: sent {self.sent}, received {len(self.got)}, loss {self.loss_s():.3f}s (longest run {self.longest_loss_s():.3f}s)"


class Blast:
    """1400-byte datagrams at bps from netns src to ip:port, a sink socket
    in netns dst (never read: the kernel drops what overflows it)."""

    def __init__(self, src, dst, ip, port, bps):
        self.sink = _sock_in(dst, ("0.0.0.0", port))
        self.tx = _sock_in(src)
        self.ip, self.port, self.pps = ip, port, bps / 8 / 1400
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        t0, n, payload = time.monotonic(), 0, b"b" * 1400
        while not self.stop.is_set():
            for _ in range(8):
                with contextlib.suppress(OSError):  # a route or neighbour in flux
                    self.tx.sendto(payload, (self.ip, self.port))
                n += 1
            delay = t0 + n / self.pps - time.monotonic()
            if delay > 0:
                time.sleep(delay)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop.set()
        self.thread.join(5)
        self.tx.close()
        self.sink.close()


def links(node):
    return set(cni.link_names(node.node.name))


def ifb_up(node, name):
    l = cni.link(node.node.name, name)
    return l is not None and "UP" in l.get("flags", [])


def egress_text(node):
    return node.sh("tc", "filter", "show", "dev", "up0", "egress", check=False).stdout


def ingress_text(node):
    return node.sh("tc", "filter", "show", "dev", "up0", "ingress", check=False).stdout


def layout_ready(node):
    """Both gated trees in force: the ifbs up with their HTB, the gates and
    redirects on the uplink's hooks."""
    for ifb in (IFB_DOWN, IFB_UP):
        if not ifb_up(node, ifb):
            return False
        r = node.root(ifb)
        if not r or r["kind"] != "htb" or not {"1:10", "1:30"} <= set(class_packets(node, ifb)):
            return False
    e, i = egress_text(node), ingress_text(node)
    return ("aiqos_ugate" in e and f"Redirect to device {IFB_UP}" in e and "aiqos_gate" in i
            and f"Redirect to device {IFB_DOWN}" in i)


def wait(node, pred, what, timeout_s=8):
    try:
        return wait_until(pred, timeout_s, what)
    except AssertionError as e:
        extra = "".join(cni.tc_summary(node.node.name, d) for d in (IFB_DOWN, IFB_UP) if d in links(node))
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{extra}\n--- agent log ---\n{node.agent_log_tail()}") \
            from None


class FaultLab:
    """The node, its two pods, the saturating training traffic both ways
    and the inference probes both ways."""

    def __init__(self, node, config=None):
        self.node = node
        node.start_agent(config or CONFIG)
        self.inf = node.add_pod(INF)
        self.train = node.add_pod(TRAIN)
        self.fabric_ip = f"{node.uplink_net}.1"
        node.sh("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
        for pod in (self.inf, self.train):
            cni.sh("ip", "-n", node.fabric.name, "route", "replace", f"{pod.ip()}/32", "via",
                   f"{node.uplink_net}.2")
        wait(node, lambda: layout_ready(node) and len(node.filters(IFB_DOWN)) >= 2, "both gated trees")
        wait(node, lambda: all(p["ips"] for p in node.status()["pods"]), "the pods' addresses known")
        fab = node.fabric.name
        # 16 Mbit/s each way: over the gates' ~9.8 Mbit/s thresholds, under the 19.6 Mbit/s trees
        self.blasts = [Blast(fab, self.train.ns, self.train.ip(), BLAST_PORT, 16e6).start(),
                       Blast(self.train.ns, fab, self.fabric_ip, BLAST_PORT, 16e6).start()]
        self.probes = None
        wait(node, lambda: self.redirecting(), "both gates redirecting under the training load")

    def redirecting(self):
        up = self.node.status()["uplink"]
        return up["gate"]["redirecting"] and up["downlink"]["gate"]["redirecting"]

    def start_probes(self):
        self.probes = {"download": Probe(self.node.fabric.name, self.inf.ns, self.inf.ip(), PROBE_PORT).start(),
                       "upload": Probe(self.inf.ns, self.node.fabric.name, self.fabric_ip, PROBE_PORT + 1).start()}
        wait_until(lambda: all(p.received() >= 20 for p in self.probes.values()), 5, "the probes flowing")

    def finish_probes(self):
        for p in self.probes.values():
            p.finish()
        return self.probes

    def inference_classes(self):
        """(download, upload) packets in the inference class on the ifbs (0 when absent)."""
        return tuple(class_packets(self.node, ifb).get("1:10", 0) if ifb in links(self.node) else 0
                     for ifb in (IFB_DOWN, IFB_UP))

    def __repr__(self):
        return "; ".join(f"{d}: {p!r}" for d, p in (self.probes or {}).items())

    def close(self):
        for b in self.blasts:
            b.finish()
        if self.probes:
            for p in self.probes.values():
                if not p.stop.is_set():
                    p.finish()


def run_fault(node, fault, check=None, settle_s=2.5, restored=layout_ready, config=None, after=None):
    """Apply fault() under load with the probes running: the time lost
    in either direction is under MAX_LOSS_S, check() holds (when given),
    the layout comes back (restored), and the probes' packets land in the
    inference class on both ifbs again."""
    fl = FaultLab(node, config)
    try:
        fl.start_probes()
        time.sleep(0.5)
        fault(fl)
        time.sleep(settle_s)
        for direction, p in fl.probes.items():
            assert p.loss_s() <= MAX_LOSS_S, f"{direction}: {p}\n{node.agent_log_tail()}"
        if check:
            check(fl)
        wait(node, lambda: restored(node), "the layout restored after the fault", timeout_s=5)
        if after:
            after(fl)
        before = fl.inference_classes()
        time.sleep(0.5)
        after = fl.inference_classes()
        probes = fl.finish_probes()
        print(f"\nfault figures: {fl!r}")  # shown with pytest -s
        for direction, p in probes.items():
            assert p.loss_s() <= MAX_LOSS_S, f"{direction}: {p}\n{node.agent_log_tail()}"
        # the probe's packets (still under the training load) land in the inference class
        assert after[0] - before[0] >= 20 and after[1] - before[1] >= 20, (before, after, node.tc_summary())
        return fl
    finally:
        fl.close()


def within(cond, timeout_s, what):
    """A check for run_fault: cond() became true within timeout_s of the fault."""
    return lambda fl: wait_until(cond, timeout_s, what)


@pytest.mark.parametrize("ifb", [IFB_DOWN, IFB_UP])
def test_fault_ifb_set_down(mqnode, ifb):
    """M1: an ifb set down is put back up at once (not at the next drift
    repair): mirred drops what it redirects to a device that is down."""
    node = mqnode
    t = {}

    def fault(fl):
        node.sh("ip", "link", "set", ifb, "down")
        t0 = time.monotonic()
        try:
            wait_until(lambda: ifb_up(node, ifb), 1.0, f"{ifb} up again", interval_s=0.01)
            t["up_s"] = time.monotonic() - t0
        except AssertionError:
            t["up_s"] = None  # the loss check below says what it cost

    def check(fl):
        assert t["up_s"] is not None, f"{ifb} not up again within 1 s: {fl!r}"
        print(f"\n{ifb} up again {t['up_s'] * 1000:.0f} ms after it was set down")

    run_fault(node, fault, check=check)


def test_fault_ifb_mtu_changed(mqnode):
    """M1: an ifb given another MTU gets the uplink's back."""
    node = mqnode
    mtu = cni.link(node.node.name, "up0")["mtu"]
    run_fault(node, lambda fl: node.sh("ip", "link", "set", IFB_DOWN, "mtu", "576"),
              check=lambda fl: cni.link(node.node.name, IFB_DOWN)["mtu"] == mtu or pytest.fail("the ifb's MTU"))


def test_fault_ifb_deleted(mqnode):
    """Both ifbs deleted: the link events bring them (and their trees) back."""
    node = mqnode

    def fault(fl):
        node.sh("ip", "link", "del", IFB_DOWN)
        node.sh("ip", "link", "del", IFB_UP)

    run_fault(node, fault)


def test_fault_ifb_renamed(mqnode):
    """An ifb renamed (set down first, as the kernel requires): it gets its
    name back, up, with its tree; no second ifb is left behind."""
    node = mqnode

    def fault(fl):
        node.sh("ip", "link", "set", "dev", IFB_DOWN, "down")
        node.sh("ip", "link", "set", "dev", IFB_DOWN, "name", "aqt-renamed", check=False)

    run_fault(node, fault, check=lambda fl: "aqt-renamed" not in links(node) or pytest.fail(
        f"the renamed ifb left behind: {links(node)}"))


# faults on the uplink's tc objects: the agent does not follow tc events;
# what it placed comes back at the next drift repair (here every 2 s), and
# meanwhile traffic flows unshaped (no gate, no redirect: nothing to lose)
DRIFT = dict(CONFIG, driftRepairSeconds=2)


def drift_repairs(node):
    m = re.search(r"^aiqos_drift_repairs_total (\d+)", node.metrics(), re.M)
    return int(m.group(1)) if m else 0


def drift_fault(node, argv):
    """run_fault's fault and after for a tc-level fault: the repair is
    reported (aiqos_drift_repairs_total grows)."""
    seen = {}

    def fault(fl):
        seen["before"] = drift_repairs(node)
        node.sh(*argv)

    def after(fl):
        assert drift_repairs(node) > seen["before"], (seen, node.agent_log_tail())

    return fault, after


def test_fault_uplink_root_qdisc_replaced(mqnode):
    """The uplink's root replaced (a network manager's pfifo): the gated
    trees do not live there, nothing is lost, the layout stays."""
    node = mqnode
    run_fault(node, lambda fl: node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "7:", "pfifo", "limit", "1000"),
              config=DRIFT)


def test_fault_clsact_deleted(mqnode):
    """The uplink's clsact deleted (both gates, both redirects and the
    classifier with it): traffic flows unshaped, the next drift repair puts
    the layout back."""
    node = mqnode
    fault, after = drift_fault(node, ["tc", "qdisc", "del", "dev", "up0", "clsact"])
    run_fault(node, fault, config=DRIFT, after=after)


@pytest.mark.parametrize("hook,pref", [("egress", None), ("ingress", None), ("ingress", "29"), ("egress", "27")])
def test_fault_filters_deleted(mqnode, hook, pref):
    """aiqos's filters on one hook deleted (`tc filter del dev up0 egress`),
    or one gate program detached alone (pref 29 / 27: the redirect then takes
    everything through the tree): traffic flows, the next drift repair puts
    them back."""
    node = mqnode
    argv = ["tc", "filter", "del", "dev", "up0", hook] + (["pref", pref] if pref else [])
    fault, after = drift_fault(node, argv)
    run_fault(node, fault, config=DRIFT, after=after)


def test_fault_agent_sigkilled_mid_pass(mqnode):
    """The agent SIGKILLed inside a pass's apply (the "apply-item" failpoint:
    new pods' download filters): the kernel keeps what it had, traffic
    flows; restarted, it adopts and the layout is whole."""
    node = mqnode

    def fault(fl):
        node.stop_agent(signal.SIGTERM)
        node.start_agent(CONFIG, env={"AIQOS_TEST_FAILPOINTS": "apply-item=kill"})
        node.add_api_pods([(INF, f"10.86.0.{i}") for i in range(1, 21)])
        wait_until(lambda: node.agent.poll() is not None, 5, "the agent killed inside the apply")
        assert node.agent.returncode == -signal.SIGKILL, node.agent.returncode
        node.start_agent(CONFIG)

    run_fault(node, fault, restored=lambda n: layout_ready(n) and len(n.filters(IFB_DOWN)) >= 22)


def test_fault_state_dir_read_only(mqnode):
    """The state dir read-only (a full or remounted disk): the agent keeps
    repairing what needs no new record (an ifb set down), traffic flows,
    status still answers."""
    node = mqnode
    state = node.state_dir

    def fault(fl):
        # in the host's mount namespace: it propagates to the agent's (ip netns exec: a slave)
        cni.sh("mount", "--bind", state, state)
        cni.sh("mount", "-o", "remount,bind,ro", state)
        node.sh("ip", "link", "set", IFB_UP, "down")

    def check(fl):
        assert ifb_up(node, IFB_UP), links(node)
        assert node.status()["ready"] is True
        with pytest.raises(OSError):
            open(os.path.join(state, "probe"), "w").close()

    try:
        run_fault(node, fault, check=check)
    finally:
        cni.sh("umount", state, check=False)


def test_gate_hold_keeps_order_at_a_low_rate(mqnode):
    """L1: at 2 Mbit/s the leaves' byte FIFOs take seconds to drain; the
    upload gate's hold outlasts them, so a flow that falls back under the
    threshold after an overload never overtakes its own backlog in the tree
    (with a fixed 100 ms hold: 356 of 796 reordered in the review)."""
    node = mqnode
    node.start_agent({"uplinkRate": "2mbit", "downlink": False, "debounceMs": 50, "mixedHoldSeconds": 0})
    train = node.add_pod(TRAIN)
    node.sh("sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    wait(node, lambda: ifb_up(node, IFB_UP) and "aiqos_ugate" in egress_text(node), "the gated upload tree")
    hold_ms = node.status()["uplink"]["gate"]["holdMs"]
    # training and default leaves: their FIFOs' floors (256 + 128 KiB) twice at 1.98 Mbit/s
    assert hold_ms == 2 * (256 + 128) * 1024 * 8 * 1000 // 1_980_000, hold_ms
    # one numbered flow: ~5 Mbit/s for 1.3 s (over the 0.99 Mbit/s threshold), then 200 B every 20 ms
    fab = node.fabric.name
    rx = _sock_in(fab, ("0.0.0.0", PROBE_PORT + 5))
    rx.settimeout(0.5)
    tx = _sock_in(train.ns)
    dst = (f"{node.uplink_net}.1", PROBE_PORT + 5)
    order = []

    def recv():
        while True:
            try:
                order.append(struct.unpack("!I", rx.recv(2048)[:4])[0])
            except (socket.timeout, OSError):
                return

    t = threading.Thread(target=recv, daemon=True)
    t.start()
    seq, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 1.3:
        for _ in range(8):
            tx.sendto(struct.pack("!I", seq) + b"f" * 996, dst)
            seq += 1
        time.sleep(8 * 1000 * 8 / 5e6)
    for _ in range(150):
        tx.sendto(struct.pack("!I", seq) + b"s" * 196, dst)
        seq += 1
        time.sleep(0.02)
    time.sleep(1.5)  # what the tree still holds
    rx.close()
    tx.close()
    t.join(5)
    top, reordered = -1, 0
    for x in order:
        reordered += x < top
        top = max(top, x)
    print(f"\nhold {hold_ms} ms: sent {seq}, received {len(order)}, reordered {reordered}")
    assert len(order) > 150, (seq, len(order))
    assert reordered == 0, f"{reordered} of {len(order)} reordered (hold {hold_ms} ms)"
