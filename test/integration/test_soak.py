"""test_soak.py — the fault soak: churn on two lab nodes
(agentlab.py: the real plugin chained after ptp + host-local in network
namespaces) for AIQOS_SOAK_SECONDS (default 180: the version `make test`
runs; `make soak` runs 1800):
  - node "stand-in": its agent against the API stand-in
    test/apiserver/fakeapi.py;
  - node "kube": its agent against the real kube-apiserver + etcd
    (kubelab.py: hack/control-plane.sh inside that node's netns, through the
    k8s suite's test/k8s/plane.py); pods created, patched and deleted
    through the real API.
Every fault on a schedule, on both nodes unless said:

  - pods created (real CNI ADD, random class, profile and limits) and deleted
    (CNI DEL + API delete), a pool of live pods turning over, at least
    MIN_PODS created and deleted on the stand-in node (MIN_PODS_KUBE on the
    kube node);
  - annotations flipped on running pods (class, profile, bandwidth);
  - the agent SIGKILLed every few minutes (every duration/8, the first half of
    the run) and restarted — ADDs meanwhile run without it (fail-open);
  - stand-in node: the API stand-in killed and restarted on the same ports
    with its pods re-seeded and a higher resourceVersion (twice);
  - kube node: the real kube-apiserver restarted (`control-plane.sh restart
    apiserver`: a fresh watch cache), every other time etcd first and then
    the apiserver, KUBE_RESTARTS times over the run (at least 2, one per ~5
    minutes); the kube node's pods are not touched while its API is down;
  - the state dir (a tmpfs) full for a minute (duration/9 in short runs):
    a pod ADDed meanwhile keeps its network and tuning, its record goes to
    the agent, which writes it once space is back; from then on it is
    re-tuned and CHECKed like any other. Only one ADDed while full with
    its agent down has no record (lost by design): it is deleted when
    space is back (counted as deleted_recordless);
  - the uplink's root qdisc replaced by hand (twice);
  - the node's devices broken as an operator or a network manager would
    (test_agent_faults.py's faults, one each, in turn): the download ifb
    set down, renamed (down first), deleted; the uplink's clsact deleted;
    its ingress filters deleted. At the end the download ifb is up under
    its own name, its redirect in place, and nothing of it is left after
    the drain.

Then, with the churn stopped and the last pools still running, on each node:
every pod's kernel state equals its plan (the plugin's CHECK passes for
each, aiqosctl status shows none failed and every pod's class), the uplink
carries the mode's tree; agent RSS grew < 10 % and its fd count did not grow
over the last agent's life (measured from after its warm-up, at the same
pool size); no ADD failed (failurePolicy open). After deleting every pod
nothing leaked: no record or temp file in the state dir, no IPAM
reservation, no veth or ifb in the node, the uplink's original root qdisc
back, no filter. The figures go to BUILD/soak-report.json and stdout."""


import contextlib
import json
import os
import random
import re
import signal
import subprocess
import threading
import time

import pytest

import agentlab
import cni
import kubelab
from agentlab import wait_until
from conftest import make_lab

