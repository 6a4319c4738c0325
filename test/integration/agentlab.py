"""agentlab.py — a lab node for the agent's integration tests (and the agent
benchmarks): a "node" network namespace whose default route goes out of an
uplink veth into a "fabric" namespace, pods attached through the real CNI
chain (ptp + host-local + aiqos) run *inside* the node namespace, the fake
API server (test/apiserver/fakeapi.py) on the node's loopback, and
aiqos-agent started in the node namespace against it. The kernel is read back
independently with tc/ip/sysctl in the node and pod namespaces.

Everything is registered on the cni.Lab it is built on, or on this NodeLab,
and removed by cleanup() even when a test fails."""

import contextlib
import ctypes
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time

import cni

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FAKEAPI = os.path.join(REPO, "test", "apiserver", "fakeapi.py")
GENCERTS = os.path.join(REPO, "test", "apiserver", "gencerts.sh")
PKI_DIR = f"/tmp/aqt-pki-{os.getuid()}"
CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)
_pki_lock = threading.Lock()


def wait_until(cond, timeout_s, what, interval_s=0.02):
    """Poll cond() until it returns a truthy value; raise with `what` on timeout."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            last = cond()
        except Exception as e:  # noqa: BLE001 - the last error goes into the message
            last = e
            if isinstance(e, AssertionError):
                last = e
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def pki():
    """The test PKI (made once per machine, reused)."""
    with _pki_lock:
        cni.sh("bash", GENCERTS, PKI_DIR, timeout=60)
    return PKI_DIR


def in_netns_call(ns_name, fn):
    """Run fn() on a thread that entered netns ns_name (sockets it creates stay there)."""
    out = {}

    def run():
        try:
            fd = os.open(f"{cni.NETNS_DIR}/{ns_name}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
            finally:
                os.close(fd)
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    if t.is_alive():
        raise TimeoutError("netns call did not finish")
    if "error" in out:
        raise out["error"]
    return out.get("value")


class NodeAttachment(cni.Attachment):
    """A CNI attachment whose plugins run inside the node netns."""

    def __init__(self, node, *args, **kw):
        super().__init__(*args, **kw)
        self.node = node

    def binary(self, plugin_type):
        return self.node.wrapper(plugin_type)


class Pod:
    def __init__(self, node, name, namespace, uid, att):
        self.node = node
        self.name = name
        self.namespace = namespace
        self.uid = uid
        self.att = att

    @property
    def ns(self):
        """The pod's netns name."""
        return self.att.netns.name if self.att else None

    def ip(self):
        return self.att.pod_ip()

    def host_veth(self):
        for itf in (self.att.base_result() or {}).get("interfaces", []):
            if not itf.get("sandbox"):
                return itf["name"]
        return None

    def state(self):
        return self.att.state()

    def settled(self):
        """The record once a tuning finished, else None (the intent record a
        re-tune writes first says pending until kernel and record agree)."""
        st = self.state()
        return st if st and not st.get("pending") else None

    def annotate(self, annotations):
        """Change annotations in the API (None removes a key)."""
        return self.node.api("PATCH", f"/pods/{self.namespace}/{self.name}", {"annotations": annotations})

    def delete_api(self):
        return self.node.api("DELETE", f"/pods/{self.namespace}/{self.name}")

    def cni_del(self):
        runs = self.att.delete()
        for r in runs:
            r.assert_ok(output=False)


