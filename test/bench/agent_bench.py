#!/usr/bin/env python3
"""agent_bench.py — aiqos-agent benchmarks on a lab node (root; docs/benchmarks.md P2,
P3, P5): a node netns with an uplink, the fake API server, the agent, and
250 pods on the node (API pods, optionally attached through the real CNI
chain).

  P2  API event -> kernel re-tuned: a pod is added/removed in the API and an
      independent `tc monitor` in the node netns timestamps the filter it
      gets/loses on the uplink (debounceMs 0, so the debounce is excluded).
  P3  RSS (VmRSS/VmHWM) with 250 pods; CPU over an idle period and during
      churn (events/s).
  P5  the first reconcile of 250 pods (empty uplink) and a restart's
      adoption, from the agent's own log (duration_ms).

Usage: python3 test/bench/agent_bench.py [--pods 250] [--cni-pods N]
       [--iterations 100] [--json FILE]. Prints one line per figure."""

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import agentlab  # noqa: E402
import cni  # noqa: E402

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}


class TcMonitor:
    """`tc monitor` in a netns; every line with its monotonic arrival time."""

    def __init__(self, ns):
        self.lines = []
        self.cv = threading.Condition()
        self.p = subprocess.Popen(cni.in_ns(ns, "stdbuf", "-oL", "tc", "monitor"), stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            now = time.monotonic()
            with self.cv:
                self.lines.append((now, line.rstrip("\n")))
                self.cv.notify_all()

    def wait_for(self, pattern, since_index, timeout_s=5.0):
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout_s
        with self.cv:
            i = since_index
            while True:
                while i < len(self.lines):
                    if rx.search(self.lines[i][1]):
                        return self.lines[i][0]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cv.wait(left)

    def mark(self):
        with self.cv:
            return len(self.lines)

    def close(self):
        os.killpg(self.p.pid, signal.SIGTERM)
        self.p.wait(5)


def u32_hex(ip):
    return "%08x" % int.from_bytes(bytes(int(x) for x in ip.split(".")), "big")


def proc_stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime, seconds


def proc_mem_kib(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def last_retune_ms(log_path, since):
    """duration_ms of the uplink re-tunes logged after byte offset since."""
    with open(log_path, errors="replace") as f:
        f.seek(since)
        text = f.read()
    return [int(m) for m in re.findall(r'msg="uplink re-tuned".*?duration_ms=(\d+)', text)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=250)
    ap.add_argument("--cni-pods", type=int, default=20, help="of them attached through the real CNI chain")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--idle-s", type=float, default=10)
    ap.add_argument("--churn-s", type=float, default=10)
    ap.add_argument("--churn-rate", type=float, default=20, help="API events per second during churn")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("agent_bench: needs root (network namespaces)")
    build = agentlab.cni_build()
    lab = cni.Lab(os.path.join(build, "bin", "aiqos"), "bench")
    node = None
    mon = None
    results = {}
    try:
        node = agentlab.NodeLab(lab)
        node.start_api()
        cfg = {"uplinkRate": "10gbit", "debounceMs": 0, "mixedHoldSeconds": 30}
        node.start_agent(cfg)
        pid = node.agent.pid

        # 250 pods: mostly training, a third inference (mixed mode)
        n_api = args.pods - args.cni_pods
        specs = [(INF if i % 3 == 0 else TRAIN, f"10.{90 + i // 250}.{(i // 250) % 250}.{i % 250 + 1}")
                 for i in range(n_api)]
        t0 = time.monotonic()
        log_off = os.path.getsize(node.agent_log)
        for k in range(0, len(specs), 100):
            node.add_api_pods(specs[k:k + 100])
        for i in range(args.cni_pods):
            node.add_pod(INF if i % 3 == 0 else TRAIN)
        agentlab.wait_until(lambda: len(node.filters()) >= args.pods, 60, f"{args.pods} filters")
        results["setup_s"] = round(time.monotonic() - t0, 2)
        results["pods"] = args.pods
        results["uplink_objects"] = len(node.filters()) + len(node.classes()) + len(node.qdiscs())

        # P5: a restart adopts 250 pods (nothing to change) ...
        node.stop_agent(signal.SIGTERM)
        log_off = os.path.getsize(node.agent_log)
        t0 = time.monotonic()
        node.start_agent(cfg)
        results["restart_ready_ms"] = round((time.monotonic() - t0) * 1000, 1)
        # ... and the first reconcile from an empty uplink
        node.stop_agent(signal.SIGTERM)
        node.cleanup_uplink()
        log_off = os.path.getsize(node.agent_log)
        node.start_agent(cfg)
        pid = node.agent.pid
        agentlab.wait_until(lambda: len(node.filters()) >= args.pods, 30, "filters back")
        d = last_retune_ms(node.agent_log, log_off)
        results["first_reconcile_250_ms"] = d[0] if d else None

        # P3: memory and idle CPU
        time.sleep(1)
        cpu0 = proc_stat(pid)
        time.sleep(args.idle_s)
        cpu1 = proc_stat(pid)
        mem = proc_mem_kib(pid)
        results["rss_kib"] = mem.get("VmRSS")
        results["rss_peak_kib"] = mem.get("VmHWM")
        results["idle_cpu_pct"] = round((cpu1 - cpu0) / args.idle_s * 100, 3)

        # P2: event -> kernel, one pod at a time
        mon = TcMonitor(node.node.name)
        time.sleep(0.3)
        add_ms, del_ms = [], []
        for it in range(args.iterations):
            ip = f"10.99.{it // 250}.{it % 250 + 1}"
            m = mon.mark()
            t0 = time.monotonic()
            pod = node.add_api_pod(INF if it % 2 else TRAIN, ip)
            t1 = mon.wait_for(r"match " + u32_hex(ip), m)
            if t1:
                add_ms.append((t1 - t0) * 1000)
            m = mon.mark()
            t0 = time.monotonic()
            pod.delete_api()
            t2 = mon.wait_for(r"^deleted filter", m)
            if t2:
                del_ms.append((t2 - t0) * 1000)
        for name, v in (("p2_add_pod", add_ms), ("p2_delete_pod", del_ms)):
            if v:
                results[name + "_p50_ms"] = round(statistics.median(v), 2)
                results[name + "_p99_ms"] = round(pct(v, 99), 2)
                results[name + "_max_ms"] = round(max(v), 2)
                results[name + "_n"] = len(v)

        # P2 for a running pod: annotation change -> its interface re-tuned
        # (a shaper appears / goes on eth0 in its netns, seen by tc monitor there)
        mon.close()
        cpod = node.pods[0]
        mon = TcMonitor(cpod.ns)
        time.sleep(0.3)
        on_ms, off_ms = [], []
        for it in range(max(10, args.iterations // 5)):
            m = mon.mark()
            t0 = time.monotonic()
            cpod.annotate({"kubernetes.io/egress-bandwidth": "20M"})
            t1 = mon.wait_for(r"qdisc htb 1: dev eth0 root", m)
            if t1:
                on_ms.append((t1 - t0) * 1000)
            m = mon.mark()
            t0 = time.monotonic()
            cpod.annotate({"kubernetes.io/egress-bandwidth": None})
            t2 = mon.wait_for(r"^deleted qdisc htb 1: dev eth0", m)
            if t2:
                off_ms.append((t2 - t0) * 1000)
        for name, v in (("p2_pod_shaper_on", on_ms), ("p2_pod_shaper_off", off_ms)):
            if v:
                results[name + "_p50_ms"] = round(statistics.median(v), 2)
                results[name + "_p99_ms"] = round(pct(v, 99), 2)
                results[name + "_n"] = len(v)

        # P3: CPU under churn (annotation flips at a steady rate)
        mon.close()
        mon = None
        flip = [node.add_api_pod(TRAIN, f"10.98.0.{i + 1}") for i in range(10)]
        time.sleep(0.5)
        cpu0 = proc_stat(pid)
        t_end = time.monotonic() + args.churn_s
        n = 0
        while time.monotonic() < t_end:
            p = flip[n % len(flip)]
            p.annotate(INF if (n // len(flip)) % 2 == 0 else TRAIN)
            n += 1
            time.sleep(max(0.0, 1.0 / args.churn_rate - 0.002))
        elapsed = args.churn_s
        cpu1 = proc_stat(pid)
        results["churn_events_per_s"] = round(n / elapsed, 1)
        results["churn_cpu_pct"] = round((cpu1 - cpu0) / elapsed * 100, 2)
        mem = proc_mem_kib(pid)
        results["rss_after_churn_kib"] = mem.get("VmRSS")
        results["rss_peak_after_churn_kib"] = mem.get("VmHWM")
        results["agent_alive"] = node.agent.poll() is None
    finally:
        if mon:
            mon.close()
        if node:
            node.cleanup()
        lab.cleanup()
    for k, v in results.items():
        print(f"{k}: {v}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
