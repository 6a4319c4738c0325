#!/usr/bin/env python3
"""lab.py — the aiqos network lab (P4 of docs/benchmarks.md): a "node" network
namespace whose uplink crosses a "wire" namespace to a "fabric" namespace that
holds the servers. The wire is the bottleneck link in both directions (HTB at
RATE with a deep byte FIFO on each port, what a NIC or switch port queue does
by default: w-fab toward the fabric for egress, w-node toward the node for the
download direction); each arm decides what queues on the node's own uplink
(nothing, or the aiqos agent's trees). Pods are network
namespaces attached through the real CNI chain (reference ptp + host-local,
then `bandwidth` or `aiqos`) executed inside the node namespace, which is the
pods' host. The agent (when built) runs in the node namespace against the
project's fake API server, also in the node namespace.

    pod netns --veth(ptp)-- node netns --uplink/w-node-- wire netns --w-fab/fab-- fabric netns
    10.88.0.0/24            10.89.0.1          [HTB RATE + bfifo each way]          10.89.1.2 (servers)

The fabric runs iperf3 servers, one `loadgen server` per congestion control
(LOADGEN_PORTS) and, when nginx is installed, nginx (HTTP_PORT, the files of
httpload.FILES); the HTTP client is vegeta (hack/build-vegeta.sh). The
token streams' real HTTP/SSE stack (uvicorn + sse-starlette in the inference
pod, httpx + httpx-sse in the fabric: test/bench/sse_tokens.py) runs from the
venv of hack/install-sse.sh.

The pod network has a datapath (DATAPATHS, `Lab(datapath=...)`): `routed`
(the pods' packets cross the uplink as they are) or `vxlan` (a VXLAN overlay
built as Flannel builds it: the pods ptp with MTU 1450, `vx0` VNI 42 on UDP
8472 over the uplink, the servers behind the fabric's `vx1` at an overlay
address, so every pod packet crosses the uplink and the bottleneck
encapsulated) or `cilium` (routed, with a stand-in for Cilium's tcx programs
on the uplink, test/coexist/cilium_standin.c, which deletes every legacy tc
filter there once the agent is up, as Cilium's loader does; its programs'
packet counts go into each cell's counters). A datapath is one class with
setup/after_agent/counters/teardown hooks.

Everything made here carries the prefix aqt-lab-<tag>- and is removed by
Lab.teardown() (also on signals); `lab.py down --tag T` removes what a killed
run left. Used by test/bench/outcome.py (arms, demo, bench) and by the smoke
test test/integration/test_lab_smoke.py.

    lab.py up [--build DIR] [--tag T]    set up, print how to enter, wait for Ctrl-C, tear down
    lab.py down --tag T | --all          remove leftovers of a run (or of every aqt-lab run)
"""

import argparse
import contextlib
import ctypes
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import cni  # noqa: E402  (CNI config building shared with the integration tests)

PREFIX = "aqt-lab-"
RUN_DIR = "/run/aqt-lab"  # pid files of running labs (for `down`)
REF_PLUGIN_DIR = cni.REF_PLUGIN_DIR
POD_SUBNET = "10.88.0.0/24"
NODE_UP_IP, WIRE_NODE_IP = "10.89.0.1", "10.89.0.2"
WIRE_FAB_IP, FABRIC_IP = "10.89.1.1", "10.89.1.2"
UPLINK = "uplink"  # node side of the uplink
WIRE_IN, WIRE_OUT = "w-node", "w-fab"  # the wire's two ends; bottlenecks: WIRE_OUT egress (egress), WIRE_IN (download)
FABRIC_DEV = "fab"
# the side link (the "cpu" arm): a second wire, identical to the first, the
# training pods' traffic is routed over while inference keeps the first: the
# same work for the machine's CPUs with no qdisc shared with inference
SIDE_UPLINK, SIDE_WIRE_IN, SIDE_WIRE_OUT, SIDE_FABRIC_DEV = "uplink2", "w2-node", "w2-fab", "fab2"
SIDE_NODE_UP_IP, SIDE_WIRE_NODE_IP = "10.89.2.1", "10.89.2.2"
SIDE_WIRE_FAB_IP, SIDE_FABRIC_IP = "10.89.3.1", "10.89.3.2"
SIDE_TABLE = 202
IPERF_PORT0 = 5201
IPERF_SERVERS = 6
LOADGEN_PORT = 7000
# the fabric's loadgen servers, one per congestion control of their responses
LOADGEN_PORTS = {"cubic": 7000, "bbr": 7001}
HTTP_PORT = 8080  # nginx (fabric, and the inference pod in the egress direction)
CCS = ("cubic", "bbr")
# The lab's processes run at normal priority, as an inference server and its
# clients do: on one 2-CPU machine a real-time (SCHED_FIFO) process starves
# whatever is not, the kernel's ksoftirqd (the softirq work the kernel defers
# under load, a shaper's timer-driven dequeues among it) and the other side's
# processes. Measured with 8 KiB bursts, aiqos against idle, p99: everything
# at SCHED_FIFO 20, downloads 2.1-10.3 ms against 1.5-2.1 (ksoftirqd behind
# vegeta in the pod); the fabric's processes alone at SCHED_FIFO, uploads
# 65-82 ms against 2.6 (nginx in the pod behind the fabric's vegeta); none,
# 1.2-2.7 ms against 1.3-2.3 both ways. BENCH_RT_PRIO=N: every client and
# server at SCHED_FIFO N (the runs before 2026-12-06).
LOADGEN_RT_PRIO = int(os.environ.get("BENCH_RT_PRIO", 0))
NODE_NAME = "lab-node"
K8S_NAMESPACE = "lab"
BURST_CONTAINERD = cni.BURST_CONTAINERD  # what containerd passes as burst (2^32 - 1 bits)
DEFAULT_RATE_MBIT = 500
DEFAULT_FIFO_BYTES = 1_500_000  # ~1000 MTU packets, in bytes (GSO super-packets fill packet FIFOs)