class NodeLab:
    def __init__(self, lab, tag="n"):
        self.lab = lab
        self.tag = tag
        self.node = lab.netns()
        self.fabric = lab.netns()
        self.name = f"node-{secrets.token_hex(3)}"
        self.dir = os.path.join(lab.tmp, "node")
        os.makedirs(self.dir, mode=0o700)
        self.state_dir = lab.state_dir
        self.socket = os.path.join(lab.tmp, "run", "agent.sock")
        self.config_path = os.path.join(self.dir, "config.json")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.token_file = os.path.join(self.dir, "token")
        self.agent_log = os.path.join(self.dir, "agent.log")
        self.api_proc = None
        self.api_ports = None
        self.agent = None
        self.pods = []
        self._n = 0
        # the uplink: node "up0" <-> fabric "fab0", one tx queue (a veth gets
        # one per CPU unless told; MqNodeLab has several): with uplinkRate,
        # HTB at the root, whatever the machine
        n = cni.alloc_subnet()
        lab._subnets.append(n)
        self.uplink_net = f"10.199.{n}"
        a, b = f"aqu{secrets.token_hex(4)}", f"aqf{secrets.token_hex(4)}"
        cni.sh("ip", "link", "add", a, "numtxqueues", "1", "numrxqueues", "1", "type", "veth", "peer", "name", b,
               "numtxqueues", "1", "numrxqueues", "1")
        cni.sh("ip", "link", "set", a, "netns", self.node.name)
        cni.sh("ip", "link", "set", b, "netns", self.fabric.name)
        cni.sh("ip", "-n", self.node.name, "link", "set", a, "name", "up0")
        cni.sh("ip", "-n", self.fabric.name, "link", "set", b, "name", "fab0")
        cni.sh("ip", "-n", self.node.name, "addr", "add", f"{self.uplink_net}.2/24", "dev", "up0")
        cni.sh("ip", "-n", self.fabric.name, "addr", "add", f"{self.uplink_net}.1/24", "dev", "fab0")
        cni.sh("ip", "-n", self.node.name, "link", "set", "up0", "up")
        cni.sh("ip", "-n", self.fabric.name, "link", "set", "fab0", "up")
        cni.sh("ip", "-n", self.node.name, "route", "add", "default", "via", f"{self.uplink_net}.1")
        # CNI plugins run in the node netns through wrappers
        self.wrap_dir = os.path.join(self.dir, "cni-bin")
        os.makedirs(self.wrap_dir)
        for t, path in (("ptp", os.path.join(cni.REF_PLUGIN_DIR, "ptp")),
                        ("host-local", os.path.join(cni.REF_PLUGIN_DIR, "host-local")),
                        ("aiqos", lab.plugin)):
            w = os.path.join(self.wrap_dir, t)
            with open(w, "w") as f:
                f.write(f"#!/bin/sh\nexec ip netns exec {self.node.name} {path} \"$@\"\n")
            os.chmod(w, 0o755)

    # -- plumbing
    def wrapper(self, plugin_type):
        return os.path.join(self.wrap_dir, plugin_type)

    def sh(self, *argv, **kw):
        return cni.sh(*cni.in_ns(self.node.name, *argv), **kw)

    # -- the fake API server
    def start_api(self):
        certs = pki()
        ready = os.path.join(self.dir, "api-ready.json")
        log = open(os.path.join(self.dir, "fakeapi.log"), "w")
        self.api_proc = subprocess.Popen(
            ["ip", "netns", "exec", self.node.name, "/usr/bin/python3", FAKEAPI, "--certs", certs,
             "--token-file", self.token_file, "--token", "t0", "--ready-file", ready, "--quiet",
             "--bookmark-interval", "1"],
            stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        log.close()
        self.api_ports = wait_until(lambda: os.path.exists(ready) and json.load(open(ready)), 20, "fakeapi ready")
        with open(self.kubeconfig, "w") as f:
            f.write(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n"
                f"    server: https://127.0.0.1:{self.api_ports['port']}\n"
                f"    certificate-authority: {certs}/ca.crt\n"
                f"users:\n- name: agent\n  user:\n    tokenFile: {self.token_file}\n"
                "contexts:\n- name: lab\n  context: {cluster: lab, user: agent}\ncurrent-context: lab\n")

    def api(self, method, path, body=None, ok=(200, 201)):
        """The fake API server's control API (plain HTTP on the node's loopback)."""
        port = self.api_ports["control_port"]

        def call():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            try:
                data = json.dumps(body).encode() if body is not None else None
                c.request(method, path, body=data, headers={"Content-Type": "application/json"})
                r = c.getresponse()
                text = r.read().decode()
                return r.status, text
            finally:
                c.close()

        status, text = in_netns_call(self.node.name, call)
        if ok and status not in ok:
            raise AssertionError(f"control API {method} {path}: HTTP {status}: {text}")
        return json.loads(text) if text.strip() else None

    def events(self, reason=None, name=None):
        items = self.api("GET", "/events").get("items", [])
        return [e for e in items if (reason is None or e.get("reason") == reason)
                and (name is None or e.get("involvedObject", {}).get("name") == name)]

    # -- the agent
    def write_config(self, config):
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(config if isinstance(config, str) else json.dumps(config))
        os.rename(tmp, self.config_path)

    def start_agent(self, config=None, args=(), wait_ready=True, env=None, wrap=()):
        """wrap: a command line the agent runs under (e.g. unit_sandbox.py)."""
        assert self.agent is None or self.agent.poll() is not None, "agent already running"
        if config is not None:
            self.write_config(config)
        argv = ["ip", "netns", "exec", self.node.name, *wrap, os.path.join(cni_build(), "bin", "aiqos-agent"),
                "--node-name", self.name, "--kubeconfig", self.kubeconfig, "--config", self.config_path,
                "--socket", self.socket, "--state-dir", self.state_dir, "--metrics-addr", "127.0.0.1:0",
                "--log-level", "debug", *args]
        log = open(self.agent_log, "a")
        log.write(f"=== start {' '.join(argv)}\n")
        log.flush()
        self.agent = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True,
                                      env=dict(os.environ, **(env or {})))
        log.close()
        if wait_ready:
            self.wait_ready()
        return self.agent

    def wait_ready(self, timeout_s=15):
        def ready():
            if self.agent.poll() is not None:
                raise AssertionError(f"agent exited {self.agent.returncode}:\n{self.agent_log_tail()}")
            s = self.status(check=False)
            return s if s and s.get("ready") else None
        return wait_until(ready, timeout_s, "agent ready")

    def stop_agent(self, sig=signal.SIGTERM, timeout_s=10):
        if self.agent is None or self.agent.poll() is not None:
            return None
        os.killpg(self.agent.pid, sig)
        try:
            return self.agent.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.agent.pid, signal.SIGKILL)
            return self.agent.wait(5)

    def restart_tc_events(self, config=None, then=None):
        """Stop the agent, start it again with config under `tc monitor` in
        the node netns (then(): waited for after the start): what the
        restart changed (text, "" = nothing)."""
        self.stop_agent(signal.SIGTERM)
        mon = subprocess.Popen(cni.in_ns(self.node.name, "tc", "monitor"), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            time.sleep(0.3)
            self.start_agent(config)
            if then:
                then()
            time.sleep(0.5)
        finally:
            os.killpg(mon.pid, signal.SIGTERM)
            out, _ = mon.communicate(timeout=5)
        return out.strip()

    def agent_log_tail(self, n=6000):
        if not os.path.exists(self.agent_log):
            return "(no agent log)"
        with open(self.agent_log, errors="replace") as f:
            return f.read()[-n:]

    def aiqosctl(self, *args, check=True, timeout=10):
        return cni.sh(os.path.join(cni_build(), "bin", "aiqosctl"), "--socket", self.socket, *args, check=check,
                      timeout=timeout)

    def status(self, check=True):
        p = self.aiqosctl("status", "--json", check=check)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout)

    def cleanup_uplink(self):
        return cni.sh("ip", "netns", "exec", self.node.name, os.path.join(cni_build(), "bin", "aiqos-agent"),
                      "--cleanup", "--state-dir", self.state_dir, check=False)

    # -- pods
    def add_pod(self, annotations=None, name=None, runtime_annotations=None, api=True, bandwidth=None,
                aiqos_env=None):
        """A pod: created in the API (no IPs yet), attached through the CNI
        chain in the node netns (the plugin asks the agent for annotations
        unless runtime_annotations are given), then its podIPs set in the API
        as the kubelet would. aiqos_env: extra environment for aiqos's ADD."""
        self._n += 1
        name = name or f"pod{self._n}-{secrets.token_hex(2)}"
        uid = f"uid-{secrets.token_hex(8)}"
        if api:  # the uid the API server keeps (a real one assigns its own)
            made = self.api("POST", "/pods", {"namespace": "aqt", "name": name, "node": self.name, "uid": uid,
                                              "annotations": annotations or {}, "phase": "Running"})
            uid = made["object"]["metadata"]["uid"]
        conflist = self.lab.conflist(aiqos_extra={"agentSocket": self.socket, "agentTimeoutMs": 1000})
        rc = {}
        if runtime_annotations is not None:
            rc["io.kubernetes.cri.pod-annotations"] = runtime_annotations
        if bandwidth is not None:
            rc["bandwidth"] = bandwidth
        cid = secrets.token_hex(32)
        args = (f"IgnoreUnknown=1;K8S_POD_NAMESPACE=aqt;K8S_POD_NAME={name};"
                f"K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID={uid}")
        att = NodeAttachment(self, self.lab, self.lab.netns(), conflist, cid, "eth0", rc, args)
        run = att.add(check=True, aiqos_env=aiqos_env)
        run.assert_ok()
        pod = Pod(self, name, "aqt", uid, att)
        if api:
            self.api("PATCH", f"/pods/aqt/{name}", {"podIPs": [pod.ip()]})
        self.pods.append(pod)
        return pod

    def add_api_pod(self, annotations, ip, name=None):
        """A pod that exists only in the API (no netns): enough for the uplink."""
        self._n += 1
        name = name or f"api{self._n}-{secrets.token_hex(2)}"
        uid = f"uid-{secrets.token_hex(8)}"
        self.api("POST", "/pods", {"namespace": "aqt", "name": name, "node": self.name, "uid": uid,
                                   "annotations": annotations or {}, "phase": "Running", "podIPs": [ip]})
        return Pod(self, name, "aqt", uid, None)

    def add_api_pods(self, specs):
        """Several API-only pods in one request (one burst of watch events):
        specs = [(annotations, ip), ...]."""
        items, pods = [], []
        for annotations, ip in specs:
            self._n += 1
            name = f"api{self._n}-{secrets.token_hex(2)}"
            uid = f"uid-{secrets.token_hex(8)}"
            items.append({"namespace": "aqt", "name": name, "node": self.name, "uid": uid,
                          "annotations": annotations or {}, "phase": "Running", "podIPs": [ip]})
            pods.append(Pod(self, name, "aqt", uid, None))
        self.api("POST", "/pods", {"items": items})
        return pods

    # -- the kernel, read independently
    def qdiscs(self, dev="up0"):
        return cni.tc_qdiscs(self.node.name, dev)

    def root(self, dev="up0"):
        return cni.root_qdisc(self.node.name, dev)

    def classes(self, dev="up0"):
        return cni.tc_classes(self.node.name, dev)

    def filters(self, dev="up0", parent="1:"):
        """Key nodes (real filters) under parent: dicts with handle, prio, protocol, flowid, match."""
        out = []
        for f in cni.tc_filters(self.node.name, dev, f"parent {parent}"):
            opts = f.get("options") or {}
            if "fh" not in opts or not opts.get("flowid") and not opts.get("match"):
                continue
            if opts["fh"].endswith(":"):
                continue  # a hash table, not a key node
            out.append({"handle": opts["fh"], "prio": f.get("pref"), "protocol": f.get("protocol"),
                        "flowid": opts.get("flowid"), "match": opts.get("match")})
        return out

    def classifier_hooked(self, dev="up0"):
        """aiqos's egress classifier on dev: a clsact filter, or (kernels with
        tcx) a tcx link on the egress hook (cilium-standin query lists them)."""
        if "aiqos_cls" in self.sh("tc", "filter", "show", "dev", dev, "egress").stdout:
            return True
        p = self.sh(os.path.join(cni_build(), "test", "cilium-standin"), "query", dev, check=False)
        return "egress aiqos_cls_edt" in p.stdout.splitlines()

    def tcx(self, dev="up0"):
        """{"ingress": [...], "egress": [...]}: the programs on dev's tcx hooks, in run order."""
        out = {"ingress": [], "egress": []}
        p = self.sh(os.path.join(cni_build(), "test", "cilium-standin"), "query", dev, check=False)
        for line in p.stdout.splitlines():
            hook, _, name = line.partition(" ")
            out[hook].append(name)
        return out

    def tc_summary(self, dev="up0"):
        return cni.tc_summary(self.node.name, dev)

    # -- the agent's HTTP endpoints on the node's loopback (metrics, health)
    def metrics_port(self):
        """The port the agent logged last (metrics_port=N); fails naming the log when none."""
        port = None
        for line in open(self.agent_log, errors="replace"):
            if "metrics_port=" in line:
                port = int(line.split("metrics_port=")[1].split()[0])
        assert port is not None, f"no metrics port in the log:\n{self.agent_log_tail()}"
        return port

    def http_get(self, path, port=None):
        """(status, body bytes) of GET path on the agent's metrics port, from the node netns."""
        port = port or self.metrics_port()

        def call():
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                c.request("GET", path)
                r = c.getresponse()
                return r.status, r.read()
            finally:
                c.close()
        return in_netns_call(self.node.name, call)

    def metrics(self):
        """The text of GET /metrics (status 200)."""
        status, body = self.http_get("/metrics")
        assert status == 200, (status, body[:500])
        return body.decode()

    def cleanup(self):
        """Stop the agent and the API server (the netns go with the cni.Lab)."""
        with contextlib.suppress(Exception):
            self.stop_agent(signal.SIGKILL)
        if self.api_proc and self.api_proc.poll() is None:
            with contextlib.suppress(Exception):
                os.killpg(self.api_proc.pid, signal.SIGTERM)
                try:
                    self.api_proc.wait(5)
                except subprocess.TimeoutExpired:
                    os.killpg(self.api_proc.pid, signal.SIGKILL)
                    self.api_proc.wait(5)


