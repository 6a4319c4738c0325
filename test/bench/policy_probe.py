#!/usr/bin/env python3
"""policy_probe.py — the measurement behind the inference leaf for large responses on the lab
of lab.py: large inference responses (default 256 KiB at 100 req/s, ~40 % of
a 500 Mbit/s link) next to 2 training pods x 2 cubic flows, in one direction:

  egress    the inference pod serves (loadgen server in the pod, client in
            the fabric): responses leave the node; training pods send
            (iperf3); the bottleneck is the wire toward the fabric
  download  the inference pod fetches (client in the pod, server in the
            fabric): responses come in; training pods receive (iperf3 -R);
            the bottleneck is the wire toward the node

Arms: idle (inference alone, plain chain), fifo (deep FIFO at the bottleneck, nothing on the node) and aiqos
(plugin + agent, uplinkRate/downlinkRate = the bottleneck rate), interleaved,
REPS repetitions; --leaf lets the aiqos arm replace the uplink's inference
leaf after the agent built it (drift repair off) to compare fallbacks.

    policy_probe.py [--build DIR] [--direction egress|download] [--reps N]
                    [--arms fifo,aiqos] [--leaf "bfifo limit 600000"] [--resp B] [--rate R]
Prints one line per run and a median summary (p50/p99 ms, errors, training
Mbit/s, drops at the node and the wire)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import lab as L  # noqa: E402
import outcome as O  # noqa: E402

PROBE_PORT = 7100


def set_down_bottleneck(lab, on):
    """The wire's egress toward the node (w-node): the download bottleneck."""
    dev = L.WIRE_IN
    if not on:
        L.sh("tc", "-n", lab.wire, "qdisc", "del", "dev", dev, "root", check=False)
        return
    rate = f"{lab.rate_mbit}mbit"
    burst = max(128 * 1024, lab.rate_mbit * 1_000_000 // 8 * 2 // 1000)
    quantum = min(200000, max(1514, lab.rate_mbit * 1_000_000 // 8 // 1000))
    L.sh("tc", "-n", lab.wire, "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1", "r2q",
         "10")
    L.sh("tc", "-n", lab.wire, "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate,
         "ceil", rate, "burst", burst, "cburst", burst, "quantum", quantum)
    L.sh("tc", "-n", lab.wire, "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit",
         lab.fifo_bytes)


def drops(lab, ns, dev):
    return O.qdisc_counters(lab.qdisc_stats(ns, dev))[0]


def run(lab, arm, direction, rep, a):
    chain = "aiqos" if arm == "aiqos" else "plain"
    tag = f"{arm}-{direction}-r{rep}"
    pods, procs, agent = [], [], None
    lab.reset_uplink()
    res = {"arm": arm, "rep": rep}
    try:
        if arm == "aiqos":
            cfg = {"uplink": L.UPLINK, "uplinkRate": f"{lab.rate_mbit}mbit", "mixedHoldSeconds": 2,
                   "debounceMs": 200, "driftRepairSeconds": 0}
            if direction == "download":
                cfg["downlinkRate"] = a.downlink_rate or f"{lab.rate_mbit}mbit"
            if a.floor is not None:
                cfg["trainingFloor"] = a.floor
            agent = lab.start_agent(cfg)
        short = {"aiqos": "aq", "fifo": "ff", "idle": "id"}[arm]
        n_train = 0 if arm == "idle" else 2
        train = [lab.add_pod(f"{short}{rep}{direction[0]}t{k}", "training", chain) for k in range(n_train)]
        inf = lab.add_pod(f"{short}{rep}{direction[0]}i0", "inference", chain)
        pods = train + [inf]
        if agent is not None:
            agent.wait_mode("mixed")
            time.sleep(0.5)
            if a.leaf:
                h = a.leaf_parent.split(":")[1] + ":"
                L.sh("tc", "-n", lab.node, "qdisc", "del", "dev", a.leaf_dev, "parent", a.leaf_parent, "handle", h)
                L.sh("tc", "-n", lab.node, "qdisc", "add", "dev", a.leaf_dev, "parent", a.leaf_parent, "handle", h,
                     *a.leaf.split())
        node_dev = L.UPLINK
        wire_dev = L.WIRE_OUT if direction == "egress" else L.WIRE_IN
        d0 = (drops(lab, lab.wire, wire_dev), drops(lab, lab.node, node_dev))
        secs = a.warm + a.duration + 1
        for k, p in enumerate(train):
            argv = O.iperf_argv(p, L.IPERF_PORT0 + k, "cubic", secs, 2)
            if direction == "download":
                argv.insert(argv.index("-J"), "-R")
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        out = os.path.join(lab.tmp, f"lg-{tag}.json")
        common = ["--rate", a.rate, "--duration", f"{a.duration:.1f}", "--conns", 8, "--req", 64, "--resp", a.resp,
                  "--warmup", "1", "--cc", "cubic", "--label", tag, "--out", out]
        srv = None
        if direction == "egress":
            srv = lab.spawn(f"srv-{tag}", inf.exec(*L.rt_argv(), lab.loadgen, "server", "--listen", f"{inf.ip}:{PROBE_PORT}",
                                                   "--cc", "cubic"))
            time.sleep(0.3)
            client = L.nsexec(lab.fabric, *L.rt_argv(), lab.loadgen, "client", "--connect", f"{inf.ip}:{PROBE_PORT}", *common)
        else:
            client = inf.exec(*L.rt_argv(), lab.loadgen, "client", "--connect", f"{lab.server_ip}:{L.LOADGEN_PORT}", *common)
        time.sleep(a.warm)
        lg = subprocess.run([str(x) for x in client], capture_output=True, text=True, timeout=a.duration + 60)
        if srv is not None:
            lab.stop_proc(srv)
        gp = 0
        for k, p in enumerate(procs):
            o, _ = p.communicate(timeout=secs + 30)
            d = json.loads(o)
            gp += d["end"]["sum_received"]["bits_per_second"]
        with open(out) as f:
            d = json.load(f)
        lat = d["latency_us"]
        res.update(p50=lat["p50"] / 1e3, p99=lat["p99"] / 1e3, n=lat["count"], errors=d["errors"],
                   incomplete=d["incomplete"], train_mbit=gp / 1e6,
                   wire_drops=drops(lab, lab.wire, wire_dev) - d0[0], node_drops=drops(lab, lab.node, node_dev) - d0[1],
                   rc=lg.returncode)
        if agent is not None:
            res["tc"] = lab.tc_text(lab.node, node_dev)
            if direction == "download":
                res["tc_ifb"] = lab.tc_text(lab.node, "aiqos-ifb0")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in reversed(pods):
            try:
                lab.del_pod(p)
            except L.LabError as e:
                print(f"  warning: {e}", file=sys.stderr)
        if agent is not None:
            lab.stop_agent()
        lab.reset_uplink()
    return res


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--direction", default="egress", choices=["egress", "download"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--arms", default="fifo,aiqos")
    ap.add_argument("--leaf", default="", help="replace a leaf of the agent's tree (drift repair off)")
    ap.add_argument("--leaf-dev", default=L.UPLINK)
    ap.add_argument("--leaf-parent", default="1:10")
    ap.add_argument("--downlink-rate", default="", help="downlinkRate of the aiqos arm (default: the wire's rate)")
    ap.add_argument("--floor", type=float, default=None, help="trainingFloor of the aiqos arm")
    ap.add_argument("--resp", type=int, default=262144)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warm", type=float, default=3)
    ap.add_argument("--tc", action="store_true", help="print the node's tc -s of the last aiqos run")
    a = ap.parse_args(argv)
    arms = a.arms.split(",")
    L.install_signal_teardown()
    rows = []
    with L.Lab(a.build) as lab:
        if a.direction == "download":
            set_down_bottleneck(lab, True)
        last = None
        for rep in range(a.reps):
            for arm in arms:
                r = run(lab, arm, a.direction, rep, a)
                rows.append(r)
                last = r if "tc" in r else last
                print(f"{a.direction} {arm:5} r{rep}: p50 {r['p50']:.1f} ms p99 {r['p99']:.1f} ms n {r['n']} "
                      f"err {r['errors']} inc {r['incomplete']} train {r['train_mbit']:.0f} Mbit/s "
                      f"drops wire {r['wire_drops']} node {r['node_drops']}", flush=True)
        if a.tc and last:
            print(last["tc"])
            print(last.get("tc_ifb", ""))
    for arm in arms:
        rs = [r for r in rows if r["arm"] == arm]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"SUMMARY {a.direction} {arm}: p99 median {med('p99'):.1f} ms (range {min(r['p99'] for r in rs):.1f}-"
              f"{max(r['p99'] for r in rs):.1f}), p50 {med('p50'):.1f} ms, errors+incomplete "
              f"{sum(r['errors'] + r['incomplete'] for r in rs)}, training {med('train_mbit'):.0f} Mbit/s, "
              f"node drops {med('node_drops'):.0f}, wire drops {med('wire_drops'):.0f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