def fifo_bytes_for(rate_mbit):
    """The bottleneck FIFO sized in time: as long to drain at rate_mbit as
    DEFAULT_FIFO_BYTES at DEFAULT_RATE_MBIT (1.5 MB at 500 Mbit/s = 24 ms,
    30 MB at 10 Gbit/s)."""
    return int(round(DEFAULT_FIFO_BYTES * rate_mbit / DEFAULT_RATE_MBIT))


class LabError(RuntimeError):
    pass


ALLOWED_CC = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def git_commit():
    """The checkout's short commit, with " (with uncommitted changes)" when
    tracked files differ; "" outside a git checkout."""
    rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if rev.returncode != 0:
        return ""
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                           text=True)
    return rev.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def allow_ccs(ccs):
    """A network namespace other than the host's may only make a congestion
    control its default if the host lists it in tcp_allowed_congestion_control
    (FACTS): nginx and vegeta cannot choose one per socket. Adds what is
    missing; returns (before, after) or None when nothing changed."""
    with open(ALLOWED_CC) as f:
        before = f.read().split()
    missing = [c for c in ccs if c not in before]
    if not missing:
        return None
    after = before + missing
    with open(ALLOWED_CC, "w") as f:
        f.write(" ".join(after))
    return before, after


def restore_ccs(change):
    """Undo allow_ccs() unless someone changed the list since."""
    if not change:
        return
    before, after = change
    with contextlib.suppress(OSError):
        with open(ALLOWED_CC) as f:
            if f.read().split() != after:
                return
        with open(ALLOWED_CC, "w") as f:
            f.write(" ".join(before))


def vegeta_path():
    """vegeta built by hack/build-vegeta.sh (or $AIQOS_VEGETA), or None."""
    env = os.environ.get("AIQOS_VEGETA")
    if env:
        return env if os.access(env, os.X_OK) else None
    p = subprocess.run(["bash", os.path.join(REPO, "hack", "build-vegeta.sh"), "--check", "--print-bin-dir"],
                       capture_output=True, text=True)
    path = os.path.join(p.stdout.strip(), "vegeta")
    return path if p.returncode == 0 and os.access(path, os.X_OK) else None


def sse_python():
    """The python of the SSE stack's venv (hack/install-sse.sh), or None."""
    p = subprocess.run(["bash", os.path.join(REPO, "hack", "install-sse.sh"), "--check", "--print-python"],
                       capture_output=True, text=True)
    path = p.stdout.strip()
    return path if p.returncode == 0 and os.access(path, os.X_OK) else None


def sh(*argv, check=True, timeout=30, input=None, env=None):
    p = subprocess.run([str(a) for a in argv], input=input, capture_output=True, text=True, timeout=timeout,
                       env=env)
    if check and p.returncode != 0:
        raise LabError(f"command failed (exit {p.returncode}): {' '.join(map(str, argv))}\n"
                       f"stdout: {p.stdout.strip()}\nstderr: {p.stderr.strip()}")
    return p


def nsexec(ns, *argv):
    return ["ip", "netns", "exec", ns, *[str(a) for a in argv]]


def rt_argv():
    """The prefix that runs a client or server at the lab's priority
    (LOADGEN_RT_PRIO: none by default)."""
    return ["chrt", "-f", str(LOADGEN_RT_PRIO)] if LOADGEN_RT_PRIO else []


# ---------------------------------------------------------------------------
# A socket created inside another network namespace (setns on this thread,
# then back): lets the harness talk to servers bound to a netns's loopback.

_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000
_setns_lock = threading.Lock()


