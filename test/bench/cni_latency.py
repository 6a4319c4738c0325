#!/usr/bin/env python3
"""cni_latency.py — P1 (docs/benchmarks.md): wall time of each CNI exec, aiqos against
the reference `bandwidth` and `tuning` plugins and the exec floor (/bin/true),
on real veths made by ptp + host-local in scratch netns (made once, outside
the timed region). Sequential, and CONC execs at once (one process per
stream, released together by a barrier, so Python's GIL is not measured).
Prints p50/p99 and the ratios the targets are stated in; every figure is
computed from this run. Then where aiqos's own time goes (the phases_us of its
log lines) and the kernel's irreducible share: the same netlink requests and
sysctl writes made in-process on a raw socket (cni_kernel_floor, built by
cni-latency.sh).

usage: cni_latency.py BUILD_DIR   (env: N=200 samples per row, CONC=10,
STATE_PARENT=DIR: aiqos's stateDir in a fresh directory under DIR instead of
the lab's temp dir, e.g. a tmpfs or the filesystem of /var/lib)"""

import json
import multiprocessing as mp
import os
import platform
import re
import secrets
import shutil
import tempfile
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import cni  # noqa: E402

RATE_BPS = 10_000_000
BANDWIDTH = {
    "ingressRate": RATE_BPS,
    "ingressBurst": cni.BURST_CONTAINERD,
    "egressRate": RATE_BPS,
    "egressBurst": cni.BURST_CONTAINERD,
}
TARGET_FLOOR_RATIO = 1.5  # aiqos ADD p50 <= 1.5 x exec floor p50
TARGET_REF_RATIO = 5.0  # reference bandwidth ADD p50 >= 5 x aiqos ADD p50

# case -> (label of the timed ADD (or only) exec, label of the timed DEL or None)
CASES = {
    "floor": ("exec floor (/bin/true)", None),
    "aiqos-version": ("aiqos VERSION (startup only)", None),
    "aiqos": ("aiqos ADD (inference + bw)", "aiqos DEL"),
    "bandwidth": ("reference bandwidth ADD", "reference bandwidth DEL"),
    "tuning": ("reference tuning ADD (1 sysctl)", None),
}


def pct(samples, p):
    """Nearest-rank percentile, in ms, of a list of ns."""
    if not samples:
        return float("nan")
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k] / 1e6


def log_durations(path, offset, end=None):
    """duration_us of the ADD and DEL lines aiqos logged between offset and
    end (its own view of the work, without exec and dynamic linking), and
    the per-phase split of phases_us ("config=12,discover=40,..."), all in
    ns. Empty if none."""
    out = {"ADD": [], "DEL": []}
    phases = {"ADD": {}, "DEL": {}}
    if not os.path.exists(path):
        return out, phases
    with open(path, errors="replace") as f:
        f.seek(offset)
        text = f.read(None if end is None else max(0, end - offset))
    for line in text.splitlines():
        cmd = re.search(r" command=(ADD|DEL) ", line)
        dur = re.search(r" duration_us=([0-9]+)", line)
        if cmd and dur:
            out[cmd.group(1)].append(int(dur.group(1)) * 1000)
            ph = re.search(r' phases_us="?([a-z=0-9,]+)', line)
            for part in (ph.group(1).split(",") if ph else []):
                name, _, us = part.partition("=")
                if us.isdigit():
                    phases[cmd.group(1)].setdefault(name, []).append(int(us) * 1000)
    return out, phases


