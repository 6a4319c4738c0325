#!/usr/bin/env python3
"""linerate.py — the line-rate benchmark (P6 of docs/benchmarks.md): does aiqos
tax a fast, multi-queue uplink that is not a bottleneck?

    pod netns (x3) --veth-- node netns --up0 (veth, 4 tx queues)-- fabric netns (iperf3 servers)

No shaper anywhere: the 2 CPUs are the limit. Traffic: 2 training pods x 2
TCP flows (bulk, measured) + 1 inference pod (iperf3 at a modest rate).
Arms: the default layout (the veth's noqueue, no agent) and aiqos-agent in
each mode (the mode follows which pods are annotated) without and with a
configured uplinkRate of RATE, above what the lab reaches (the operator asked
for a shaper: EDT where the kernel has fq, else HTB on an ifb behind a gate).
Two uplinks, each with its own default arm: `noqueue` (the veth as the
kernel makes it, and as a bond or VLAN is: aiqos leaves it unless a rate is
configured) and `mq` (the same veth given `mq` with the kernel's default child
per tx queue: what a multi-queue NIC has, which aiqos keeps and grafts).
Arms ending in ":down" run the other direction: the pods download (iperf3 -R)
through the uplink's ingress, which a configured rate shapes on the ifb
(the download tree), each next to a default run that downloads too
("default:down"). Optional per-pod sysctl arms (--sysctl-arms) measure the training profile's
settings one at a time on the training pods, without the agent. Which arm
runs on which uplink: UPLINK_ARMS (--arms runs the named ones on both). Arms are
interleaved: every rep visits every arm in a fresh random order, each run
next to a run of the default layout (ABBA), >= 3 reps; medians and ranges;
ratios against the adjacent default run. Per arm: training goodput (receiver side), CPU
sys+softirq seconds (all CPUs, /proc/stat) and the efficiency Gbit/s per
CPU-second, each as a ratio to the default arm of the same rep.

    linerate.py [--build DIR] [--reps N] [--seconds S] [--json OUT] [--markdown OUT] [--sysctl-arms]
                [--uplinks noqueue,mq] [--arms A,B]

Everything made here carries the prefix aqt-lr-<tag>- and is removed at exit
(also on SIGINT/SIGTERM). Root. Needs iperf3."""

import argparse
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import lab as lablib  # noqa: E402  (FakeApi and Agent of the P4 lab)

QUEUES = 4
PORT0 = 5301
NODE_IP, FAB_IP = "10.93.0.1", "10.93.0.2"
POD_NET = "10.94.0"
# every sender's congestion control (the pods upload, the fabric serves the
# downloads); a netns other than the host's may only make it its default if
# the host allows it (lab.allow_ccs, restored at teardown)
CC = "cubic"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# the pods: (name, role); the arms annotate some of them
PODS = (("train0", "training"), ("train1", "training"), ("infer0", "inference"))

# the configured rate of the shaped arms: a link that is not the bottleneck
# (the top of GPU nodes' 100-400 Gbit/s frontend NICs). Cubic senders reach
# ~125 Gbit/s on this lab's veths: a 100gbit shaper binds there, and what it
# shows is shaping, not its cost
RATE = "400gbit"
AGENT_ARMS = {
    # arm: (classes annotated, uplinkRate or None)
    "training": ({"training"}, None),
    "inference": ({"inference"}, None),
    "mixed": ({"training", "inference"}, None),
    f"training@{RATE}": ({"training"}, RATE),
    f"inference@{RATE}": ({"inference"}, RATE),
    f"mixed@{RATE}": ({"training", "inference"}, RATE),
}
# the download direction: an agent arm's name + DOWN; the pods download (iperf3 -R)
DOWN = ":down"
DOWN_ARMS = (f"training@{RATE}" + DOWN, f"mixed@{RATE}" + DOWN)
# the training profile's sysctls, one at a time (per-pod tuning, docs/design.md §2);
# 64 MiB buffers: what the profile set until this measurement dropped it
SYSCTL_ARMS = {
    "sysctl:tcp_ecn=1": [("net.ipv4.tcp_ecn", "1")],
    "sysctl:cc=bbr": [("net.ipv4.tcp_congestion_control", "bbr")],
    "sysctl:rmem/wmem 64MiB": [("net.ipv4.tcp_rmem", "4096 131072 67108864"),
                               ("net.ipv4.tcp_wmem", "4096 16384 67108864")],
}
# the uplink's layout before aiqos: the veth's noqueue, or a NIC's mq
UPLINKS = ("noqueue", "mq")
# the arms each uplink runs by default: on noqueue every unshaped mode plans
# the same nothing (mixed stands for them) and the per-pod rows run there; on
# mq every mode has a layout of its own; the shaper (either root stays: EDT, or the gated HTB)
# against both defaults in mixed mode, and per mode against noqueue; the
# download tree (on its ifb, whatever the uplink's root) on noqueue
UPLINK_ARMS = {
    "noqueue": ("mixed", f"training@{RATE}", f"inference@{RATE}", f"mixed@{RATE}", *DOWN_ARMS, *SYSCTL_ARMS),
    "mq": ("training", "inference", "mixed", f"mixed@{RATE}"),
}