class MqNodeLab(NodeLab):
    """A lab node whose uplink has QUEUES tx queues (a fast NIC's shape)."""

    QUEUES = 4

    def __init__(self, lab):
        super().__init__(lab)
        n, queues = self, self.QUEUES
        # the same uplink, rebuilt with several tx queues
        n.sh("ip", "link", "del", "up0")
        a, b = f"aqm{os.urandom(4).hex()}", f"aqn{os.urandom(4).hex()}"
        cni.sh("ip", "link", "add", a, "numtxqueues", str(queues), "numrxqueues", str(queues), "type", "veth",
               "peer", "name", b, "numtxqueues", str(queues), "numrxqueues", str(queues))
        cni.sh("ip", "link", "set", a, "netns", n.node.name)
        cni.sh("ip", "link", "set", b, "netns", n.fabric.name)
        n.sh("ip", "link", "set", a, "name", "up0")
        cni.sh("ip", "-n", n.fabric.name, "link", "del", "fab0", check=False)
        cni.sh("ip", "-n", n.fabric.name, "link", "set", b, "name", "fab0")
        n.sh("ip", "addr", "add", f"{n.uplink_net}.2/24", "dev", "up0")
        cni.sh("ip", "-n", n.fabric.name, "addr", "add", f"{n.uplink_net}.1/24", "dev", "fab0")
        n.sh("ip", "link", "set", "up0", "up")
        cni.sh("ip", "-n", n.fabric.name, "link", "set", "fab0", "up")
        n.sh("ip", "route", "add", "default", "via", f"{n.uplink_net}.1")


