#!/usr/bin/env python3
"""test/e2e/kind_overlay.py — inference first across nodes through a real
overlay (the Flannel run of hack/kind-e2e.sh).

On a kind cluster whose CNI is Flannel (VXLAN backend), with servers on the
peer (control-plane) node and clients on the worker:
  - the overlay is what it should be: flannel.1 on the worker is a vxlan
    device, the primary conflist names flannel;
  - two arms, the worker's uplink (eth0, a veth) limited to --rate:
      fifo   no aiqos; eth0's root is an HTB at the rate with a deep byte FIFO
             (bfifo 1.5 MB, what a NIC at that rate with a deep buffer does)
      aiqos  aiqos installed (manifests/, image --image) with
             "uplinkRate": rate; eth0 is aiqos's
    in each: an idle request/response baseline, then a training pod's 4 bulk
    TCP flows (iperf3, cubic) to the peer node while an inference pod on the
    same worker runs sockperf TCP ping-pong at 1000 req/s to the peer node;
    p50/p99/p99.9 and the bulk goodput are printed;
  - checks: every arm produced figures; aiqos's p99 under load is below the
    FIFO's; the training flows keep at least half the rate under aiqos.
Ends with "N passed, N failed". The pod, namespace, qdisc and install it
created are removed at the end. Python 3.8+, standard library; it reuses
test/e2e/assert.py's helpers (kubectl runner, overlays, waits).
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("aiqos_e2e_assert", os.path.join(HERE, "assert.py"))
A = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(A)

NS = "aiqos-kind-bench"
SOCKPERF_PORT = 11111
FIFO_BYTES = 1500000


def rate_bits(rate):
    m = re.fullmatch(r"(\d+)(kbit|mbit|gbit)", rate)
    if not m:
        raise SystemExit("kind_overlay: --rate %r is not NUMBER{kbit,mbit,gbit}" % rate)
    return int(m.group(1)) * {"kbit": 10**3, "mbit": 10**6, "gbit": 10**9}[m.group(2)]


def pod(name, node, image, command, annotations=None, caps=None):
    c = {"name": "main", "image": image, "imagePullPolicy": "Never", "command": command}
    if caps:
        c["securityContext"] = {"capabilities": {"add": caps}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations or {}},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "tolerations": [{"operator": "Exists"}],
                     "terminationGracePeriodSeconds": 1, "containers": [c]}}


def parse_sockperf(out):
    got = {}
    for q, key in (("50.000", "p50"), ("99.000", "p99"), ("99.900", "p99.9")):
        m = re.search(r"percentile %s =\s*([\d.]+)" % re.escape(q), out)
        if m:
            got[key] = float(m.group(1)) / 1000.0  # usec -> ms
    if "p99" not in got:
        raise A.CheckFailed("no percentiles in sockperf's output: %r" % out[-400:])
    return got


class Bench:
    def __init__(self, a):
        self.a = a
        self.env = A.Env(argparse.Namespace(kubectl=a.kubectl, node_exec=a.node_exec, node=a.node,
                                             timeout=a.timeout, cni_conf_dir="/etc/cni/net.d"))
        self.installed_dir = None
        self.fifo = False
        self.ips = {}

    def k(self, *args, **kw):
        return self.env.k(*args, **kw)

    def apply(self, obj):
        self.k("apply", "-f", "-", input_text=json.dumps(obj))

    def wait_ready(self, *names):
        self.k("-n", NS, "wait", "--for=condition=Ready", *["pod/" + n for n in names],
               "--timeout=%ds" % self.a.timeout, timeout=self.a.timeout + 30)
        for n in names:
            self.ips[n] = self.env.kjson("-n", NS, "get", "pod", n)["status"]["podIP"]

    # -- setup --
    def overlay(self):
        out = self.env.node(["ip", "-d", "link", "show", "flannel.1"]).stdout
        if " vxlan " not in out:
            raise A.CheckFailed("flannel.1 is not a vxlan device: %s" % out.strip())
        vni = re.search(r"vxlan id (\d+)", out)
        port = re.search(r"dstport (\d+)", out)
        primary, pj, _ = A.find_primary(self.env)
        if "flannel" not in A.plugin_types(pj):
            raise A.CheckFailed("primary CNI config %s does not name flannel: %s" % (primary, A.plugin_types(pj)))
        self.env.primary = primary
        return "flannel.1 vxlan id %s dstport %s; primary %s (%s)" % (
            vni.group(1) if vni else "?", port.group(1) if port else "?", primary, ",".join(A.plugin_types(pj)))

    def servers(self):
        if self.k("create", "namespace", NS, check=False).returncode != 0:
            raise A.CheckFailed("namespace %s exists: not a clean cluster" % NS)
        self.apply(pod("srv-sockperf", self.a.peer_node, self.a.bench_image,
                       ["/usr/bin/sockperf", "server", "--tcp", "-p", str(SOCKPERF_PORT)]))
        self.apply(pod("srv-iperf", self.a.peer_node, self.a.bench_image, ["/usr/bin/iperf3", "-s"]))
        self.wait_ready("srv-sockperf", "srv-iperf")
        return "sockperf %s:%d, iperf3 %s:5201 on %s" % (self.ips["srv-sockperf"], SOCKPERF_PORT,
                                                         self.ips["srv-iperf"], self.a.peer_node)

    def clients(self):
        for n in ("inference", "training"):
            self.k("-n", NS, "delete", "pod", n, "--ignore-not-found", "--wait=true", timeout=self.a.timeout)
        self.apply(pod("inference", self.a.node, self.a.bench_image, ["/agnhost", "pause"],
                       annotations={"ai.workload": "inference"}))
        # NET_ADMIN: iperf3 -C cubic (the host allows only reno and bbr without it).
        self.apply(pod("training", self.a.node, self.a.bench_image, ["/agnhost", "pause"],
                       annotations={"ai.workload": "training"}, caps=["NET_ADMIN"]))
        self.wait_ready("inference", "training")

    # -- arms --
    def fifo_on(self):
        dev = "eth0"
        self.env.node(["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
                       "r2q", "1000"])
        self.fifo = True
        self.env.node(["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                       self.a.rate, "ceil", self.a.rate, "quantum", "60000"])
        self.env.node(["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit",
                       str(FIFO_BYTES)])

    def fifo_off(self):
        if self.fifo:
            self.env.node(["tc", "qdisc", "del", "dev", "eth0", "root"], check=False)
            self.fifo = False

    def install_aiqos(self):
        cfg = {"uplink": "auto", "uplinkRate": self.a.rate, "inferenceShare": 0.3, "mixedHoldSeconds": 30,
               "debounceMs": 200, "classify": "src-ip", "driftRepairSeconds": 60}
        d = A.write_overlay(self.env, "bench-install", os.path.join(self.a.repo, "manifests"),
                            [("aiqos", self.a.image)], pull_policy="Never", ds=A.DS,
                            extra=[({"kind": "ConfigMap", "name": "aiqos-config"},
                                    [{"op": "replace", "path": "/data/config.json",
                                      "value": json.dumps(cfg, indent=2) + "\n"}])])
        self.k("apply", "-k", d)
        self.installed_dir = d
        self.k("-n", A.NS_SYSTEM, "rollout", "status", "daemonset/" + A.DS,
               "--timeout=%ds" % self.a.timeout, timeout=self.a.timeout + 30)
        self.env.agent_pod = A.wait_for("agent pod", lambda: A.agent_pod(self.env), 30)
        A.wait_for("primary chained", lambda: A.check_chained(self.env), 60)

    def uninstall_aiqos(self):
        if self.installed_dir:
            self.k("delete", "-k", self.installed_dir, "--ignore-not-found", "--wait=true", check=False,
                   timeout=self.a.timeout)
            self.k("apply", "-k", os.path.join(self.a.repo, "manifests", "uninstall"), check=False)
            self.installed_dir = None

    def sockperf(self, seconds):
        out = self.k("-n", NS, "exec", "inference", "--", "/usr/bin/sockperf", "ping-pong", "--tcp", "-i",
                     self.ips["srv-sockperf"], "-p", str(SOCKPERF_PORT), "--mps", "1000", "-t", str(seconds),
                     "--full-rtt", timeout=seconds + 60).stdout
        return parse_sockperf(out)

    def loaded(self, seconds):
        cmd = self.env.kubectl + ["-n", NS, "exec", "training", "--", "/usr/bin/iperf3", "-c",
                                  self.ips["srv-iperf"], "-P", "4", "-C", "cubic", "-t", str(seconds + 4), "-J"]
        bulk = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        try:
            time.sleep(3)
            lat = self.sockperf(seconds)
            out, err = bulk.communicate(timeout=seconds + 60)
        finally:
            if bulk.poll() is None:
                bulk.kill()
        if bulk.returncode != 0:
            raise A.CheckFailed("iperf3 failed: %s" % (err or out)[-400:])
        j = json.loads(out)
        lat["goodput_mbit"] = j["end"]["sum_received"]["bits_per_second"] / 1e6
        lat["retransmits"] = j["end"]["sum_sent"].get("retransmits")
        return lat

    def arm(self, name):
        self.clients()
        if name == "aiqos":
            A.wait_for("agent sees both pods", self.both_tracked, 60)
        idle = self.sockperf(5)
        runs = [self.loaded(self.a.seconds) for _ in range(self.a.repeat)]
        return {"idle": idle, "loaded": runs}

    def both_tracked(self):
        st = A.status(self.env)
        names = {(p.get("namespace"), p.get("name")) for p in st.get("pods", [])}
        ok = (NS, "inference") in names and (NS, "training") in names and st.get("mode") == "mixed"
        return ok, "mode %r, pods %s" % (st.get("mode"), sorted(n for _, n in names))

    def cleanup(self):
        self.fifo_off()
        self.k("delete", "namespace", NS, "--ignore-not-found", "--wait=true", check=False, timeout=self.a.timeout)
        self.uninstall_aiqos()


def fmt(r):
    return "p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms" % (r["p50"], r["p99"], r.get("p99.9", float("nan")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--node", required=True, help="the worker (clients, shaped uplink)")
    ap.add_argument("--peer-node", required=True, help="the node of the servers")
    ap.add_argument("--node-exec", required=True, help="prefix running a command on the worker's host")
    ap.add_argument("--image", required=True, help="the aiqos image the nodes have")
    ap.add_argument("--bench-image", required=True, help="image with /agnhost, sockperf and iperf3")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--timeout", type=int, default=180)
    a = ap.parse_args()
    a.repo = os.path.abspath(a.repo)
    rate = rate_bits(a.rate)
    b = Bench(a)
    r = A.Runner(b.env)
    res = {}
    try:
        r.step("flannel VXLAN overlay on the worker", b.overlay, critical=True)
        r.step("servers on the peer node", b.servers, critical=True)

        def fifo_arm():
            b.fifo_on()
            try:
                res["fifo"] = b.arm("fifo")
            finally:
                b.fifo_off()
            return "idle %s; loaded %s" % (fmt(res["fifo"]["idle"]), " | ".join(
                fmt(x) + ", bulk %.0f Mbit/s" % x["goodput_mbit"] for x in res["fifo"]["loaded"]))
        r.step("arm fifo (no aiqos, %s deep FIFO): measured" % a.rate, fifo_arm)

        def aiqos_arm():
            b.install_aiqos()
            res["aiqos"] = b.arm("aiqos")
            return "idle %s; loaded %s" % (fmt(res["aiqos"]["idle"]), " | ".join(
                fmt(x) + ", bulk %.0f Mbit/s" % x["goodput_mbit"] for x in res["aiqos"]["loaded"]))
        r.step("arm aiqos (uplinkRate %s): measured" % a.rate, aiqos_arm)

        if "fifo" in res and "aiqos" in res:
            worst = max(x["p99"] for x in res["aiqos"]["loaded"])
            best_fifo = min(x["p99"] for x in res["fifo"]["loaded"])
            print("kind-overlay: inference p99 under the training flows, worker uplink %s, Flannel VXLAN: "
                  "no aiqos %s ms, aiqos %s ms (idle: %.2f / %.2f ms); bulk %s vs %s Mbit/s" % (
                      a.rate, "/".join("%.2f" % x["p99"] for x in res["fifo"]["loaded"]),
                      "/".join("%.2f" % x["p99"] for x in res["aiqos"]["loaded"]),
                      res["fifo"]["idle"]["p99"], res["aiqos"]["idle"]["p99"],
                      "/".join("%.0f" % x["goodput_mbit"] for x in res["fifo"]["loaded"]),
                      "/".join("%.0f" % x["goodput_mbit"] for x in res["aiqos"]["loaded"])), flush=True)

            def lower():
                if worst >= best_fifo:
                    raise A.CheckFailed("aiqos's worst p99 %.2f ms is not below the FIFO's best %.2f ms" % (
                        worst, best_fifo))
                return "worst aiqos p99 %.2f ms < best FIFO p99 %.2f ms (%.1fx)" % (worst, best_fifo,
                                                                                  best_fifo / worst)
            r.step("aiqos: inference p99 below the FIFO's", lower)

            def goodput():
                g = min(x["goodput_mbit"] for x in res["aiqos"]["loaded"])
                if g * 1e6 < rate / 2:
                    raise A.CheckFailed("training goodput %.0f Mbit/s is below half of %s" % (g, a.rate))
                return "training %.0f Mbit/s of %s" % (g, a.rate)
            r.step("aiqos: training keeps at least half the rate", goodput)
    finally:
        try:
            b.cleanup()
        except A.CheckFailed as e:
            A.log("FAIL cleanup: %s" % e)
            r.failed += 1
    print(json.dumps({"kind_overlay": res, "rate": a.rate}, sort_keys=True), flush=True)
    A.log("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