def is_down(arm):
    return arm.endswith(DOWN)


def partner(arm):
    """The default arm an arm's run is paired with: the same direction."""
    return "default" + (DOWN if is_down(arm) else "")


def sh(*argv, check=True, timeout=60):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {p.returncode}: {p.stderr.strip()[:400]}")
    return p


def nsexec(ns, *argv):
    return ["ip", "netns", "exec", ns, *argv]


def cpu_sys_softirq():
    with open("/proc/stat") as f:
        tok = f.readline().split()
    # cpu user nice system idle iowait irq softirq ...
    return (int(tok[3]) + int(tok[6]) + int(tok[7])) / CLK_TCK


class LineLab:
    """The netns topology, the iperf3 servers, and the minimal "lab" the
    P4 lab's FakeApi/Agent expect (node, tmp, spawn, stop_proc, log_tail,
    note, bin_dir, state_dir, agent_socket)."""

    def __init__(self, build, tag=None):
        self.tag = tag or secrets.token_hex(2)
        self.prefix = f"aqt-lr-{self.tag}-"
        self.node = self.prefix + "node"
        self.fab = self.prefix + "fab"
        self.tmp = tempfile.mkdtemp(prefix=self.prefix)
        self.bin_dir = os.path.join(os.path.abspath(build), "bin")
        self.procs = {}
        self.notes = []
        self.pods = {}
        self.netnses = []
        self.cc_change = None
        self.ccs = {}
        os.makedirs(os.path.join(self.tmp, "run"), exist_ok=True)

    # -- the interface lab.FakeApi / lab.Agent use
    @property
    def state_dir(self):
        return os.path.join(self.tmp, "state")

    @property
    def agent_socket(self):
        return os.path.join(self.tmp, "run", "agent.sock")

    def note(self, text):
        self.notes.append(text)

    def spawn(self, name, argv, stdout=None):
        log = open(os.path.join(self.tmp, f"{name}.log"), "ab")
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout or log, stderr=log,
                                 start_new_session=True)
        finally:
            log.close()
        self.procs[f"{name}.{p.pid}"] = p
        return p

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
        for k, v in list(self.procs.items()):
            if v is p:
                del self.procs[k]

    def log_tail(self, name, n=3000):
        path = os.path.join(self.tmp, f"{name}.log")
        if not os.path.exists(path):
            return f"(no {name}.log)"
        with open(path, errors="replace") as f:
            return f.read()[-n:]

    # -- topology
    def netns(self, name):
        sh("ip", "netns", "add", name)
        self.netnses.append(name)
        sh(*nsexec(name, "ip", "link", "set", "lo", "up"))

    def up(self):
        self.netns(self.node)
        self.netns(self.fab)
        q = str(QUEUES)
        sh("ip", "link", "add", self.prefix + "u", "numtxqueues", q, "numrxqueues", q, "netns", self.node, "type",
           "veth", "peer", "name", self.prefix + "f", "numtxqueues", q, "numrxqueues", q, "netns", self.fab)
        sh(*nsexec(self.node, "ip", "link", "set", self.prefix + "u", "name", "up0"))
        sh(*nsexec(self.fab, "ip", "link", "set", self.prefix + "f", "name", "fab0"))
        sh(*nsexec(self.node, "ip", "addr", "add", f"{NODE_IP}/24", "dev", "up0"))
        sh(*nsexec(self.fab, "ip", "addr", "add", f"{FAB_IP}/24", "dev", "fab0"))
        sh(*nsexec(self.node, "ip", "link", "set", "up0", "up"))
        sh(*nsexec(self.fab, "ip", "link", "set", "fab0", "up"))
        sh(*nsexec(self.node, "ip", "route", "add", "default", "via", FAB_IP))
        sh(*nsexec(self.fab, "ip", "route", "add", f"{POD_NET}.0/24", "via", NODE_IP))
        sh(*nsexec(self.node, "sysctl", "-qw", "net.ipv4.ip_forward=1"))
        self.cc_change = lablib.allow_ccs([CC])
        if self.cc_change:
            self.note(f"host tcp_allowed_congestion_control: {' '.join(self.cc_change[1])} (restored at teardown)")
        self.set_cc(self.fab)
        for i, (name, role) in enumerate(PODS):
            ns = self.prefix + name
            self.netns(ns)
            host = f"lrp{self.tag}{i}"
            ip = f"{POD_NET}.{10 + i}"
            sh("ip", "link", "add", host, "netns", self.node, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh(*nsexec(ns, "ip", "addr", "add", f"{ip}/32", "dev", "eth0"))
            sh(*nsexec(ns, "ip", "link", "set", "eth0", "up"))
            sh(*nsexec(self.node, "ip", "link", "set", host, "up"))
            sh(*nsexec(ns, "ip", "route", "add", NODE_IP, "dev", "eth0", "scope", "link"))
            sh(*nsexec(ns, "ip", "route", "add", "default", "via", NODE_IP, "dev", "eth0"))
            sh(*nsexec(self.node, "ip", "route", "add", f"{ip}/32", "dev", host))
            sh(*nsexec(self.node, "sysctl", "-qw", f"net.ipv4.conf.{host}.proxy_arp=1"))
            self.set_cc(ns)
            self.pods[name] = {"ns": ns, "ip": ip, "role": role, "uid": f"uid-lr-{name}-{self.tag}"}
        for k in range(len(PODS)):
            self.spawn(f"iperf3-s{k}", nsexec(self.fab, "iperf3", "-s", "-p", str(PORT0 + k)))
        time.sleep(0.5)
        return self

    def set_cc(self, ns):
        """CC for new sockets of ns (FACTS: BBR is the host's default),
        read back into self.ccs (the results' meta says what ran)."""
        sh(*nsexec(ns, "sysctl", "-qw", f"net.ipv4.tcp_congestion_control={CC}"))
        self.ccs[ns.removeprefix(self.prefix)] = sh(*nsexec(ns, "sysctl", "-n",
                                                             "net.ipv4.tcp_congestion_control")).stdout.strip()

    def sysctl_pods(self, role, settings):
        for p in self.pods.values():
            if p["role"] == role:
                for k, v in settings:
                    sh(*nsexec(p["ns"], "sysctl", "-qw", f"{k}={v}"))

    def save_sysctls(self, role, keys):
        out = {}
        for p in self.pods.values():
            if p["role"] == role:
                for k in keys:
                    out[(p["ns"], k)] = sh(*nsexec(p["ns"], "sysctl", "-n", k)).stdout.strip()
        return out

    def restore_sysctls(self, saved):
        for (ns, k), v in saved.items():
            sh(*nsexec(ns, "sysctl", "-qw", f"{k}={v}"))

    def set_uplink(self, kind):
        """The uplink's original layout: noqueue (the veth's own) or mq with
        the kernel's default child per tx queue (a NIC's)."""
        if kind == "mq":
            sh(*nsexec(self.node, "tc", "qdisc", "replace", "dev", "up0", "root", "mq"))
        else:
            sh(*nsexec(self.node, "tc", "qdisc", "del", "dev", "up0", "root"), check=False)
        root = self.uplink_tc().splitlines()[0].split()[1]
        if root != kind:
            raise RuntimeError(f"uplink root {root}, want {kind}: {self.uplink_tc()}")

    def uplink_tc(self):
        """up0's qdiscs, and the programs on its tcx hooks where the kernel
        has tcx (aiqos's classifier is a tcx link there, not a clsact filter;
        listed by the Cilium stand-in's query, `make standin`)."""
        out = sh(*nsexec(self.node, "tc", "qdisc", "show", "dev", "up0")).stdout
        tool = os.path.join(os.path.dirname(self.bin_dir), "test", "cilium-standin")
        if os.access(tool, os.X_OK):
            q = sh(*nsexec(self.node, tool, "query", "up0"), check=False).stdout
            out += "".join(f"tcx {line}\n" for line in q.splitlines())
        return out

    def run_traffic(self, seconds, down=False):
        """Training goodput (bit/s, receiver side) and CPU seconds; down:
        the pods receive (iperf3 -R)."""
        procs = []
        k = 0
        for name, role in PODS:
            p = self.pods[name]
            argv = ["iperf3", "-c", FAB_IP, "-p", str(PORT0 + k), "-t", str(seconds), "-J", "-B", p["ip"]]
            argv += ["-R"] if down else []
            argv += ["-P", "2"] if role == "training" else ["-b", "200M"]
            procs.append((role, subprocess.Popen(nsexec(p["ns"], *argv), stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True)))
            k += 1
        c0, t0 = cpu_sys_softirq(), time.monotonic()
        outs = [(role, pr.communicate(timeout=seconds + 30)) for role, pr in procs]
        c1, t1 = cpu_sys_softirq(), time.monotonic()
        train = inf = cpu = 0.0
        for role, (out, err) in outs:
            try:
                end = json.loads(out)["end"]
                bps = end["sum_received"]["bits_per_second"]
                u = end["cpu_utilization_percent"]
            except (ValueError, KeyError) as e:
                raise RuntimeError(f"iperf3 ({role}) gave no result: {err.strip()[:300]} {out[:300]}") from e
            # the endpoints' own user+sys (the forwarding softirq runs in the
            # sender's context and is accounted to it: no IRQ_TIME_ACCOUNTING)
            cpu += (u["host_total"] + u["remote_total"]) / 100.0 * seconds
            if role == "training":
                train += bps
            else:
                inf += bps
        return {"train_bps": train, "inf_bps": inf, "cpu_s": cpu, "cpu_s_machine": c1 - c0, "wall_s": t1 - t0,
                "loadavg": os.getloadavg()[0]}

    def teardown(self):
        for p in list(self.procs.values()):
            with contextlib.suppress(Exception):
                self.stop_proc(p)
        for ns in reversed(self.netnses):
            sh("ip", "netns", "del", ns, check=False)
        self.netnses = []
        lablib.restore_ccs(self.cc_change)
        self.cc_change = None
        shutil.rmtree(self.tmp, ignore_errors=True)


def run_agent_arm(lab, api, arm, seconds):
    classes, rate = AGENT_ARMS[arm.removesuffix(DOWN)]
    cfg = {"debounceMs": 50, "mixedHoldSeconds": 1, "uplink": "up0"}
    if rate:
        cfg["uplinkRate"] = rate
    agent = lablib.Agent(lab, api)
    agent.start(cfg)
    created = []
    try:
        for name, role in PODS:
            p = lab.pods[name]
            ann = {"ai.workload": role} if role in classes else {}
            api.call("POST", "/pods", {"namespace": lablib.K8S_NAMESPACE, "name": name, "uid": p["uid"],
                                       "node": lablib.NODE_NAME, "annotations": ann, "phase": "Running",
                                       "podIP": p["ip"], "podIPs": [p["ip"]]})
            created.append(name)
        want = "mixed" if len(classes) == 2 else next(iter(classes))
        agent.wait_mode(want)
        time.sleep(0.3)  # the tree applied after the mode flips
        st = agent.status()
        layout = lab.uplink_tc()
        res = lab.run_traffic(seconds, down=is_down(arm))
        res["shape"] = (st.get("uplink") or {}).get("shape")
        if is_down(arm):
            shaped = ((st.get("uplink") or {}).get("downlink") or {}).get("shaped")
            res["shape"] = "htb (ifb)" if shaped else "none"
        res["layout"] = layout
        return res
    finally:
        for name in created:
            with contextlib.suppress(Exception):
                api.call("DELETE", f"/pods/{lablib.K8S_NAMESPACE}/{name}")
        agent.stop()
        # --cleanup restored the original: the next arm starts from it
        with contextlib.suppress(Exception):
            shutil.rmtree(lab.state_dir)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def summarize(results, arms, uplinks=UPLINKS):
    """Per uplink and arm: medians and ranges of goodput, CPU/s, efficiency and ratios to the same rep's default."""
    by_pair = {}
    for r in results:
        by_pair.setdefault(r["pair"], {})[r["arm"]] = r
    rows = []
    for up, arm in [(u, a) for u in uplinks for a in arms]:
        vals = [r for r in results if r["arm"] == arm and r.get("uplink", UPLINKS[0]) == up]
        if not vals:
            continue
        good = [v["train_bps"] / 1e9 for v in vals]
        cpu = [v["cpu_s"] / v["wall_s"] for v in vals]
        eff = [v["train_bps"] / 1e9 / (v["cpu_s"] / v["wall_s"]) if v["cpu_s"] else 0.0 for v in vals]
        g_ratio, c_ratio = [], []
        for v in vals:
            d = by_pair.get(v["pair"], {}).get(partner(v["arm"]))
            if v["arm"] == partner(v["arm"]):
                d = v
            if d and d["train_bps"] and v["train_bps"]:
                g_ratio.append(v["train_bps"] / d["train_bps"])
                cpg_v = v["cpu_s"] / (v["train_bps"] * v["wall_s"])
                cpg_d = d["cpu_s"] / (d["train_bps"] * d["wall_s"])
                c_ratio.append(cpg_v / cpg_d)
        rows.append({"uplink": up, "arm": arm, "n": len(vals), "shape": vals[0].get("shape") or "-",
                     "goodput_gbit": [med(good), min(good), max(good)],
                     "cpu_per_s": [med(cpu), min(cpu), max(cpu)],
                     "gbit_per_cpu_s": [med(eff), min(eff), max(eff)],
                     "goodput_ratio": [med(g_ratio), min(g_ratio, default=float("nan")),
                                       max(g_ratio, default=float("nan"))],
                     "cpu_per_gbit_ratio": [med(c_ratio), min(c_ratio, default=float("nan")),
                                            max(c_ratio, default=float("nan"))]})
    return rows


def verdict(row):
    """The acceptance: unshaped >= 95 % goodput, CPU/Gbit within 10 %; at RATE (shaped) >= 90 %, within 20 %."""
    if row["arm"] == partner(row["arm"]) or row["arm"].startswith("sysctl:"):
        return ""
    if row["shape"] in ("none", "noqueue"):
        return "= default (nothing changed: the spread is the noise)"
    g, c = row["goodput_ratio"][0], row["cpu_per_gbit_ratio"][0]
    shaped = "@" in row["arm"]
    ok = g >= (0.90 if shaped else 0.95) and c <= (1.20 if shaped else 1.10)
    return "ok" if ok else "MISS"


def markdown(rows, meta):
    at = f" at {meta['commit']}" if meta.get("commit") else ""
    out = [f"Line rate ({meta['cmd']}{at}, kernel {meta['kernel']}): a {QUEUES}-queue veth uplink, no bottleneck, "
           f"2 training pods x 2 flows + 1 inference pod at 200 Mbit/s, {meta['cc']}; {meta['reps']} interleaved reps of "
           f"{meta['seconds']} s; medians (min-max); ratios to the adjacent default run of the same uplink; load "
           f"average during the run {meta['load']:.1f} (other work on the machine). Uplink before aiqos: "
           "`noqueue` (the veth as the kernel makes it, like a bond or VLAN) or `mq` (the same veth with mq and the "
           "kernel's default child per tx queue, as a multi-queue NIC has). Arms ending in `:down`: the pods download "
           "(iperf3 -R) through the download tree a configured rate plans (its ifb), next to a default run that "
           "downloads too (`default:down`).", "",
           "| uplink before | arm | uplink shape | training goodput Gbit/s | vs default | endpoint CPU-s /s | "
           "Gbit/s per CPU-s | CPU per Gbit vs default | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]

    def f3(v, fmt="{:.2f}"):
        return f"{fmt.format(v[0])} ({fmt.format(v[1])}-{fmt.format(v[2])})"
    for r in rows:
        out.append(f"| {r['uplink']} | {r['arm']} | {r['shape']} | {f3(r['goodput_gbit'])} | {f3(r['goodput_ratio'])} | "
                   f"{f3(r['cpu_per_s'])} | {f3(r['gbit_per_cpu_s'])} | {f3(r['cpu_per_gbit_ratio'])} | "
                   f"{verdict(r)} |")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--sysctl-arms", action="store_true", help="also the per-pod sysctl arms")
    ap.add_argument("--arms", help="comma-separated subset of arms (default: all)")
    ap.add_argument("--uplinks", default=",".join(UPLINKS), help="comma-separated: noqueue, mq (default: both)")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("linerate: needs root (network namespaces)", file=sys.stderr)
        return 77
    if not shutil.which("iperf3"):
        print("linerate: iperf3 missing (hack/install-deps.sh)", file=sys.stderr)
        return 77
    arms = ["default", *AGENT_ARMS, "default" + DOWN, *DOWN_ARMS]
    if a.sysctl_arms:
        arms += list(SYSCTL_ARMS)
    if a.arms:
        want = a.arms.split(",")
        arms = [x for x in arms if x in want or (x == partner(x) and any(partner(w) == x for w in want))]
    uplinks = [u for u in a.uplinks.split(",") if u]
    if not uplinks or any(u not in UPLINKS for u in uplinks):
        print(f"linerate: --uplinks {a.uplinks!r}: each one of {', '.join(UPLINKS)}", file=sys.stderr)
        return 2
    rnd = random.Random(a.seed)
    lab = LineLab(a.build)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    results = []
    try:
        lab.up()
        api = lablib.FakeApi(lab).start()
        pair = 0
        for rep in range(a.reps):
            # every arm next to its own default run of the same uplink (ABBA
            # order), so slow drifts of a shared machine's load cancel in the ratio
            runs = []
            for up in rnd.sample(uplinks, len(uplinks)):
                order = [x for x in arms if x != partner(x) and (a.arms or x in UPLINK_ARMS[up])]
                rnd.shuffle(order)
                for arm in order:
                    runs += [(up, partner(arm), pair), (up, arm, pair)] if pair % 2 == 0 else \
                        [(up, arm, pair), (up, partner(arm), pair)]
                    pair += 1
            for up, arm, pr in runs:
                lab.set_uplink(up)
                if arm == partner(arm):
                    res = lab.run_traffic(a.seconds, down=is_down(arm))
                    res["shape"] = up
                elif arm in SYSCTL_ARMS:
                    keys = [k for k, _ in SYSCTL_ARMS[arm]]
                    saved = lab.save_sysctls("training", keys)
                    lab.sysctl_pods("training", SYSCTL_ARMS[arm])
                    try:
                        res = lab.run_traffic(a.seconds)
                    finally:
                        lab.restore_sysctls(saved)
                    res["shape"] = up
                else:
                    res = run_agent_arm(lab, api, arm, a.seconds)
                res.update(arm=arm, rep=rep, pair=pr, uplink=up)
                results.append(res)
                print(f"linerate: rep {rep} {up:7s} {arm:22s} {res['train_bps'] / 1e9:6.2f} Gbit/s  "
                      f"cpu {res['cpu_s'] / res['wall_s']:.2f}/s  shape {res.get('shape')}", file=sys.stderr,
                      flush=True)
    finally:
        lab.teardown()
    rows = summarize(results, arms, uplinks)
    meta = {"cmd": "make bench-linerate", "reps": a.reps, "seconds": a.seconds, "queues": QUEUES,
            "kernel": os.uname().release, "load": med([r["loadavg"] for r in results]),
            "cc": "/".join(sorted(set(lab.ccs.values()))), "ccs": lab.ccs, "commit": lablib.git_commit()}
    md = markdown(rows, meta)
    print(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "rows": rows,
                       "results": [{k: v for k, v in r.items() if k != "layout"} for r in results],
                       "layouts": {f"{r['uplink']}:{r['arm']}": r.get("layout") for r in results
                                   if r.get("layout")}}, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    failed = sum(1 for r in rows if verdict(r) == "MISS")
    passed = sum(1 for r in rows if verdict(r) == "ok" or verdict(r).startswith("="))
    print(f"{passed} passed, {failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