DURATION_S = float(os.environ.get("AIQOS_SOAK_SECONDS", "180"))
POOL = 10
MIN_PODS = 100
POOL_KUBE = 6
MIN_PODS_KUBE = 100
KUBE_RESTARTS = max(2, int(DURATION_S // 300))
CONFIG = {"uplinkRate": "500mbit", "debounceMs": 50, "mixedHoldSeconds": 2, "driftRepairSeconds": 5}
IFB = "aiqos-ifb0"
DEVICE_FAULTS = [
    ("ifb down", [("ip", "link", "set", IFB, "down")]),
    ("ifb renamed", [("ip", "link", "set", IFB, "down"), ("ip", "link", "set", IFB, "name", "aqt-soak-ifb")]),
    ("ifb deleted", [("ip", "link", "del", IFB)]),
    ("clsact deleted", [("tc", "qdisc", "del", "dev", "up0", "clsact")]),
    ("ingress filters deleted", [("tc", "filter", "del", "dev", "up0", "ingress")]),
]
CHOICES = [
    {"ai.workload": "inference"},
    {"ai.workload": "training"},
    {},
    {"ai.workload": "inference", "ai.workload/profile": "inference-strict"},
    {"ai.workload": "training", "kubernetes.io/egress-bandwidth": "50M"},
    {"ai.workload": "inference", "kubernetes.io/ingress-bandwidth": "20M"},
    {"kubernetes.io/egress-bandwidth": "10M"},
]
FLIPS = [
    {"ai.workload": "inference", "kubernetes.io/egress-bandwidth": None, "ai.workload/profile": None},
    {"ai.workload": "training", "ai.workload/profile": None},
    {"ai.workload": None, "ai.workload/profile": None},
    {"ai.workload": "training", "kubernetes.io/egress-bandwidth": "30M"},
    {"ai.workload": "inference", "ai.workload/profile": "inference-strict"},
]


@contextlib.contextmanager
def lab_node(lab, cls):
    """A NodeLab of class cls on lab, its state dir a small tmpfs, its API started."""
    os.makedirs(lab.state_dir, exist_ok=True)
    cni.sh("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "aqt-soak-state", lab.state_dir)
    try:
        with agentlab.started(lab, cls) as n:
            yield n
    finally:
        cni.sh("umount", "-l", lab.state_dir, check=False)


@pytest.fixture
def node(lab):
    with lab_node(lab, agentlab.NodeLab) as n:
        yield n


@pytest.fixture
def kube_node(plugin):
    """The second node: its own Lab (netns, IPAM, state dir), the real
    kube-apiserver + etcd in its netns."""
    try:
        kubelab.cplane.bin_dir()
    except kubelab.Unavailable as e:
        pytest.skip(str(e))
    with make_lab(plugin, "soakk") as lab2, lab_node(lab2, kubelab.KubeNodeLab) as n:
        yield n


# ---- the agent process

def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def agent_pid(node):
    """The aiqos-agent process (node.agent is `ip netns exec`, which execs it)."""
    pid = node.agent.pid
    with open(f"/proc/{pid}/comm") as f:
        assert f.read().strip() == "aiqos-agent"
    return pid


def footprint(node):
    pid = agent_pid(node)
    rss_kib = int(proc_status(pid)["VmRSS"].split()[0])
    return {"rss_kib": rss_kib, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


# ---- the API stand-in, restarted on its ports

def restart_api(node):
    pods = node.api("GET", "/pods")["items"]
    rv = int(node.api("GET", "/state")["resourceVersion"])
    os.killpg(node.api_proc.pid, signal.SIGKILL)
    node.api_proc.wait(5)
    ready = os.path.join(node.dir, "api-ready.json")
    os.unlink(ready)
    log = open(os.path.join(node.dir, "fakeapi.log"), "a")
    node.api_proc = subprocess.Popen(
        ["ip", "netns", "exec", node.node.name, "/usr/bin/python3", agentlab.FAKEAPI, "--certs", agentlab.pki(),
         "--token-file", node.token_file, "--ready-file", ready, "--quiet", "--bookmark-interval", "1",
         "--port", str(node.api_ports["port"]), "--control-port", str(node.api_ports["control_port"]),
         "--start-rv", str(rv + 1000)],
        stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    log.close()
    wait_until(lambda: os.path.exists(ready), 20, "fakeapi ready again")
    items = []
    for p in pods:
        m, spec, st = p["metadata"], p.get("spec", {}), p.get("status", {})
        items.append({"namespace": m["namespace"], "name": m["name"], "node": spec.get("nodeName"),
                      "uid": m["uid"], "annotations": m.get("annotations") or {},
                      "phase": st.get("phase", "Running"),
                      "podIPs": [x["ip"] for x in st.get("podIPs", [])]})
    if items:
        node.api("PUT", "/pods", {"items": items})


class KubeRestart:
    """One restart of the real control plane on a thread (the churn on the
    other node goes on meanwhile): the apiserver, or etcd then the apiserver."""

    def __init__(self, node, components):
        self.components = components
        self.error = None
        self.t0 = time.monotonic()
        self.seconds = None

        def run():
            try:
                for c in components:
                    node.restart(c)
            except BaseException as e:  # noqa: BLE001 - reported by the main loop
                self.error = e
            self.seconds = round(time.monotonic() - self.t0, 1)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def busy(self):
        if self.thread.is_alive():
            return True
        if self.error:
            raise AssertionError(f"restart {self.components}: {self.error}")
        return False


# ---- the kernel and the state dir

def state_files(node):
    return sorted(os.listdir(node.state_dir))


def links(node):
    return cni.sh(*cni.in_ns(node.node.name, "ip", "-j", "link", "show")).stdout


def ifbs(ns=None):
    """Names of the ifb devices in ns (None: this netns)."""
    argv = ["ip", "-o", "link", "show", "type", "ifb"]
    out = cni.sh(*(cni.in_ns(ns, *argv) if ns else argv)).stdout
    return [m.group(1) for m in re.finditer(r"^\d+: ([^:@\s]+)", out, re.M)]


def qdisc_lines(node, dev="up0"):
    return cni.sh(*cni.in_ns(node.node.name, "tc", "qdisc", "show", "dev", dev)).stdout.strip().splitlines()


class Soak:
    def __init__(self, name, node, lab, pool, min_pods, seed):
        self.name, self.node, self.lab = name, node, lab
        self.pool, self.min_pods = pool, min_pods
        self.live = []
        self.rng = random.Random(seed)
        self.n = {"created": 0, "deleted": 0, "add_failed": 0, "del_failed": 0, "flips": 0, "agent_kills": 0,
                  "api_restarts": 0, "state_full_s": 0.0, "uplink_by_hand": 0, "adds_without_agent": 0,
                  "adds_state_full": 0, "deleted_recordless": 0, "records_by_agent": 0, "device_faults": 0}
        self.failures = []
        self.agent_up = True
        self.state_full = False
        self.full_t0 = None
        self.original_root = qdisc_lines(node)
        self.baseline = None
        self.after = None

    def add(self):
        ann = dict(self.rng.choice(CHOICES))
        try:
            pod = self.node.add_pod(ann)
        except AssertionError as e:  # add_pod asserts the ADD's exit 0
            self.n["add_failed"] += 1
            self.failures.append(f"ADD: {str(e)[:2000]}")
            return
        self.n["created"] += 1
        self.n["adds_without_agent"] += not self.agent_up
        self.n["adds_state_full"] += self.state_full
        pod.full_at_add = self.state_full
        # nobody could keep its record: the plugin found no space, no agent took it
        pod.recordless = self.state_full and not self.agent_up
        self.live.append(pod)

    def delete(self, pod):
        self.live.remove(pod)
        runs = pod.att.delete()
        bad = [r for r in runs if r.rc != 0]
        if bad:
            self.n["del_failed"] += 1
            self.failures.append(f"DEL {pod.name}: {bad[0].describe()}"[:3000])
        pod.delete_api()
        # what the runtime does after DEL: the sandbox's netns goes
        pod.att.results = []
        with contextlib.suppress(ValueError):
            self.lab.attachments.remove(pod.att)
        pod.att.netns.delete()
        with contextlib.suppress(ValueError):
            self.lab.netnses.remove(pod.att.netns)
        self.node.pods.remove(pod)
        self.n["deleted"] += 1

    def flip(self):
        pod = self.rng.choice(self.live)
        pod.annotate(self.rng.choice(FLIPS))
        self.n["flips"] += 1

    def step(self):
        if len(self.live) < self.pool:
            self.add()
        else:
            r = self.rng.random()
            if r < 0.45:
                self.delete(self.rng.choice(self.live))
                self.add()
            else:
                self.flip()

    def enough(self):
        return self.n["created"] >= self.min_pods and self.n["deleted"] >= self.min_pods - self.pool

    def kill_agent(self):
        self.node.stop_agent(signal.SIGKILL)
        self.n["agent_kills"] += 1
        self.agent_up = False
        for _ in range(2):  # ADDs while it is down
            self.step()
        self.node.start_agent(wait_ready=True)
        self.agent_up = True

    def fill_state_dir(self):
        """Fill the state dir (until ENOSPC); the churn goes on until empty_state_dir()."""
        filler = os.path.join(self.node.state_dir, ".soak-filler")
        cni.sh("dd", "if=/dev/zero", f"of={filler}", "bs=64k", check=False)
        self.state_full = True
        self.full_t0 = time.monotonic()

    def empty_state_dir(self):
        os.unlink(os.path.join(self.node.state_dir, ".soak-filler"))
        self.state_full = False
        self.n["state_full_s"] += round(time.monotonic() - self.full_t0, 1)
        # A pod ADDed while full handed its record to the agent (records.h),
        # which writes it now: checked at the end like any other. One ADDed
        # while full with the agent down has no record and is unknown to the
        # agent (nothing tells it where its netns is): not re-tuned, no CHECK.
        # Its DEL must still succeed; the runtime would recreate it.
        for pod in [p for p in self.live if p.recordless]:
            self.n["deleted_recordless"] += 1
            self.delete(pod)
        self.n["records_by_agent"] += sum(1 for p in self.live if p.full_at_add)

    def uplink_by_hand(self):
        self.node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "7:", "bfifo", "limit", "99999")
        self.n["uplink_by_hand"] += 1

    def device_fault(self):
        """The next of DEVICE_FAULTS on this node (a fault on what is not
        there right now, idle, changes nothing)."""
        name, argvs = DEVICE_FAULTS[self.n["device_faults"] % len(DEVICE_FAULTS)]
        for argv in argvs:
            self.node.sh(*argv, check=False)
        self.n["device_faults"] += 1
        self.n.setdefault("device_fault_kinds", []).append(name)

    def take_baseline(self):
        if self.baseline is None and len(self.live) == self.pool:
            self.baseline = footprint(self.node)

    # -- the end: converged, then nothing left
    def converge(self):
        while len(self.live) < self.pool:
            self.add()
        api = {p["metadata"]["name"]: p["metadata"].get("annotations") or {}
               for p in self.node.api("GET", "/pods")["items"]}
        for p in self.live:
            p.annotations_now = api[p.name]
        node = self.node

        def converged():
            st = node.status(check=False)
            if not st or not st["apiConnected"] or st["uplink"].get("failure"):
                return None
            if st.get("unsavedRecords"):  # the agent still writing a record the plugin could not
                return None
            by_name = {p["name"]: p for p in st["pods"]}
            for p in self.live:
                sp = by_name.get(p.name)
                if not sp or sp["status"] == "failed" or sp["class"] != (
                        p.annotations_now.get("ai.workload") or "default"):
                    return None
            return st if st["mode"] == expected_mode(self.live) else None

        try:
            st = wait_until(converged, 60, f"{self.name}: every pod tuned as wanted", interval_s=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{json.dumps(node.status(check=False), indent=1)[:6000]}\n"
                                 f"{node.tc_summary()}\n{node.agent_log_tail()}") from None
        # the uplink carries the agent's tree again (the hand-made bfifo 7: gone)
        root = node.root()
        if st["mode"] != "idle":
            assert root and root["kind"] == "htb" and root["handle"] == "1:", node.tc_summary()

            # the download side whole again after the device faults (drift repair: every 5 s)
            def download_whole():
                ifb = cni.link(node.node.name, IFB)
                ingress = cni.sh(*cni.in_ns(node.node.name, "tc", "filter", "show", "dev", "up0", "ingress")).stdout
                return (ifb and "UP" in ifb.get("flags", []) and f"Redirect to device {IFB}" in ingress
                        and "aqt-soak-ifb" not in links(node))

            wait_until(download_whole, 15, f"{self.name}: the download ifb and its redirect back")
        checks = 0
        for p in self.live:
            r = p.att.check()
            assert r.rc == 0, (f"{self.name}: CHECK {p.name} ({p.annotations_now}, ADDed with the state dir "
                               f"{'full' if p.full_at_add else 'free'}): {r.describe()}\n{p.state()}")
            checks += 1
        self.n["check_ok"] = checks
        self.after = footprint(node)

    def drain(self):
        """Delete every pod; what is left in the node (the host's ifbs apart)."""
        node = self.node
        for p in list(self.live):
            self.delete(p)
        wait_until(lambda: node.status()["mode"] == "idle", 30, f"{self.name}: mode idle")
        left = {}
        wait_until(lambda: qdisc_lines(node) == self.original_root, 10, f"{self.name}: the original uplink qdisc")
        left["records"] = [f for f in state_files(node) if f.endswith(".json") and f != "uplink.json"
                           or ".tmp." in f or f.startswith(".soak")]
        left["ipam"] = [f for d, _, fs in os.walk(self.lab.ipam_dir) for f in fs if re.match(r"^[0-9a-f.:]+$", f)]
        left["links"] = [x["ifname"] for x in json.loads(links(node)) if x["ifname"] not in ("lo", "up0")]
        left["ifbs"] = ifbs(node.node.name)
        left["filters"] = cni.sh(*cni.in_ns(node.node.name, "tc", "filter", "show", "dev", "up0")).stdout.strip()
        self.leftovers = left
        self.idle = footprint(node)

    def report(self):
        b, a = self.baseline or {}, self.after or {}
        return {"pool": self.pool, **self.n, "rss_kib_before": b.get("rss_kib"), "rss_kib_after": a.get("rss_kib"),
                "fds_before": b.get("fds"), "fds_after": a.get("fds"), "fds_idle": self.idle["fds"],
                "leftovers": self.leftovers, "failures": self.failures[:5]}

    def assert_clean(self, report):
        assert self.n["add_failed"] == 0 and self.n["del_failed"] == 0, (self.name, self.failures[:3])
        assert self.n["created"] >= self.min_pods and self.n["deleted"] >= self.min_pods, (self.name, self.n)
        assert self.baseline is not None, f"{self.name}: no footprint baseline taken"
        assert self.after["rss_kib"] < self.baseline["rss_kib"] * 1.10, (self.name, report)
        assert self.after["fds"] <= self.baseline["fds"] + 2, (self.name, report)
        assert not any(self.leftovers.values()), (self.name, report)


def expected_mode(pods):
    classes = {(p.annotations_now.get("ai.workload") or "default") for p in pods}
    if "inference" in classes and "training" in classes:
        return "mixed"
    return "inference" if "inference" in classes else "training" if "training" in classes else "idle"


def test_soak(node, lab, kube_node):
    root_ifbs = set(ifbs())
    seed = int(os.environ.get("AIQOS_SOAK_SEED", "13"))
    node.start_agent(CONFIG)
    kube_node.start_agent(CONFIG)
    a = Soak("stand-in", node, lab, POOL, MIN_PODS, seed)
    k = Soak("kube", kube_node, kube_node.lab, POOL_KUBE, MIN_PODS_KUBE, seed + 1)
    t_start = time.monotonic()
    end = t_start + DURATION_S

    def at(*fractions):
        return [t_start + DURATION_S * f for f in fractions]

    kill_every = DURATION_S / 8
    kills = {a: [t_start + kill_every * i for i in range(1, 5)],  # the first half of the run
             k: [t_start + kill_every * (i + 0.5) for i in range(1, 5)]}
    api_restarts = at(0.3, 0.45)
    # the real control plane: spread over the run, every other one etcd too
    kube_restarts = at(*[0.15 + 0.75 * i / (KUBE_RESTARTS - 1) for i in range(KUBE_RESTARTS)])
    restart = None
    restart_s = []
    full_at, full_s = t_start + DURATION_S * 0.62, min(60.0, DURATION_S / 9)
    full_state = "before"
    by_hand = at(0.75, 0.85)
    device_faults = at(*[0.5 + 0.45 * i / len(DEVICE_FAULTS) for i in range(len(DEVICE_FAULTS))])
    baseline_at = max(kills[a][-1], kills[k][-1]) + max(DURATION_S * 0.05, 10)

    def kube_busy():
        nonlocal restart
        if restart is None:
            return False
        if restart.busy():
            return True
        restart_s.append(restart.seconds)
        restart = None
        return False

    while (time.monotonic() < end or not a.enough() or not k.enough() or restart is not None
           or full_state == "full"):
        now = time.monotonic()
        kbusy = kube_busy()
        if kills[a] and now >= kills[a][0]:
            kills[a].pop(0)
            a.kill_agent()
        elif kills[k] and now >= kills[k][0] and not kbusy:
            kills[k].pop(0)
            k.kill_agent()
        elif api_restarts and now >= api_restarts[0]:
            api_restarts.pop(0)
            restart_api(node)
            a.n["api_restarts"] += 1
        elif kube_restarts and now >= kube_restarts[0] and not kbusy:
            kube_restarts.pop(0)
            i = k.n["api_restarts"]
            restart = KubeRestart(kube_node, ["apiserver"] if i % 2 == 0 else ["etcd", "apiserver"])
            k.n["api_restarts"] += 1
            k.n["etcd_restarts"] = k.n.get("etcd_restarts", 0) + (i % 2)
        elif full_state == "before" and now >= full_at:
            full_state = "full"
            a.fill_state_dir()
            k.fill_state_dir()
        elif full_state == "full" and now >= full_at + full_s and not kbusy:
            full_state = "after"
            a.empty_state_dir()
            k.empty_state_dir()
        elif by_hand and now >= by_hand[0]:
            by_hand.pop(0)
            a.uplink_by_hand()
            k.uplink_by_hand()
        elif device_faults and now >= device_faults[0] and not kbusy:
            device_faults.pop(0)
            a.device_fault()
            k.device_fault()
        else:
            if now >= baseline_at:
                a.take_baseline()
                if not kbusy:
                    k.take_baseline()
            a.step()
            if not kbusy:  # the kube node's pods wait for its API server
                k.step()
        for s in (a, k):
            assert s.node.agent.poll() is None, f"{s.name}: the agent died:\n{s.node.agent_log_tail()}"
        time.sleep(0.1)
    churn_s = time.monotonic() - t_start

    for s in (a, k):
        s.converge()
    for s in (a, k):
        s.drain()
    host_ifbs = sorted(set(ifbs()) - root_ifbs)

    report = {"duration_s": round(churn_s, 1), "kube_restart_s": restart_s, "host_ifbs_left": host_ifbs,
              "stand-in": a.report(), "kube": k.report()}
    out = os.path.join(agentlab.cni_build(), "soak-report.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print("soak:", json.dumps(report))

    for s in (a, k):
        s.assert_clean(report[s.name])
    assert k.n["api_restarts"] >= 2 and k.n["agent_kills"] == 4, report["kube"]
    for s in (a, k):
        assert s.n["device_faults"] == len(DEVICE_FAULTS), report[s.name]
    assert not host_ifbs, report