def socket_in_netns(ns, family=socket.AF_INET, type_=socket.SOCK_STREAM):
    with _setns_lock:
        cur = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            tgt = os.open(f"/run/netns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(tgt, _CLONE_NEWNET) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"setns into {ns}: {os.strerror(e)}")
                try:
                    return socket.socket(family, type_)
                finally:
                    if _libc.setns(cur, _CLONE_NEWNET) != 0:  # never go on in the wrong netns
                        os._exit(70)
            finally:
                os.close(tgt)
        finally:
            os.close(cur)


class _NetnsHTTPConnection(http.client.HTTPConnection):
    def __init__(self, ns, host, port, timeout=10):
        super().__init__(host, port, timeout=timeout)
        self._ns = ns

    def connect(self):
        self.sock = socket_in_netns(self._ns)
        self.sock.settimeout(self.timeout)
        self.sock.connect((self.host, self.port))


# ---------------------------------------------------------------------------


class Pod:
    """One pod: a netns attached by a CNI chain run inside the node netns."""

    def __init__(self, lab, name, cls, chain, conflist, runtime_config):
        self.lab = lab
        self.name = name
        self.cls = cls
        self.chain = chain
        self.conflist = conflist
        self.runtime_config = runtime_config
        self.netns = f"{lab.prefix}p-{name}"
        self.container_id = secrets.token_hex(32)
        self.uid = f"uid-{name}-{self.container_id[:12]}"
        self.cni_args = (f"IgnoreUnknown=1;K8S_POD_NAMESPACE={K8S_NAMESPACE};K8S_POD_NAME={name};"
                         f"K8S_POD_INFRA_CONTAINER_ID={self.container_id};K8S_POD_UID={self.uid}")
        self.result = None
        self.ip = None
        self.host_veth = None
        self.add_ms = None
        self.in_api = False

    def exec(self, *argv):
        return nsexec(self.netns, *argv)

    def __repr__(self):
        return f"Pod({self.name}, {self.cls}, {self.chain}, {self.ip})"


class FakeApi:
    """test/apiserver/fakeapi.py run in the node netns (TLS API on its loopback,
    control port driven through socket_in_netns) and a kubeconfig for it."""

    def __init__(self, lab):
        self.lab = lab
        self.dir = os.path.join(lab.tmp, "api")
        self.proc = None
        self.port = self.control_port = None
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.token = secrets.token_hex(16)

    def start(self):
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        pki = os.path.join(self.dir, "pki")
        sh("bash", os.path.join(REPO, "test", "apiserver", "gencerts.sh"), pki, timeout=120)
        ready = os.path.join(self.dir, "ready.json")
        self.proc = self.lab.spawn("fakeapi", nsexec(
            self.lab.node, sys.executable, os.path.join(REPO, "test", "apiserver", "fakeapi.py"), "--certs", pki,
            "--token-file", os.path.join(self.dir, "token"), "--token", self.token, "--ready-file", ready,
            "--host", "127.0.0.1", "--quiet"))
        deadline = time.monotonic() + 20
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                raise LabError(f"fakeapi exited ({self.proc.returncode}): {self.lab.log_tail('fakeapi')}")
            if time.monotonic() > deadline:
                raise LabError("fakeapi did not become ready in 20 s")
            time.sleep(0.05)
        with open(ready) as f:
            info = json.load(f)
        self.port, self.control_port = info["port"], info["control_port"]
        with open(self.kubeconfig, "w") as f:
            f.write(
                "apiVersion: v1\nkind: Config\n"
                f"clusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:{self.port}\n"
                f"    certificate-authority: {pki}/ca.crt\n"
                f"users:\n- name: lab\n  user:\n    token: {self.token}\n"
                "contexts:\n- name: lab\n  context:\n    cluster: lab\n    user: lab\n"
                "current-context: lab\n")
        return self

    def call(self, method, path, body=None):
        conn = _NetnsHTTPConnection(self.lab.node, "127.0.0.1", self.control_port)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            text = r.read().decode(errors="replace")
            if r.status >= 300:
                raise LabError(f"fakeapi {method} {path}: HTTP {r.status}: {text[:500]}")
            return json.loads(text) if text.strip() else None
        finally:
            conn.close()

    def create_pod(self, pod, annotations):
        self.call("POST", "/pods", {"namespace": K8S_NAMESPACE, "name": pod.name, "uid": pod.uid, "node": NODE_NAME,
                                    "annotations": annotations, "phase": "Pending"})
        pod.in_api = True

    def set_pod_ip(self, pod):
        self.call("PATCH", f"/pods/{K8S_NAMESPACE}/{pod.name}",
                  {"podIP": pod.ip, "podIPs": [pod.ip], "phase": "Running"})

    def delete_pod(self, pod):
        if pod.in_api:
            self.call("DELETE", f"/pods/{K8S_NAMESPACE}/{pod.name}")
            pod.in_api = False


class Agent:
    """build/bin/aiqos-agent in the node netns, with the flags of agent/main.c
    (--node-name, --kubeconfig, --config, --state-dir, --socket,
    --metrics-addr, --log-level) and `aiqosctl --socket S status --json`."""

    def __init__(self, lab, api):
        self.lab = lab
        self.api = api
        self.binary = os.path.join(lab.bin_dir, "aiqos-agent")
        self.ctl = os.path.join(lab.bin_dir, "aiqosctl")
        self.config_path = os.path.join(lab.tmp, "agent-config.json")
        self.proc = None
        self.started_at = None

    @staticmethod
    def available(build):
        return all(os.access(os.path.join(build, "bin", b), os.X_OK) for b in ("aiqos-agent", "aiqosctl"))

    def argv(self, *extra):
        return nsexec(self.lab.node, self.binary, "--node-name", NODE_NAME, "--kubeconfig", self.api.kubeconfig,
                      "--config", self.config_path, "--state-dir", self.lab.state_dir, "--socket",
                      self.lab.agent_socket, "--log-level", "info", *extra)

    def start(self, config, ready_timeout_s=20):
        with open(self.config_path, "w") as f:
            json.dump(config, f, indent=1)
        self.proc = self.lab.spawn("agent", self.argv("--metrics-addr", "127.0.0.1:0"))
        self.started_at = time.time()
        deadline = time.monotonic() + ready_timeout_s
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LabError(f"aiqos-agent exited ({self.proc.returncode}):\n{self.lab.log_tail('agent')}")
            st, last = self.status_or_error()
            if st is not None:
                if st.get("ready", True):
                    return st
                last = f"status says ready={st.get('ready')!r}, apiConnected={st.get('apiConnected')!r}"
            time.sleep(0.1)
        raise LabError(f"aiqos-agent not ready in {ready_timeout_s} s: {last}\n{self.lab.log_tail('agent')}")

    def status_or_error(self):
        p = sh(self.ctl, "--socket", self.lab.agent_socket, "status", "--json", check=False, timeout=10)
        if p.returncode != 0:
            return None, (p.stderr or p.stdout).strip()
        try:
            return json.loads(p.stdout), ""
        except ValueError as e:
            return None, f"aiqosctl status --json: not JSON ({e}): {p.stdout[:200]}"

    def status(self):
        st, why = self.status_or_error()
        if st is None:
            raise LabError(f"aiqosctl status failed: {why}")
        return st

    def mode(self):
        st, _ = self.status_or_error()
        return st.get("mode") if st else None

    def wait_mode(self, mode, timeout_s=15):
        """Poll until the agent reports `mode`; returns seconds waited."""
        t0 = time.monotonic()
        seen = None
        while time.monotonic() - t0 < timeout_s:
            seen = self.mode()
            if seen == mode:
                return time.monotonic() - t0
            if self.proc.poll() is not None:
                raise LabError(f"aiqos-agent exited ({self.proc.returncode}):\n{self.lab.log_tail('agent')}")
            time.sleep(0.05)
        raise LabError(f"agent mode is {seen!r}, not {mode!r}, after {timeout_s} s\n{self.lab.log_tail('agent')}")

    def stop(self):
        """SIGTERM, then `aiqos-agent --cleanup` (restores the uplink's original qdisc)."""
        if self.proc is None:
            return
        self.lab.stop_proc(self.proc)
        self.proc = None
        p = sh(*self.argv("--cleanup"), check=False, timeout=30)
        if p.returncode != 0:
            self.lab.note(f"aiqos-agent --cleanup exited {p.returncode}: {(p.stderr or p.stdout).strip()[:300]}")


class Routed:
    """The pods' packets cross the uplink as they are (kindnet, Calico BGP)."""
    name = "routed"
    text = "routed: the pods' packets cross the uplink unencapsulated (ptp, MTU 1500)"
    pod_mtu = 1500
    server_ip = FABRIC_IP  # where the fabric's servers listen (the pods' peer)

    def setup(self, lab):
        """After the lab's links and routes, before its servers start."""

    def after_agent(self, lab):
        """Once the aiqos agent reports its mode (the aiqos arms only)."""

    def counters(self, lab):
        """Packet counters of the datapath's own parts, read around each cell."""
        return {}

    def teardown(self, lab):
        """Before the lab's namespaces go."""


VXLAN_NODE_MAC, VXLAN_FAB_MAC = "0e:00:00:00:00:01", "0e:00:00:00:01:01"
VXLAN_SERVER_IP = "10.98.1.2"


class Vxlan(Routed):
    """Flannel's VXLAN backend: each node a /24 of the overlay (10.98.0.0 and
    10.98.1.0 on the VXLAN devices), routes to the other node's pod CIDR via
    its VXLAN address onlink, a permanent neighbour and an fdb entry toward
    its underlay address; the pods ptp with MTU 1450."""
    name = "vxlan"
    text = ("vxlan: a VXLAN overlay as Flannel builds it (pods ptp MTU 1450, `vx0` VNI 42 on UDP 8472 over the "
            "uplink; the servers behind the fabric's `vx1`): every pod packet crosses the uplink and the "
            "bottleneck encapsulated, the node's address outside")
    pod_mtu = 1450
    server_ip = VXLAN_SERVER_IP

    def setup(self, lab):
        for ns, dev, under, local, remote, mac, peer_mac, addr, peer_addr in (
                (lab.node, "vx0", UPLINK, NODE_UP_IP, FABRIC_IP, VXLAN_NODE_MAC, VXLAN_FAB_MAC, "10.98.0.0",
                 "10.98.1.0"),
                (lab.fabric, "vx1", FABRIC_DEV, FABRIC_IP, NODE_UP_IP, VXLAN_FAB_MAC, VXLAN_NODE_MAC, "10.98.1.0",
                 "10.98.0.0")):
            sh("ip", "-n", ns, "link", "add", dev, "address", mac, "type", "vxlan", "id", "42", "dev", under,
               "dstport", "8472", "local", local, "nolearning")
            sh("ip", "-n", ns, "link", "set", dev, "mtu", "1450", "up")
            sh("ip", "-n", ns, "addr", "add", f"{addr}/32", "dev", dev)
            sh("ip", "-n", ns, "neigh", "add", peer_addr, "lladdr", peer_mac, "dev", dev, "nud", "permanent")
            sh(*nsexec(ns, "bridge", "fdb", "append", peer_mac, "dev", dev, "dst", remote))
        sh("ip", "-n", lab.node, "route", "add", "10.98.1.0/24", "via", "10.98.1.0", "dev", "vx0", "onlink")
        sh("ip", "-n", lab.fabric, "addr", "add", f"{VXLAN_SERVER_IP}/32", "dev", "lo")
        sh("ip", "-n", lab.fabric, "route", "add", POD_SUBNET, "via", "10.98.0.0", "dev", "vx1", "onlink", "src",
           VXLAN_SERVER_IP)


class Cilium(Routed):
    """The routed node next to an eBPF CNI with tcx (Cilium's default on
    kernels >= 6.6): a stand-in for Cilium's programs on the uplink
    (test/coexist/cilium_standin.c: tcx programs at the tail of both hooks
    returning TC_ACT_OK, counting what they see) and, once aiqos's agent is
    up, Cilium's loader's one-shot deletion of every legacy tc filter on the
    device (removeTCFilters). Needs a kernel with tcx."""
    name = "cilium"
    text = ("cilium: the routed node with a stand-in for Cilium's tcx programs on the uplink (both hooks, at "
            "the tail, TC_ACT_OK, counting) and, after the agent started, Cilium's deletion of every legacy tc "
            "filter on the uplink")

    def setup(self, lab):
        import standin  # noqa: PLC0415  (test/integration, on the path as cni is)
        self.standin = standin.Standin(lab.node, UPLINK)

    def after_agent(self, lab):
        lab.note(f"cilium stand-in: deleted {self.standin.flush_legacy()} legacy tc filters on {UPLINK}")

    def counters(self, lab):
        c = self.standin.counts()
        return {"standin_ingress_packets": c["ingress"], "standin_egress_packets": c["egress"]}

    def teardown(self, lab):
        if getattr(self, "standin", None) is not None:
            self.standin.close()
            self.standin = None


DATAPATHS = {d.name: d for d in (Routed, Vxlan, Cilium)}


class Lab:
    def __init__(self, build, tag=None, rate_mbit=DEFAULT_RATE_MBIT, fifo_bytes=DEFAULT_FIFO_BYTES, verbose=False,
                 keep_tmp=False, datapath="routed"):
        self.build = os.path.abspath(build)
        # setup() copies the binaries into the lab (bin_dir) and uses the
        # copies: a rebuild of BUILD during a run cannot change them midway
        self.plugin = os.path.join(self.build, "bin", "aiqos")
        self.loadgen = os.path.join(self.build, "bench", "loadgen")
        self.bin_dir = None
        self.tag = tag or os.environ.get("AQT_LAB_TAG") or secrets.token_hex(2)
        if not self.tag.isalnum() or len(self.tag) > 8:
            raise LabError(f"lab tag {self.tag!r}: want 1-8 alphanumeric characters")
        self.prefix = f"{PREFIX}{self.tag}-"
        self.node, self.wire, self.fabric = (f"{self.prefix}{n}" for n in ("node", "wire", "fabric"))
        self.wire2 = f"{self.prefix}wire2"  # the side link's wire
        self.rate_mbit = rate_mbit
        self.fifo_bytes = fifo_bytes
        if datapath not in DATAPATHS:
            raise LabError(f"datapath {datapath!r}: want one of {', '.join(DATAPATHS)}")
        self.dp = DATAPATHS[datapath]()
        self.server_ip = self.dp.server_ip
        self.verbose = verbose
        self.keep_tmp = keep_tmp
        self.tmp = None
        self.procs = {}  # name -> Popen
        self.pods = []
        self.api = None
        self.agent = None
        self.notes = []
        self._up = False
        self._pidfile = os.path.join(RUN_DIR, f"{self.tag}.pids")
        self._lock = threading.Lock()
        self._bottleneck_leaf = None
        self._cc_change = None
        self.vegeta = None  # set by setup() when vegeta is built
        self.sse_python = None  # set by setup() when the SSE stack is installed (hack/install-sse.sh)
        self.nginx = shutil.which("nginx") or (os.path.exists("/usr/sbin/nginx") and "/usr/sbin/nginx") or None

    # -- bookkeeping
    def note(self, text):
        self.notes.append(text)
        if self.verbose:
            print(f"lab: {text}", file=sys.stderr, flush=True)

    def spawn(self, name, argv, stdout=None):
        """Start a background process (own session) logging to tmp/<name>.log."""
        log = open(os.path.join(self.tmp, f"{name}.log"), "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout or log, stderr=log,
                                 start_new_session=True)
        finally:
            log.close()
        with self._lock:
            key = name
            n = 1
            while key in self.procs:
                n += 1
                key = f"{name}.{n}"
            self.procs[key] = p
            self._write_pids()
        return p

    def _write_pids(self):
        os.makedirs(RUN_DIR, mode=0o700, exist_ok=True)
        with open(self._pidfile, "w") as f:
            for p in self.procs.values():
                if p.poll() is None:
                    f.write(f"{p.pid}\n")

    def stop_proc(self, p, timeout_s=5):
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
        with self._lock:
            for k, v in list(self.procs.items()):
                if v is p:
                    del self.procs[k]
            self._write_pids()

    def log_tail(self, name, n=3000):
        path = os.path.join(self.tmp, f"{name}.log")
        if not os.path.exists(path):
            return f"(no {name}.log)"
        with open(path, errors="replace") as f:
            return f.read()[-n:]

    @property
    def state_dir(self):
        return os.path.join(self.tmp, "state")

    @property
    def agent_socket(self):
        return os.path.join(self.tmp, "run", "agent.sock")

    # -- setup / teardown
    def check_prereqs(self):
        if os.geteuid() != 0:
            raise LabError("the lab needs root (network namespaces, qdiscs)")
        missing = [p for p in (self.plugin, self.loadgen) if not os.access(p, os.X_OK)]
        missing += [f"{REF_PLUGIN_DIR}/{p}" for p in ("ptp", "host-local", "bandwidth")
                    if not os.access(os.path.join(REF_PLUGIN_DIR, p), os.X_OK)]
        missing += [t for t in ("ip", "tc", "iperf3") if shutil.which(t) is None]
        if missing:
            raise LabError(f"missing: {', '.join(missing)} (run `make` and `make deps`)")

    def setup(self):
        self.check_prereqs()
        self.tmp = tempfile.mkdtemp(prefix=f"{self.prefix}")
        os.chmod(self.tmp, 0o700)
        os.makedirs(os.path.join(self.tmp, "run"), mode=0o700)
        self.bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(self.bin_dir)
        for src in (self.plugin, self.loadgen, os.path.join(self.build, "bin", "aiqos-agent"),
                    os.path.join(self.build, "bin", "aiqosctl")):
            if os.path.exists(src):
                shutil.copy2(src, self.bin_dir)
        self.plugin = os.path.join(self.bin_dir, "aiqos")
        self.loadgen = os.path.join(self.bin_dir, "loadgen")
        self._up = True
        self._write_pids()
        for ns in (self.node, self.wire, self.fabric):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", UPLINK, "netns", self.node, "type", "veth", "peer", "name", WIRE_IN, "netns",
           self.wire)
        sh("ip", "link", "add", WIRE_OUT, "netns", self.wire, "type", "veth", "peer", "name", FABRIC_DEV, "netns",
           self.fabric)
        for ns, dev, addr in ((self.node, UPLINK, NODE_UP_IP), (self.wire, WIRE_IN, WIRE_NODE_IP),
                              (self.wire, WIRE_OUT, WIRE_FAB_IP), (self.fabric, FABRIC_DEV, FABRIC_IP)):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", self.node, "route", "add", "default", "via", WIRE_NODE_IP)
        sh("ip", "-n", self.wire, "route", "add", POD_SUBNET, "via", NODE_UP_IP)
        sh("ip", "-n", self.fabric, "route", "add", "default", "via", WIRE_FAB_IP)
        self._setup_side_link()
        if os.environ.get("BENCH_WIRE_RPS") == "1":
            self._wire_rps()
        for ns in (self.node, self.wire, self.wire2):
            sh(*nsexec(ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"))
        self.dp.setup(self)
        self.set_bottleneck("bfifo")
        self._cc_change = allow_ccs(CCS)
        if self._cc_change:
            self.note(f"host tcp_allowed_congestion_control: {' '.join(self._cc_change[1])} (restored at teardown)")
        for i in range(IPERF_SERVERS):
            self.spawn(f"iperf3-s{i}", nsexec(self.fabric, "iperf3", "-s", "-B", self.server_ip, "-p",
                                              IPERF_PORT0 + i))
        for cc, port in LOADGEN_PORTS.items():
            lg = self.spawn(f"loadgen-server-{cc}", nsexec(self.fabric, *rt_argv(), self.loadgen,
                                                           "server", "--listen", f"{self.server_ip}:{port}", "--cc", cc))
            self._wait_port(self.fabric, self.server_ip, port, lg)
        self.vegeta = vegeta_path()
        self.sse_python = sse_python()
        if self.nginx:
            import httpload  # noqa: PLC0415 (test/bench/httpload.py; imports this module)
            httpload.start_nginx(self, self.fabric, "fabric", self.server_ip)
        for i in range(IPERF_SERVERS):
            self._wait_port(self.fabric, self.server_ip, IPERF_PORT0 + i, self.procs[f"iperf3-s{i}"])
        self.note(f"lab {self.tag} ({self.dp.name}) up in {self.tmp}")
        return self

    def _wire_rps(self):
        """BENCH_WIRE_RPS=1 (an exploration, not in `make bench`): RPS on the
        ends that receive the node's upload (the wires' and the fabric's), so
        each flow's packets are processed on one CPU. Without it a veth hands
        a packet to the input queue of the CPU that sent it, and behind a
        backlogged shaper that is whichever CPU dequeued: a flow's packets
        spread over both CPUs' queues and can arrive out of order, which a
        link never does (results.json: the inference pod's inf_dsack_recv,
        its retransmissions the receiver had already; `bench.py reps`). It
        costs the 2 CPUs 10-20 points of softirq time."""
        mask = format((1 << (os.cpu_count() or 1)) - 1, "x")
        for ns, dev in ((self.wire, WIRE_IN), (self.fabric, FABRIC_DEV), (self.wire2, SIDE_WIRE_IN),
                        (self.fabric, SIDE_FABRIC_DEV)):
            sh(*nsexec(ns, "sh", "-c", f"echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus"))

    def _setup_side_link(self):
        """The side link: node SIDE_UPLINK -- wire2 -- fabric SIDE_FABRIC_DEV,
        its bottleneck set like the wire's (set_bottleneck); used only by
        route_side(). Loose reverse-path checks: a training pod's packets come
        back on the side link while its server's address routes by the wire."""
        sh("ip", "netns", "add", self.wire2)
        sh("ip", "-n", self.wire2, "link", "set", "lo", "up")
        sh("ip", "link", "add", SIDE_UPLINK, "netns", self.node, "type", "veth", "peer", "name", SIDE_WIRE_IN,
           "netns", self.wire2)
        sh("ip", "link", "add", SIDE_WIRE_OUT, "netns", self.wire2, "type", "veth", "peer", "name", SIDE_FABRIC_DEV,
           "netns", self.fabric)
        for ns, dev, addr in ((self.node, SIDE_UPLINK, SIDE_NODE_UP_IP), (self.wire2, SIDE_WIRE_IN, SIDE_WIRE_NODE_IP),
                              (self.wire2, SIDE_WIRE_OUT, SIDE_WIRE_FAB_IP),
                              (self.fabric, SIDE_FABRIC_DEV, SIDE_FABRIC_IP)):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", self.wire2, "route", "add", POD_SUBNET, "via", SIDE_NODE_UP_IP)
        sh("ip", "-n", self.wire2, "route", "add", "default", "via", SIDE_FABRIC_IP)
        sh("ip", "-n", self.node, "route", "add", "default", "via", SIDE_WIRE_NODE_IP, "table", SIDE_TABLE)
        for ns in (self.node, self.fabric):
            for dev in ("all", "default", SIDE_UPLINK if ns == self.node else SIDE_FABRIC_DEV):
                sh(*nsexec(ns, "sysctl", "-q", "-w", f"net.ipv4.conf.{dev}.rp_filter=0"))

    def route_side(self, pods, on=True):
        """Route pods' traffic over the side link (on) or back over the wire:
        a source rule in the node, a host route in the fabric."""
        for p in pods:
            verb = "add" if on else "del"
            sh("ip", "-n", self.node, "rule", verb, "from", f"{p.ip}/32", "table", SIDE_TABLE, "pref", 100,
               check=on)
            sh("ip", "-n", self.fabric, "route", verb, f"{p.ip}/32", "via", SIDE_WIRE_FAB_IP, check=on)

    def _wait_port(self, ns, host, port, proc, timeout_s=10):
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise LabError(f"server for port {port} exited ({proc.returncode})")
            s = socket_in_netns(ns)
            try:
                s.settimeout(0.5)
                s.connect((host, port))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise LabError(f"nothing listens on {host}:{port} in {ns} after {timeout_s} s") from None
                time.sleep(0.05)
            finally:
                s.close()

    def set_bottleneck(self, leaf="bfifo"):
        """Both ports of the wire (toward the fabric: the egress bottleneck;
        toward the node: the download one): HTB at RATE (r2q/quantum set,
        burst 2 ms at the rate) whose leaf is a deep byte FIFO, or fq_codel
        (the "just use a good AQM" arm, full kernels only)."""
        rate = f"{self.rate_mbit}mbit"
        burst = max(128 * 1024, self.rate_mbit * 1_000_000 // 8 * 2 // 1000)
        quantum = min(200000, max(1514, self.rate_mbit * 1_000_000 // 8 // 1000))
        if leaf == "bfifo":
            args = ["bfifo", "limit", self.fifo_bytes]
        elif leaf == "fq_codel":
            args = ["fq_codel"]
        else:
            raise LabError(f"unknown bottleneck leaf {leaf!r}")
        for ns, dev in ((self.wire, WIRE_OUT), (self.wire, WIRE_IN), (self.wire2, SIDE_WIRE_OUT),
                        (self.wire2, SIDE_WIRE_IN)):
            if self._bottleneck_leaf is None:
                sh("tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default",
                   "1", "r2q", "10")
                sh("tc", "-n", ns, "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                   "rate", rate, "ceil", rate, "burst", burst, "cburst", burst, "quantum", quantum)
            sh("tc", "-n", ns, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", *args)
        self._bottleneck_leaf = leaf

    @staticmethod
    def bottleneck_dev(direction):
        """The wire port whose queue is the bottleneck of a direction."""
        return WIRE_IN if direction == "download" else WIRE_OUT

    def node_ifbs(self):
        """ifb devices in the node netns (the aiqos download tree's, the bandwidth plugin's)."""
        p = sh("ip", "-n", self.node, "-j", "-d", "link", "show", check=False)
        try:
            links = json.loads(p.stdout or "[]")
        except ValueError:
            return []
        return sorted(x["ifname"] for x in links if (x.get("linkinfo") or {}).get("info_kind") == "ifb")

    def set_default_cc(self, ns, cc):
        """The congestion control new sockets of a netns get (nginx, vegeta).
        Another run may have restored the host's allowed list meanwhile: add
        it again then."""
        p = sh(*nsexec(ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"), check=False)
        if p.returncode != 0:
            change = allow_ccs([cc])
            if change and not self._cc_change:
                self._cc_change = change
            sh(*nsexec(ns, "sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"))

    def reset_uplink(self):
        """Back to the kernel default on the node's uplink (veth: noqueue)."""
        sh("tc", "-n", self.node, "qdisc", "del", "dev", UPLINK, "root", check=False)

    def teardown(self):
        """Remove everything; never raises. Returns problems seen."""
        problems = []
        if not self._up:
            return problems
        if self.agent is not None:
            try:
                self.agent.stop()
            except Exception as e:  # noqa: BLE001 - cleanup goes on
                problems.append(f"agent stop: {e}")
        try:
            self.dp.teardown(self)
        except Exception as e:  # noqa: BLE001 - cleanup goes on
            problems.append(f"datapath {self.dp.name} teardown: {e}")
        for pod in list(reversed(self.pods)):
            try:
                self.del_pod(pod)
            except Exception as e:  # noqa: BLE001
                problems.append(f"DEL {pod.name}: {e}")
        for p in list(self.procs.values()):
            with contextlib.suppress(Exception):
                self.stop_proc(p)
        for ns in self.all_netns():
            sh("ip", "netns", "del", ns, check=False)
        left = self.all_netns()
        if left:
            problems.append(f"netns left behind: {left}")
        with contextlib.suppress(OSError):
            os.unlink(self._pidfile)
        restore_ccs(self._cc_change)
        self._cc_change = None
        if self.tmp and not self.keep_tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
        self._up = False
        return problems

    def all_netns(self):
        if not os.path.isdir("/run/netns"):
            return []
        return sorted(n for n in os.listdir("/run/netns") if n.startswith(self.prefix))

    def __enter__(self):
        return self.setup()

    def __exit__(self, *exc):
        problems = self.teardown()
        for p in problems:
            print(f"lab teardown: {p}", file=sys.stderr)
        return False

    # -- CNI
    def ptp_conf(self):
        return {"type": "ptp", "ipMasq": False, "mtu": self.dp.pod_mtu,
                "ipam": {"type": "host-local", "dataDir": os.path.join(self.tmp, "ipam"),
                         "ranges": [[{"subnet": POD_SUBNET}]], "routes": [{"dst": "0.0.0.0/0"}]}}

    def conflist(self, chain):
        plugins = [self.ptp_conf()]
        if chain == "bandwidth":
            plugins.append({"type": "bandwidth", "capabilities": {"bandwidth": True}})
        elif chain == "aiqos":
            plugins.append({"type": "aiqos",
                            "capabilities": {"io.kubernetes.cri.pod-annotations": True, "bandwidth": True},
                            "agentSocket": self.agent_socket, "stateDir": self.state_dir,
                            "logFile": os.path.join(self.tmp, "aiqos-plugin.log"), "logLevel": "info",
                            "failurePolicy": "open"})
        elif chain != "plain":
            raise LabError(f"unknown chain {chain!r} (plain, bandwidth, aiqos)")
        return {"cniVersion": "1.0.0", "name": "aqt-lab", "plugins": plugins}

    def _exec_plugin(self, pod, plugin, command, conf):
        binary = self.plugin if plugin["type"] == "aiqos" else os.path.join(REF_PLUGIN_DIR, plugin["type"])
        env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
        env.update({"CNI_COMMAND": command, "CNI_CONTAINERID": pod.container_id,
                    "CNI_NETNS": f"/run/netns/{pod.netns}", "CNI_IFNAME": "eth0", "CNI_ARGS": pod.cni_args,
                    "CNI_PATH": f"{os.path.dirname(self.plugin)}:{REF_PLUGIN_DIR}"})
        p = subprocess.run(nsexec(self.node, binary), input=json.dumps(conf), capture_output=True, text=True,
                           env=env, timeout=60)
        return p

    def add_pod(self, name, cls=None, chain="plain", bandwidth=None):
        """Create a pod netns and run the chain's ADD in the node netns (like a
        runtime: annotations in runtimeConfig; for the aiqos chain with an API
        server, the pod object exists before ADD and gets its IP after)."""
        annotations = {"ai.workload": cls} if cls else {}
        rc = {"io.kubernetes.cri.pod-annotations": annotations}
        if bandwidth:
            rc["bandwidth"] = bandwidth
        pod = Pod(self, name, cls, chain, self.conflist(chain), rc)
        sh("ip", "netns", "add", pod.netns)
        self.pods.append(pod)
        sh("ip", "-n", pod.netns, "link", "set", "lo", "up")
        if self.api is not None and chain == "aiqos":
            self.api.create_pod(pod, annotations)
        t0 = time.perf_counter()
        prev = None
        for plugin in pod.conflist["plugins"]:
            conf = cni.build_plugin_config(plugin, pod.conflist["name"], pod.conflist["cniVersion"], prev, rc)
            p = self._exec_plugin(pod, plugin, "ADD", conf)
            if p.returncode != 0:
                raise LabError(f"CNI ADD of {name}: {plugin['type']} exit {p.returncode}: {p.stdout.strip()} "
                               f"{p.stderr.strip()[:1000]}")
            prev = json.loads(p.stdout)
        pod.add_ms = (time.perf_counter() - t0) * 1e3
        pod.result = prev
        pod.ip = prev["ips"][0]["address"].split("/")[0]
        for itf in prev.get("interfaces", []):
            if not itf.get("sandbox") and itf.get("name"):
                pod.host_veth = itf["name"]
                break
        if pod.in_api:
            self.api.set_pod_ip(pod)
        self.note(f"pod {name} ({cls or 'default'}, {chain}) {pod.ip} in {pod.add_ms:.0f} ms")
        return pod

    def del_pod(self, pod):
        """DEL in reverse order with the cached result (libcni), remove the API
        object and the netns. Raises on a failed DEL after removing the netns."""
        errors = []
        if pod.result is not None:
            for plugin in reversed(pod.conflist["plugins"]):
                conf = cni.build_plugin_config(plugin, pod.conflist["name"], pod.conflist["cniVersion"], pod.result,
                                               pod.runtime_config)
                p = self._exec_plugin(pod, plugin, "DEL", conf)
                if p.returncode != 0:
                    errors.append(f"{plugin['type']} DEL exit {p.returncode}: {p.stdout.strip()} {p.stderr.strip()}")
            pod.result = None
        if pod.in_api and self.api is not None:
            try:
                self.api.delete_pod(pod)
            except (LabError, OSError) as e:
                errors.append(f"API delete: {e}")
        sh("ip", "netns", "del", pod.netns, check=False)
        if pod in self.pods:
            self.pods.remove(pod)
        if errors:
            raise LabError(f"pod {pod.name}: " + "; ".join(errors))

    def use_build(self, build=None):
        """The plugin and agent of the next pods and agent start: this lab's
        build (None) or another build directory's (an A/B arm), copied into the
        lab as setup() copies its own. When the build changes, the state dir
        is emptied (no pods exist between instances, and two builds' records
        need not be compatible)."""
        key = os.path.abspath(build) if build else None
        if key == getattr(self, "_build_in_use", None):
            return
        if key is None:
            d = self.bin_dir
        else:
            d = os.path.join(self.tmp, "bin-" + os.path.basename(key.rstrip("/")))
            if not os.path.isdir(d):
                os.makedirs(d)
                for b in ("aiqos", "aiqos-agent", "aiqosctl"):
                    shutil.copy2(os.path.join(key, "bin", b), d)
        if self.agent is not None:
            self.agent.stop()
        for name in os.listdir(self.state_dir) if os.path.isdir(self.state_dir) else ():
            path = os.path.join(self.state_dir, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
        self.plugin = os.path.join(d, "aiqos")
        if self.agent is None:
            self.agent = Agent(self, self.start_api())
        self.agent.binary, self.agent.ctl = os.path.join(d, "aiqos-agent"), os.path.join(d, "aiqosctl")
        self._build_in_use = key

    # -- agent and API server
    def start_api(self):
        if self.api is None:
            self.api = FakeApi(self).start()
        return self.api

    def start_agent(self, config):
        self.start_api()
        if self.agent is None:
            self.agent = Agent(self, self.api)
        self.agent.start(config)
        return self.agent

    def stop_agent(self):
        if self.agent is not None:
            self.agent.stop()
        self.reset_uplink()

    # -- kernel readers
    def qdisc_stats(self, ns, dev):
        p = sh("tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev, check=False)
        try:
            return json.loads(p.stdout or "[]")
        except ValueError:
            return []

    def tc_text(self, ns, dev):
        out = []
        for what in ("qdisc", "class"):
            p = sh("tc", "-n", ns, "-s", what, "show", "dev", dev, check=False)
            out.append(f"$ tc -s {what} show dev {dev}  # {ns}\n{p.stdout}{p.stderr}")
        return "".join(out)

    def netstat(self, ns):
        """TCP counters of a netns: /proc/net/snmp Tcp + /proc/net/netstat TcpExt."""
        p = sh(*nsexec(ns, "cat", "/proc/net/snmp", "/proc/net/netstat"), check=False)
        out = {}
        lines = p.stdout.splitlines()
        for a, b in zip(lines[::2], lines[1::2]):
            ka, kb = a.split(), b.split()
            if ka and kb and ka[0] == kb[0]:
                for k, v in zip(ka[1:], kb[1:]):
                    with contextlib.suppress(ValueError):
                        out[f"{ka[0].rstrip(':')}.{k}"] = int(v)
        return out

    def has_qdisc(self, kind):
        """Whether this kernel can create a qdisc kind (tried on the fabric's lo-like dummy)."""
        ns = self.fabric
        p = sh("tc", "-n", ns, "qdisc", "add", "dev", "lo", "root", "handle", "1:", kind, check=False)
        if p.returncode == 0:
            sh("tc", "-n", ns, "qdisc", "del", "dev", "lo", "root", check=False)
            return True, ""
        return False, (p.stderr or p.stdout).strip()


def down(tag=None):
    """Kill the recorded processes and remove the netns of one run (or all)."""
    removed = []
    pidfiles = []
    if os.path.isdir(RUN_DIR):
        pidfiles = [f for f in os.listdir(RUN_DIR) if f.endswith(".pids") and (tag is None or f == f"{tag}.pids")]
    for f in pidfiles:
        path = os.path.join(RUN_DIR, f)
        with open(path) as fh:
            for line in fh:
                with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                    os.killpg(int(line), signal.SIGKILL)
        os.unlink(path)
    prefix = f"{PREFIX}{tag}-" if tag else PREFIX
    if os.path.isdir("/run/netns"):
        for n in sorted(os.listdir("/run/netns")):
            if n.startswith(prefix):
                sh("ip", "netns", "del", n, check=False)
                removed.append(n)
    for d in os.listdir(tempfile.gettempdir()):
        if d.startswith(prefix):
            shutil.rmtree(os.path.join(tempfile.gettempdir(), d), ignore_errors=True)
    return removed


def install_signal_teardown():
    """SIGTERM/SIGHUP -> SystemExit, so `finally` blocks tear the lab down."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="set up a lab and keep it until Ctrl-C")
    up.add_argument("--build", default=os.path.join(REPO, "build"))
    up.add_argument("--tag")
    up.add_argument("--rate-mbit", type=int, default=DEFAULT_RATE_MBIT)
    up.add_argument("--datapath", choices=list(DATAPATHS), default="routed")
    dn = sub.add_parser("down", help="remove what a killed run left")
    g = dn.add_mutually_exclusive_group(required=True)
    g.add_argument("--tag")
    g.add_argument("--all", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "down":
        removed = down(None if a.all else a.tag)
        print(f"removed {len(removed)} netns" + (f": {' '.join(removed)}" if removed else ""))
        return 0
    install_signal_teardown()
    lab = Lab(a.build, tag=a.tag, rate_mbit=a.rate_mbit, verbose=True, datapath=a.datapath)
    try:
        lab.setup()
        print(f"lab {lab.tag}: node {lab.node}, wire {lab.wire} ({WIRE_OUT}: {lab.rate_mbit} Mbit/s + bfifo "
              f"{lab.fifo_bytes} B), fabric {lab.fabric} ({lab.server_ip}: iperf3 {IPERF_PORT0}.., loadgen "
              f"{LOADGEN_PORT})\n  e.g. ip netns exec {lab.node} tc -s qdisc show dev {UPLINK}\nCtrl-C tears it down.",
              flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        for p in lab.teardown():
            print(f"teardown: {p}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