def file_size(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def timed_run(argv, env, stdin):
    t0 = time.perf_counter_ns()
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    return time.perf_counter_ns() - t0, p


class Bench:
    def __init__(self, build):
        self.plugin = os.path.join(os.path.abspath(build), "bin", "aiqos")
        if not os.access(self.plugin, os.X_OK):
            sys.exit(f"cni-latency: {self.plugin} not built (run make)")
        self.ref = {p: os.path.join(cni.REF_PLUGIN_DIR, p) for p in ("ptp", "host-local", "bandwidth", "tuning")}
        for p, path in self.ref.items():
            if not os.access(path, os.X_OK):
                sys.exit(f"cni-latency: reference plugin {path} missing (Debian containernetworking-plugins)")
        self.n = int(os.environ.get("N", "200"))
        self.conc = int(os.environ.get("CONC", "10"))
        if self.n < 1 or self.conc < 1:
            sys.exit("cni-latency: N and CONC must be >= 1")
        self.lab = cni.Lab(self.plugin, "bench")
        self.base_env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        self.ifb_before = None
        self.pods = []
        self.state_dir = None  # None: the lab's
        if os.environ.get("STATE_PARENT"):
            self.state_dir = tempfile.mkdtemp(prefix="aqt-bench-state-", dir=os.environ["STATE_PARENT"])

    # -- what each exec gets
    def env(self, pod, command, cid):
        e = dict(self.base_env)
        e.update(
            CNI_COMMAND=command,
            CNI_CONTAINERID=cid,
            CNI_NETNS=pod.netns.path,
            CNI_IFNAME="eth0",
            CNI_PATH=f"{os.path.dirname(self.plugin)}:{cni.REF_PLUGIN_DIR}",
            CNI_ARGS=f"IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=p-{cid[:8]};"
            f"K8S_POD_INFRA_CONTAINER_ID={cid}",
        )
        return e

    def stdin_for(self, case, pod):
        if case == "aiqos":
            conf = cni.build_plugin_config(
                self.lab.aiqos_conf(logLevel="info", stateDir=self.state_dir or self.lab.state_dir), "bench",
                "1.0.0", pod.result,
                {"io.kubernetes.cri.pod-annotations": {"ai.workload": "inference"}, "bandwidth": BANDWIDTH},
            )
        elif case == "bandwidth":
            conf = cni.build_plugin_config(
                {"type": "bandwidth", "capabilities": {"bandwidth": True}}, "bench", "1.0.0", pod.result,
                {"bandwidth": BANDWIDTH},
            )
        elif case == "tuning":
            conf = cni.build_plugin_config(
                {"type": "tuning", "sysctl": {"net.ipv4.tcp_ecn": "1"},
                 "dataDir": os.path.join(self.lab.tmp, "tuning")},
                "bench", "1.0.0", pod.result,
            )
        else:
            conf = {"cniVersion": "1.0.0"}
        return json.dumps(conf).encode()

    # -- one sample
    def sample(self, case, pod):
        """Timed exec(s) of one iteration: (add_ns, del_ns or None, [failures])."""
        fails = []
        if case == "floor":
            dt, _ = timed_run(["/bin/true"], self.base_env, b"")
            return dt, None, fails
        if case == "aiqos-version":
            e = dict(self.base_env, CNI_COMMAND="VERSION")
            dt, p = timed_run([self.plugin], e, b'{"cniVersion":"1.0.0"}')
            if p.returncode != 0:
                fails.append((f"{case} ADD", p))
            return dt, None, fails
        binary = self.plugin if case == "aiqos" else self.ref[case]
        cid = secrets.token_hex(32)
        stdin = self.stdin_for(case, pod)
        t_add, p = timed_run([binary], self.env(pod, "ADD", cid), stdin)
        if p.returncode != 0:
            fails.append((f"{case} ADD", p))
        t_del, p = timed_run([binary], self.env(pod, "DEL", cid), stdin)
        if p.returncode != 0:
            fails.append((f"{case} DEL", p))
        if case == "bandwidth":
            # The reference DEL removes its ifb but leaves the TBF/ingress
            # qdiscs on the host veth (the main plugin deletes the veth).
            # The next ADD on the same veth would fail with "file exists":
            # reset the veth outside the timed region, like a fresh pod.
            for q in ("root", "ingress"):
                subprocess.run(["tc", "qdisc", "del", "dev", pod.host_veth_name, q], capture_output=True)
        return t_add, (t_del if CASES[case][1] else None), fails

    # -- runs
    def run_seq(self, case):
        adds, dels, fails = [], [], []
        for _ in range(self.n):
            a, d, f = self.sample(case, self.pods[0])
            adds.append(a)
            if d is not None:
                dels.append(d)
            fails += [(name, p.returncode, p.stdout.decode(errors="replace")[:400]) for name, p in f]
        return adds, dels, fails

    def _worker(self, case, pod, rounds, barrier, q):
        adds, dels, fails = [], [], []
        try:
            for _ in range(rounds):
                barrier.wait(timeout=120)  # every stream execs at the same moment
                a, d, f = self.sample(case, pod)
                adds.append(a)
                if d is not None:
                    dels.append(d)
                fails += [(name, p.returncode, p.stdout.decode(errors="replace")[:400]) for name, p in f]
        except Exception as e:  # noqa: BLE001 - reported by the parent
            fails.append(("worker", -1, repr(e)))
        q.put((adds, dels, fails))

    def run_par(self, case):
        ctx = mp.get_context("fork")
        rounds = max(1, -(-self.n // self.conc))
        barrier = ctx.Barrier(self.conc)
        q = ctx.Queue()
        procs = [ctx.Process(target=self._worker, args=(case, pod, rounds, barrier, q)) for pod in self.pods]
        for p in procs:
            p.start()
        adds, dels, fails = [], [], []
        for _ in procs:
            a, d, f = q.get(timeout=600)
            adds += a
            dels += d
            fails += f
        for p in procs:
            p.join()
        return adds, dels, fails

    # -- leak accounting
    def ifb_devices(self):
        return {
            l["ifname"] for l in cni.links()
            if l.get("linkinfo", {}).get("info_kind") == "ifb" or l["ifname"].startswith("bwp")
        }

    def qdiscs_left(self):
        left = []
        for pod in self.pods:
            h = [q["kind"] for q in cni.tc_qdiscs(None, pod.host_veth_name)]
            p = [q["kind"] for q in cni.tc_qdiscs(pod.netns.name, "eth0")]
            if h != ["noqueue"] or p != ["noqueue"]:
                left.append(f"{pod.host_veth_name}:{h} eth0:{p}")
        return left

    def main(self):
        t0 = time.monotonic()
        for _ in range(self.conc):
            a = self.lab.base_only(version="1.0.0")
            a.add()
            a.host_veth_name = a.host_veth()
            self.pods.append(a)
        self.ifb_before = self.ifb_devices()
        rows, leaks, failures = {}, {}, {}
        self.inproc = None
        self.phases = None
        for case in CASES:
            ifb0 = self.ifb_devices()
            off0 = file_size(self.lab.log_file)
            sa, sd, sf = self.run_seq(case)
            off1 = file_size(self.lab.log_file)
            pa, pd, pf = self.run_par(case)
            if case == "aiqos":
                seq, self.phases = log_durations(self.lab.log_file, off0, off1)
                par, _ = log_durations(self.lab.log_file, off1)
                self.inproc = (seq, par)
            rows[case] = (sa, sd, pa, pd)
            for name, rc, out in sf + pf:
                failures.setdefault(name, []).append((rc, out))
            if case in ("aiqos", "bandwidth", "tuning"):
                # qdiscs left on the still-existing veths: only aiqos DEL is
                # expected to remove them itself (see the bandwidth reset)
                leaks[case] = (sorted(self.ifb_devices() - ifb0), self.qdiscs_left() if case == "aiqos" else None)
        self.report(rows, leaks, failures, time.monotonic() - t0)
        self.report_breakdown()
        aiqos_failed = any(k.startswith("aiqos") or k == "worker" for k in failures)
        return 1 if aiqos_failed or leaks["aiqos"][0] or leaks["aiqos"][1] else 0

    def report(self, rows, leaks, failures, elapsed):
        print(f"# CNI exec latency (DESIGN §6 P1): kernel {platform.release()}, {os.cpu_count()} CPUs, "
              f"N={self.n} per row and mode, {self.conc} concurrent, rate {RATE_BPS // 10**6} Mbit/s both ways, "
              f"{elapsed:.0f} s")
        print(f"# {self.plugin} ({os.path.getsize(self.plugin)} bytes) vs {cni.REF_PLUGIN_DIR}/bandwidth, tuning; "
              f"aiqos stateDir {self.state_dir or self.lab.state_dir}")
        hdr = f"{'exec (wall ms)':34} {'seq p50':>8} {'seq p99':>8} {'par p50':>8} {'par p99':>8} {'fail':>5}"
        print(hdr)
        print("-" * len(hdr))
        for case, (sa, sd, pa, pd) in rows.items():
            add_label, del_label = CASES[case]
            fails = {k: len(v) for k, v in failures.items()}
            fa = fails.get(f"{case} ADD", 0)
            print(f"{add_label:34} {pct(sa, 50):8.2f} {pct(sa, 99):8.2f} {pct(pa, 50):8.2f} {pct(pa, 99):8.2f} {fa:5d}")
            if del_label:
                fd = fails.get(f"{case} DEL", 0)
                print(f"{del_label:34} {pct(sd, 50):8.2f} {pct(sd, 99):8.2f} {pct(pd, 50):8.2f} {pct(pd, 99):8.2f} "
                      f"{fd:5d}")
        if self.inproc and self.inproc[0]["ADD"]:
            s, p = self.inproc
            for cmd in ("ADD", "DEL"):
                label = f"  aiqos {cmd}, in-process (its log)"
                print(f"{label:34} {pct(s[cmd], 50):8.2f} {pct(s[cmd], 99):8.2f} {pct(p[cmd], 50):8.2f} "
                      f"{pct(p[cmd], 99):8.2f}")
        print()
        for mode, i in (("sequential", 0), (f"{self.conc} concurrent", 2)):
            floor = pct(rows["floor"][i], 50)
            aiqos = pct(rows["aiqos"][i], 50)
            ref = pct(rows["bandwidth"][i], 50)
            r1, r2 = aiqos / floor, ref / aiqos
            print(f"{mode:14}: aiqos ADD p50 / exec floor p50 = {r1:.2f} "
                  f"(target <= {TARGET_FLOOR_RATIO}: {'met' if r1 <= TARGET_FLOOR_RATIO else 'MISSED'}); "
                  f"reference bandwidth ADD p50 / aiqos ADD p50 = {r2:.2f} "
                  f"(target >= {TARGET_REF_RATIO:.0f}: {'met' if r2 >= TARGET_REF_RATIO else 'MISSED'})")
        print()
        for case, (ifbs, qd) in leaks.items():
            line = f"leaks after {case} DEL: {len(ifbs)} ifb/bwp devices{(' ' + ','.join(ifbs)) if ifbs else ''}"
            if qd is not None:
                line += f"; {len(qd)} live veths with qdiscs left{(' ' + '; '.join(qd)) if qd else ''}"
            print(line)
        for name, lst in failures.items():
            rc, out = lst[0]
            print(f"{len(lst)} failed {name} execs; first: exit {rc}: {out.strip()}")

    def report_breakdown(self):
        """aiqos's phases (sequential runs) and the kernel floor next to them."""
        if self.phases and any(self.phases.values()):
            print()
            print("# where aiqos ADD/DEL spend their in-process time (p50 us per phase, sequential; "
                  "config = parsing from stdin read to the verb)")
            for cmd in ("ADD", "DEL"):
                ph = self.phases.get(cmd, {})
                print(f"  {cmd}: " + ", ".join(f"{k} {pct(v, 50) * 1000:.0f}" for k, v in ph.items()))
        floor = os.path.join(os.path.dirname(os.path.dirname(self.plugin)), "bench", "cni_kernel_floor")
        if not os.access(floor, os.X_OK) or not self.pods:
            return
        pod = self.pods[0]
        p = subprocess.run([floor, pod.netns.path, "eth0", pod.host_veth_name, str(min(self.n, 300))],
                           capture_output=True, text=True)
        print()
        if p.returncode != 0:
            print(f"# kernel floor: failed (exit {p.returncode}): {p.stderr.strip()[:300]}")
            return
        print(p.stdout.rstrip())

    def cleanup(self):
        # bwp* ifbs the reference plugin leaked during this run are removed
        # (they would make its later ADDs fail with "file exists")
        if self.ifb_before is not None:
            for name in self.ifb_devices() - self.ifb_before:
                if name.startswith("bwp"):
                    subprocess.run(["ip", "link", "del", name], capture_output=True)
        if self.state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        self.lab.cleanup()


def main():
    if os.geteuid() != 0:
        sys.exit("cni-latency: needs root (network namespaces, qdiscs)")
    b = Bench(sys.argv[1] if len(sys.argv) > 1 else "build")
    try:
        return b.main()
    finally:
        b.cleanup()


if __name__ == "__main__":
    sys.exit(main())