def send_udp(ns, ip, n=200, burst=0, burst_to=None):
    """From netns ns: burst 1400-byte datagrams to burst_to (default ip),
    then n small ones to ip, in one breath (a gate's hold covers what
    follows the burst)."""
    def run():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for _ in range(burst):
                s.sendto(b"x" * 1400, (burst_to or ip, 9))
            for _ in range(n):
                s.sendto(b"x" * 200, (ip, 9))
        finally:
            s.close()
    in_netns_call(ns, run)


@contextlib.contextmanager
def started(lab, cls=None):
    """A NodeLab (or a subclass: cls) on lab with its API server started,
    cleaned up afterwards (the conftest `node` fixture)."""
    n = (cls or NodeLab)(lab)
    try:
        n.start_api()
        yield n
    finally:
        n.cleanup()


def class_packets(node, dev="up0"):
    """{classid: packets sent} of dev's classes, from `tc -s class show`
    (text: iproute2 6.1 has no JSON for class statistics)."""
    out, cur = {}, None
    for line in node.sh("tc", "-s", "class", "show", "dev", dev).stdout.splitlines():
        m = re.match(r"class \S+ (\S+) ", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"\s*Sent (\d+) bytes (\d+) pkt", line)
        if m and cur:
            out[cur] = int(m.group(2))
            cur = None
    return out


def cni_build():
    return os.path.abspath(os.environ.get("AIQOS_BUILD") or os.path.join(REPO, "build"))
