"""outcome.py — the network-outcome arms of P4 (docs/benchmarks.md) on the lab of
lab.py: training pods run iperf3 (congestion control set explicitly), an
inference pod runs the open-loop load generator (loadgen.c) against the
fabric, and each arm decides what queues where:

  idle       inference alone (the unloaded baseline of each repetition)
  fifo       default deep FIFO: nothing on the node uplink, the bottleneck's
             deep byte FIFO takes the queue
  bandwidth  the reference `bandwidth` plugin on the training pods (TBF, 25 ms
             queue), containerd's burst (2^32-1 bits), over the deep FIFO
  aiqos      ptp + aiqos plugin + aiqos-agent (mixed mode, uplinkRate = the
             bottleneck rate) over the same deep FIFO
  fq_codel   fq_codel everywhere (bottleneck leaf, node uplink, pods): full
             kernels only; skipped with the kernel's answer elsewhere

run_arm() returns one flat result dict; run_dynamic() the per-100-ms
timeline of the re-tune experiment."""

import json
import os
import signal
import subprocess
import threading
import time

import lab as L

ARMS = {
    "idle": {"chain": "plain", "training": False, "title": "idle (no training)"},
    "fifo": {"chain": "plain", "training": True, "title": "default deep FIFO"},
    "bandwidth": {"chain": "bandwidth", "training": True, "title": "reference bandwidth plugin"},
    "aiqos": {"chain": "aiqos", "training": True, "agent": True, "title": "aiqos (plugin + agent)"},
    "fq_codel": {"chain": "plain", "training": True, "leaf": "fq_codel", "aqm": "fq_codel",
                 "title": "fq_codel everywhere"},
    # exploration arm (not in the matrix by default): aiqos with extra
    # sysctls on the training pods after their ADD, from BENCH_X_SYSCTLS
    # ("key=value;key=value"), and in download cells the agent's
    # downlinkRate from BENCH_X_DOWNLINK_MBIT: a per-pod setting or a
    # shaping margin against aiqos, interleaved in the same run
    "aiqos_x": {"chain": "aiqos", "training": True, "agent": True, "title": "aiqos + BENCH_X_SYSCTLS",
                "train_sysctls_env": "BENCH_X_SYSCTLS"},
    # A/B arm (not in the matrix by default): aiqos as another build made it
    # (plugin and agent from $BENCH_BASE_BUILD/bin, e.g. a worktree of an
    # earlier commit built with `make BUILD=...`), interleaved with "aiqos"
    # in the same run: a change's effect within the run's own spread
    "aiqos_base": {"chain": "aiqos", "training": True, "agent": True, "bins_env": "BENCH_BASE_BUILD",
                   "title": "aiqos, baseline build ($BENCH_BASE_BUILD)"},
    # the machine's own limit (the matrix runs it at the further rates): the
    # same training load routed over a second, identical link (lab.route_side),
    # inference alone on the first: what the CPUs' work alone adds to the
    # inference p99, with no qdisc shared (matrix_report.held)
    "cpu": {"chain": "plain", "training": True, "side_link": True,
            "title": "training on a second, identical link (the CPUs' share alone)"},
    # not a P4 arm: the plugin without its agent (the lab smoke test)
    "plugin": {"chain": "aiqos", "training": True, "title": "aiqos plugin alone (no agent)"},
}


class Workload:
    """What every arm runs (defaults: the demo's and the bench's)."""

    def __init__(self, **kw):
        self.duration_s = 12.0  # inference load (the measured window)
        self.warm_s = 3.0  # training alone before the inference load starts
        self.tail_s = 1.0  # training after it ends
        self.rate = 1000.0  # inference requests per second (Poisson)
        self.req_bytes = 64
        self.resp_bytes = 8192
        self.conns = 8
        self.lg_warmup_s = 1.0  # first second of the inference load not in the histogram
        self.n_train = 2  # training pods
        self.flows = 2  # iperf3 -P per training pod
        self.bw_share = 0.9  # bandwidth arm: sum of the training pods' egressRate / link rate
        self.mixed_hold_s = 2
        self.debounce_ms = 200
        self.sample_s = 0.5  # queue sampler period
        # the matrix (run_instance): each cell's client runs cell_s (the
        # first lg_warmup_s not counted); a request unanswered timeout_s
        # after the end is a timeout; cells start every cell_s + timeout_s + gap_s
        self.cell_s = 4.0
        self.timeout_s = 2.0
        self.gap_s = 0.3
        self.large_share = 0.42  # the large-response load: share of the link
        self.burst_factor = 5.0  # the burst load: this x the mean rate ...
        self.burst_ms = 100  # ... for this long ...
        self.burst_period_ms = 1000  # ... every period
        for k, v in kw.items():
            if not hasattr(self, k):
                raise ValueError(f"unknown workload parameter {k}")
            setattr(self, k, v)

    def describe(self, rate_mbit):
        return (f"{self.n_train} training pods x {self.flows} iperf3 flows; 1 inference pod sending "
                f"{self.rate:.0f} req/s (Poisson, {self.req_bytes} B requests, {self.resp_bytes // 1024} KiB responses, "
                f"{self.conns} connections); {self.duration_s:g} s measured after {self.warm_s:g} s of training alone "
                f"(first {self.lg_warmup_s:g} s of the load not counted)")


def agent_config(lab, w):
    return {"uplink": L.UPLINK, "uplinkRate": f"{lab.rate_mbit}mbit", "mixedHoldSeconds": w.mixed_hold_s,
            "debounceMs": w.debounce_ms}


def arm_available(lab, arm):
    """(True, "") or (False, reason)."""
    spec = ARMS[arm]
    if spec.get("agent") and not L.Agent.available(lab.build):
        return False, f"{lab.build}/bin/aiqos-agent and aiqosctl are not built"
    if spec.get("bins_env"):
        other = os.environ.get(spec["bins_env"])
        if not other or not L.Agent.available(other) or not os.access(os.path.join(other, "bin", "aiqos"), os.X_OK):
            return False, f"${spec['bins_env']} ({other or 'unset'}) is not a build directory with bin/aiqos, " \
                "bin/aiqos-agent and bin/aiqosctl"
    if spec.get("aqm"):
        ok, why = lab.has_qdisc(spec["aqm"])
        if not ok:
            return False, (f"this kernel ({os.uname().release}) has no {spec['aqm']} qdisc ({why}); "
                           "run on a full kernel")
    return True, ""


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class QueueSampler(threading.Thread):
    """Backlog (bytes) of the bottleneck and the node (uplink and ifbs), every period."""

    def __init__(self, lab, period_s):
        super().__init__(daemon=True)
        self.lab = lab
        self.period_s = period_s
        self.stop_evt = threading.Event()
        self.samples = {"wire": [], "uplink": []}

    @staticmethod
    def root_backlog(stats):
        for q in stats:
            if q.get("root"):
                return q.get("backlog", 0) or 0
        return 0

    def run(self):
        # the node's queues: the uplink's root and the ifbs' (the gated
        # upload tree's and the download tree's), there when traffic starts
        devs = [L.UPLINK] + self.lab.node_ifbs()
        while not self.stop_evt.wait(self.period_s):
            self.samples["wire"].append(self.root_backlog(self.lab.qdisc_stats(self.lab.wire, L.WIRE_OUT)))
            self.samples["uplink"].append(sum(self.root_backlog(self.lab.qdisc_stats(self.lab.node, d))
                                              for d in devs))

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=5)

    def summary(self):
        out = {}
        for k, v in self.samples.items():
            out[f"{k}_backlog_max_b"] = max(v) if v else 0
            out[f"{k}_backlog_mean_b"] = sum(v) / len(v) if v else 0
        return out


def qdisc_counters(stats):
    """drops (root, which includes its children) and ECN/CE marks (every qdisc's xstats)."""
    drops = marks = 0
    for q in stats:
        if q.get("root"):
            drops = q.get("drops", 0) or 0
        xs = q.get("xstats") or {}
        marks += (xs.get("ecn_mark") or 0) + (xs.get("ce_mark") or 0)
    return drops, marks


def iperf_argv(pod, port, cc, seconds, flows, omit_s=1, interval_s=None):
    argv = pod.exec("iperf3", "-c", pod.lab.server_ip, "-p", port, "-t", f"{seconds:.1f}", "-P", flows, "-C", cc, "-J",
                    "--connect-timeout", "3000")
    if omit_s:
        argv += ["-O", str(omit_s)]
    argv += ["-i", str(interval_s) if interval_s else "0"]
    return argv


def loadgen_argv(lab, pod, w, cc, duration_s, out, label, warmup_s=None):
    rt = L.rt_argv()
    return pod.exec(*rt, lab.loadgen, "client", "--connect", f"{lab.server_ip}:{L.LOADGEN_PORTS.get(cc, L.LOADGEN_PORT)}", "--rate", w.rate,
                    "--duration", f"{duration_s:.2f}", "--conns", w.conns, "--req", w.req_bytes, "--resp",
                    w.resp_bytes, "--warmup", f"{w.lg_warmup_s if warmup_s is None else warmup_s:.2f}", "--cc", cc,
                    "--label", label, "--out", out)


def _parse_iperf(text, who, interrupted_ok=False):
    try:
        d = json.loads(text)
    except ValueError as e:
        raise L.LabError(f"iperf3 in {who}: output is not JSON ({e}): {text[:300]}") from None
    if d.get("error") and not (interrupted_ok and str(d["error"]).startswith("interrupt") and d.get("intervals")):
        raise L.LabError(f"iperf3 in {who}: {d['error']}")
    return d


def _bandwidth_rc(lab, w):
    per_pod = int(lab.rate_mbit * 1e6 * w.bw_share / w.n_train)
    return {"egressRate": per_pod, "egressBurst": L.BURST_CONTAINERD}


def _set_aqm(lab, kind, pods):
    """fq_codel everywhere: node uplink root and each pod's eth0."""
    L.sh("tc", "-n", lab.node, "qdisc", "replace", "dev", L.UPLINK, "root", kind)
    for p in pods:
        L.sh("tc", "-n", p.netns, "qdisc", "replace", "dev", "eth0", "root", kind)


def plugin_classes(lab):
    """The class of every attachment the aiqos plugin recorded in its state dir."""
    out = []
    if os.path.isdir(lab.state_dir):
        for f in sorted(os.listdir(lab.state_dir)):
            if f.endswith(".json"):
                try:
                    with open(os.path.join(lab.state_dir, f)) as fh:
                        out.append(json.load(fh).get("class"))
                except (OSError, ValueError):
                    out.append(None)
    return sorted(out, key=str)


def node_link_kinds(lab):
    p = L.sh("ip", "-n", lab.node, "-j", "-d", "link", "show")
    return [(x.get("linkinfo") or {}).get("info_kind") for x in json.loads(p.stdout or "[]")]


def _agent_snapshot(agent):
    st, why = agent.status_or_error()
    if st is None:
        return {"mode": None, "error": why}
    up = st.get("uplink") or {}
    return {"mode": st.get("mode"), "uplink_shape": up.get("shape"), "uplink_effective": up.get("effective"),
            "uplink_degraded": up.get("degraded"), "shares": up.get("shares"), "downlink": st.get("downlink")}


def run_arm(lab, arm, cc, w, rep, outdir, log=print):
    """One arm with congestion control cc. Returns a flat result dict."""
    spec = ARMS[arm]
    tag = f"{arm}-{cc}-r{rep}"
    res = {"arm": arm, "cc": cc, "rep": rep, "title": spec["title"], "started": time.time(),
           "loadavg_start": loadavg()}
    pods, train = [], []
    agent = None
    t_arm = time.monotonic()
    lab.reset_uplink()
    lab.set_bottleneck(spec.get("leaf", "bfifo"))
    try:
        if spec.get("agent"):
            agent = lab.start_agent(agent_config(lab, w))
            res["mode_before"] = agent.mode()
        short = {"idle": "id", "fifo": "ff", "bandwidth": "bw", "aiqos": "aq", "fq_codel": "fc", "plugin": "pl"}.get(arm, "xx")
        if spec["training"]:
            bw = _bandwidth_rc(lab, w) if spec["chain"] == "bandwidth" else None
            for k in range(w.n_train):
                train.append(lab.add_pod(f"{short}{rep}{cc[0]}t{k}", "training", spec["chain"], bandwidth=bw))
        inf = lab.add_pod(f"{short}{rep}{cc[0]}i0", "inference", spec["chain"])
        pods = train + [inf]
        res["pod_add_ms"] = [round(p.add_ms, 1) for p in pods]
        if spec["chain"] == "aiqos":
            res["plugin_classes"] = plugin_classes(lab)
        if spec["chain"] == "bandwidth":
            res["node_ifbs"] = len([x for x in node_link_kinds(lab) if x == "ifb"])
        if spec.get("aqm"):
            _set_aqm(lab, spec["aqm"], pods)
        if agent is not None:
            want = "mixed" if train else "inference"
            res["mode_wait_s"] = round(agent.wait_mode(want), 3)
        wire0 = qdisc_counters(lab.qdisc_stats(lab.wire, L.WIRE_OUT))  # the bottleneck outlives the arms
        sampler = QueueSampler(lab, w.sample_s)
        sampler.start()
        procs = []
        iperf_s = w.warm_s + w.duration_s + w.tail_s - 1.0  # -O 1: one more second before
        for k, p in enumerate(train):
            procs.append(subprocess.Popen(iperf_argv(p, L.IPERF_PORT0 + k, cc, iperf_s, w.flows),
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        if train:
            time.sleep(w.warm_s)
        lg_out = os.path.join(outdir, f"loadgen-{tag}.json")
        lg = subprocess.run(loadgen_argv(lab, inf, w, cc, w.duration_s, lg_out, tag), capture_output=True, text=True,
                            timeout=w.duration_s + 30)
        if agent is not None:
            res.update({f"agent_{k}": v for k, v in _agent_snapshot(agent).items()})
        goodput = retrans = 0
        for k, p in enumerate(procs):
            out, err = p.communicate(timeout=iperf_s + 30)
            d = _parse_iperf(out, train[k].name)
            goodput += d["end"]["sum_received"]["bits_per_second"]
            retrans += d["end"]["sum_sent"].get("retransmits", 0) or 0
            with open(os.path.join(outdir, f"iperf3-{tag}-{k}.json"), "w") as f:
                f.write(out)
        sampler.stop()
        if lg.returncode not in (0, 1) or not os.path.exists(lg_out):
            raise L.LabError(f"loadgen in {inf.name}: exit {lg.returncode}: {lg.stderr.strip()[:500]}")
        with open(lg_out) as f:
            d = json.load(f)
        lat = d["latency_us"]
        res.update({
            "p50_us": lat["p50"], "p90_us": lat["p90"], "p99_us": lat["p99"], "p999_us": lat["p999"],
            "max_us": lat["max"], "mean_us": lat["mean"], "requests": lat["count"], "errors": d["errors"],
            "incomplete": d["incomplete"], "overflow": d["overflow"], "achieved_rate": d["achieved_rate"],
            "send_lag_p99_us": d["send_lag_us"]["p99"], "loadgen_file": os.path.basename(lg_out),
        })
        if train:
            res.update({"goodput_bps": goodput, "goodput_link": goodput / (lab.rate_mbit * 1e6),
                        "retransmits": retrans})
        wire_drops, wire_marks = qdisc_counters(lab.qdisc_stats(lab.wire, L.WIRE_OUT))
        wire_drops, wire_marks = wire_drops - wire0[0], wire_marks - wire0[1]
        up_drops, up_marks = qdisc_counters(lab.qdisc_stats(lab.node, L.UPLINK))
        ce = 0
        for p in pods:
            ce += lab.netstat(p.netns).get("TcpExt.TCPDeliveredCE", 0)
        res.update({"wire_drops": wire_drops, "uplink_drops": up_drops, "qdisc_ce_marks": wire_marks + up_marks,
                    "sender_ce_delivered": ce})
        res.update(sampler.summary())
        with open(os.path.join(outdir, f"tc-{tag}.txt"), "w") as f:
            f.write(lab.tc_text(lab.node, L.UPLINK))
            f.write(lab.tc_text(lab.wire, L.WIRE_OUT))
    finally:
        for p in reversed(pods):
            try:
                lab.del_pod(p)
            except L.LabError as e:
                log(f"  warning: {e}")
        if agent is not None:
            lab.stop_agent()
        lab.reset_uplink()
        if spec.get("leaf", "bfifo") != "bfifo":
            lab.set_bottleneck("bfifo")
    res["loadavg_end"] = loadavg()
    res["arm_seconds"] = round(time.monotonic() - t_arm, 1)
    return res


class ModePoller(threading.Thread):
    """Records (unix time, mode) whenever `aiqosctl status` reports a new mode."""

    def __init__(self, agent, period_s=0.1):
        super().__init__(daemon=True)
        self.agent = agent
        self.period_s = period_s
        self.stop_evt = threading.Event()
        self.changes = []

    def run(self):
        last = None
        while not self.stop_evt.is_set():
            t = time.time()
            m = self.agent.mode()
            if m is not None and m != last:
                self.changes.append((t, m))
                last = m
            self.stop_evt.wait(self.period_s)

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=5)


def run_dynamic(lab, arm, cc, w, outdir, total_s=16.0, inference_at_s=4.0, log=print):
    """Training saturating the link from t=0; the inference pod arrives at
    inference_at_s and runs its load until the end. Returns the p99 per window
    (time since t=0), the training goodput per 0.5 s and, with the agent, the
    mode changes."""
    spec = ARMS[arm]
    res = {"arm": arm, "cc": cc, "title": spec["title"], "total_s": total_s, "inference_at_s": inference_at_s}
    pods = []
    agent = poller = None
    lab.reset_uplink()
    try:
        if spec.get("agent"):
            agent = lab.start_agent(agent_config(lab, w))
            poller = ModePoller(agent)
            poller.start()
        short = {"fifo": "dynf", "aiqos": "dyna", "bandwidth": "dynb"}.get(arm, "dynx")
        bw = _bandwidth_rc(lab, w) if spec["chain"] == "bandwidth" else None
        t0 = time.time()
        train = []
        for k in range(w.n_train):
            train.append(lab.add_pod(f"{short}t{k}", "training", spec["chain"], bandwidth=bw))
        pods += train
        procs = [subprocess.Popen(iperf_argv(p, L.IPERF_PORT0 + k, cc, total_s + 0.5 - (time.time() - t0), w.flows,
                                             omit_s=0, interval_s=0.5),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for k, p in enumerate(train)]
        iperf_t0 = time.time()
        time.sleep(max(0.0, t0 + inference_at_s - time.time()))
        t_arrive = time.time()
        inf = lab.add_pod(f"{short}i0", "inference", spec["chain"])
        pods.append(inf)
        lg_out = os.path.join(outdir, f"loadgen-dynamic-{arm}.json")
        lg_s = max(2.0, total_s - (time.time() - t0) - 0.5)
        lg = subprocess.run(loadgen_argv(lab, inf, w, cc, lg_s, lg_out, f"dynamic-{arm}", warmup_s=0),
                            capture_output=True, text=True, timeout=lg_s + 30)
        if lg.returncode not in (0, 1) or not os.path.exists(lg_out):
            raise L.LabError(f"loadgen (dynamic, {arm}): exit {lg.returncode}: {lg.stderr.strip()[:500]}")
        goodput_series = {}
        for k, p in enumerate(procs):
            out, _ = p.communicate(timeout=total_s + 30)
            d = _parse_iperf(out, train[k].name)
            # the pods' 0.5 s intervals, summed by index (their clocks start a few ms apart)
            for i, iv in enumerate(d.get("intervals", [])):
                s = iv["sum"]
                t_mid = round(iperf_t0 - t0 + (i + 0.5) * 0.5, 3)
                goodput_series[t_mid] = goodput_series.get(t_mid, 0) + s["bits_per_second"]
        with open(lg_out) as f:
            d = json.load(f)
        win_s = d["windows"]["ms"] / 1000.0
        lg_t0 = d["t0_unix_ns"] / 1e9 - t0
        res["windows"] = [(round(lg_t0 + (i + 0.5) * win_s, 3), p99, n)
                          for i, (p99, n) in enumerate(zip(d["windows"]["p99_us"], d["windows"]["count"]))]
        res["goodput"] = sorted(goodput_series.items())
        res["inference_arrived_s"] = round(t_arrive - t0, 3)
        res["inference_ready_s"] = round(t_arrive - t0 + inf.add_ms / 1e3, 3)
        res["latency_us"] = d["latency_us"]
        if poller is not None:
            poller.stop()
            res["mode_changes"] = [(round(t - t0, 3), m) for t, m in poller.changes]
    finally:
        if poller is not None and poller.is_alive():
            poller.stop()
        for p in reversed(pods):
            try:
                lab.del_pod(p)
            except L.LabError as e:
                log(f"  warning: {e}")
        if agent is not None:
            lab.stop_agent()
        lab.reset_uplink()
    return res


# ---------------------------------------------------------------------------
# The workload matrix (P4): direction x inference
# load x client x congestion control, each arm run as one *instance* (its
# pods, its agent, its training load) per (direction, cc) in which the cells
# of every load and client follow each other while training runs.

DIRECTIONS = ("egress", "download")
LOADS = ("small", "large", "burst")
CLIENTS = ("loadgen", "http")
MATRIX_ARMS = ("idle", "fifo", "bandwidth", "aiqos", "fq_codel")
DIRECTION_TEXT = {
    "egress": "egress: responses leave the node (inference server in the pod, client in the fabric; training "
              "pods upload)",
    "download": "download: inference responses or fetched objects come in (client in the pod, server in the "
                "fabric; training pods download)",
}
HERE = os.path.dirname(os.path.abspath(__file__))
SSE_SCRIPT = os.path.join(HERE, "sse_tokens.py")
SSE_REQUIREMENTS = os.path.join(HERE, "sse-requirements.txt")


def sse_stack():
    """{package: version} pinned in sse-requirements.txt (what
    hack/install-sse.sh installs)."""
    out = {}
    with open(SSE_REQUIREMENTS) as f:
        for line in f:
            name, sep, ver = line.split("#", 1)[0].strip().partition("==")
            if sep:
                out[name] = ver
    return out


def sse_stack_text():
    v = sse_stack()
    return (f"uvicorn {v['uvicorn']} (uvloop, httptools) + sse-starlette {v['sse-starlette']} in the pod, httpx "
            f"{v['httpx']} + httpx-sse {v['httpx-sse']} in the fabric")


CLIENT_TEXT = {"loadgen": "loadgen (the project's open-loop generator, Poisson; the token streams: its tokens-server "
                          "and tokens-client)",
               "http": "nginx + vegeta (HTTP/1.1 keepalive, constant rate)",
               "sse": "the token streams over a real HTTP/SSE stack from PyPI, " + sse_stack_text()
                      + " (hack/install-sse.sh, pinned in test/bench/sse-requirements.txt; our glue: "
                        "test/bench/sse_tokens.py): one SSE response per stream, each event's one-way delay from its "
                        "write in the ASGI app to its read by httpx-sse"}


# Issue 30's loads: token streams from the inference pod (egress: 64 or 256
# lock-step streams, one ~300-byte event per stream every 25 ms; metric: each
# event's one-way delay and the events missing) and the model load
# (download: the inference pod pulls over 8 connections while training
# pulls; metric: training's goodput and the pod's 8 KiB requests meanwhile).
# In the matrix by default, each with the clients of STREAM_CLIENTS: loadgen,
# and for the 64-stream loads also the real HTTP/SSE stack (client "sse").
# Not at 256 streams: there the Python stack is the bottleneck, not the
# network (measured on the lab, idle arm, one repetition: event p99 13.7 ms
# against loadgen's 0.57 ms, the uvicorn server writing each step's events
# up to 9.9 ms after the step (p99); with aiqos the two real-time Python
# processes took training's upload from 444 to 240 Mbit/s); at 64 streams
# idle p99 4.2 ms against 0.44 ms, upload kept 98 %.
STREAM_LOADS = {"tokens64": "egress", "tokens256": "egress", "tokens64kv": "egress", "modelload": "download"}
STREAM_CLIENTS = {"tokens64": ("loadgen", "sse"), "tokens256": ("loadgen",), "tokens64kv": ("loadgen", "sse"),
                  "modelload": ("loadgen",)}
# tokens64kv: the 64 streams while the pod sends a KV cache to a decode pod
# elsewhere (the fabric): KV_BYTES over one connection, from lg_warmup_s on
KV_BYTES = 100 * 1000 * 1000
TOKENS_PORT = 7100
SSE_PORT = 7101  # the SSE stack's server (uvicorn) in the inference pod
TOKENS_EVENT_BYTES, TOKENS_PERIOD_MS = 300, 25
MODEL_LOAD_CONNS = 8
# the loads also measured at every further rate of BENCH_RATES (issue 30 §3:
# not the large responses, not the model load), on the routed datapath
RATE_LOADS = ("small", "burst", "tokens64", "tokens256")


def stream_cells(ccs=L.CCS):
    return [cell_name(d, lo, c, cc) for lo, d in STREAM_LOADS.items() for c in STREAM_CLIENTS[lo] for cc in ccs]


def cell_name(direction, load, client, cc, datapath="routed", rate_mbit=L.DEFAULT_RATE_MBIT):
    """DIRECTION-LOAD-CLIENT-CC; on another datapath than the routed one
    (lab.DATAPATHS) prefixed DATAPATH/ (the routed matrix keeps its names);
    at another rate than lab.DEFAULT_RATE_MBIT suffixed @RATE (Mbit/s)."""
    base = f"{direction}-{load}-{client}-{cc}"
    if rate_mbit != L.DEFAULT_RATE_MBIT:
        base += f"@{rate_mbit}"
    return base if datapath == "routed" else f"{datapath}/{base}"


def cell_datapath(cell):
    return cell.split("/", 1)[0] if "/" in cell else "routed"


def cell_rate(cell):
    """The bottleneck rate (Mbit/s) a cell's name says: its @RATE, else
    lab.DEFAULT_RATE_MBIT."""
    _, sep, r = cell.partition("@")
    if not sep:
        return L.DEFAULT_RATE_MBIT
    try:
        return int(r)
    except ValueError:
        raise L.LabError(f"cell {cell!r}: rate {r!r} after '@' is not a number of Mbit/s") from None


def cell_base(cell):
    """The cell's name without its @RATE."""
    return cell.partition("@")[0]


def all_cells(ccs=L.CCS, rates=(L.DEFAULT_RATE_MBIT,)):
    """Every cell of the matrix: the request loads and issue 30's stream
    loads at the first rate; at each further rate the RATE_LOADS."""
    base = [cell_name(d, lo, c, cc) for d in DIRECTIONS for lo in LOADS for c in CLIENTS for cc in ccs]
    base += stream_cells(ccs)
    out = []
    for i, rate in enumerate(rates):
        for c in base:
            d, lo, cl, cc = split_cell(c)
            if i == 0 or lo in RATE_LOADS:
                out.append(cell_name(d, lo, cl, cc, rate_mbit=rate))
    return out


def parse_rates(text):
    """BENCH_RATES ("500 10000": Mbit/s, space or comma separated) -> [int]."""
    out = []
    for x in text.replace(",", " ").split():
        try:
            v = int(x)
        except ValueError:
            v = 0
        if v <= 0:
            raise L.LabError(f"BENCH_RATES: {x!r} is not a positive number of Mbit/s (e.g. BENCH_RATES='500 10000')")
        if v not in out:
            out.append(v)
    if not out:
        raise L.LabError("BENCH_RATES is empty: want one or more rates in Mbit/s (e.g. '500 10000')")
    return out


def select_cells(patterns, ccs, rates=(L.DEFAULT_RATE_MBIT,)):
    """Cells matching any of the comma/space separated fnmatch patterns
    (e.g. "download-*-http-*,egress-small-loadgen-cubic"); all when empty.
    A pattern matches a cell's whole name or its name without @RATE (the
    rates are BENCH_RATES': "egress-small-*" selects the cell at every rate,
    "*@10000" only those at 10 Gbit/s)."""
    import fnmatch  # noqa: PLC0415
    cells = all_cells(ccs, rates)
    pats = [p for p in patterns.replace(",", " ").split() if p] if patterns else []
    if not pats:
        return cells
    out = [c for c in cells if any(fnmatch.fnmatchcase(c, p) or fnmatch.fnmatchcase(cell_base(c), p) for p in pats)]
    if not out:
        raise L.LabError(f"CELLS={patterns!r} matches none of the {len(cells)} cells (e.g. {cells[0]})")
    return out


def split_cell(cell):
    d, lo, c, cc = cell_base(cell.split("/", 1)[-1]).split("-")
    return d, lo, c, cc


class LoadSpec:
    """One inference load: response size, mean rate, connections, bursts."""

    def __init__(self, name, resp_bytes, rate, conns, burst=None, text=""):
        self.name, self.resp_bytes, self.rate, self.conns, self.burst, self.text = (name, resp_bytes, rate, conns,
                                                                                    burst, text)

    def mbit(self):
        return self.rate * self.resp_bytes * 8 / 1e6


def load_spec(load, rate_mbit, w):
    """small: 8 KiB at w.rate (1000 req/s); large: 256 KiB at ~42 % of the
    link (100 req/s at 500 Mbit/s); burst: 8 KiB at a mean w.rate with
    w.burst_factor x the rate for w.burst_ms of every w.burst_period_ms."""
    if load == "small":
        return LoadSpec("small", 8192, w.rate, w.conns, text=f"8 KiB responses at {w.rate:.0f} req/s")
    if load == "large":
        rate = float(max(1, round(w.large_share * rate_mbit * 1e6 / (262144 * 8))))
        return LoadSpec("large", 262144, rate, 16,
                        text=f"256 KiB responses at {rate:g} req/s (≈ {100 * w.large_share:.0f} % of the link)")
    if load == "burst":
        b = (w.burst_factor, w.burst_ms, w.burst_period_ms)
        return LoadSpec("burst", 8192, w.rate, 16, burst=b,
                        text=f"8 KiB responses at a mean {w.rate:.0f} req/s, on/off: {w.burst_factor:g}× the mean "
                             f"for {w.burst_ms} ms of every {w.burst_period_ms} ms")
    if load.startswith("tokens") and load in STREAM_LOADS:
        kv = load.endswith("kv")
        n = int(load[len("tokens"):len(load) - 2 if kv else None])
        return LoadSpec(load, TOKENS_EVENT_BYTES, n * 1000.0 / TOKENS_PERIOD_MS, n,
                        text=f"{n} token streams in lock-step, one {TOKENS_EVENT_BYTES}-byte event per stream every "
                             f"{TOKENS_PERIOD_MS} ms (one-way delay per event)"
                             + (f", while the pod sends a {KV_BYTES // 1000000} MB KV cache to another pod over one "
                                "connection" if kv else "")
                             + "; client loadgen: loadgen tokens-server → tokens-client"
                             + (f"; client sse: {sse_stack_text()}" if "sse" in STREAM_CLIENTS[load] else ""))
    if load == "modelload":
        return LoadSpec("modelload", 8192, w.rate, w.conns,
                        text=f"8 KiB responses at {w.rate:.0f} req/s while the pod pulls its model over "
                             f"{MODEL_LOAD_CONNS} connections")
    raise L.LabError(f"unknown inference load {load!r} ({', '.join(LOADS + tuple(STREAM_LOADS))})")


def agent_supports(lab, key):
    """Whether the built agent knows a config key (its binary carries every
    accepted key's name; an unknown key makes it refuse the whole config)."""
    path = os.path.join(lab.bin_dir or os.path.join(lab.build, "bin"), "aiqos-agent")
    try:
        with open(path, "rb") as f:
            return key.encode() in f.read()
    except OSError:
        return False


def matrix_agent_config(lab, w, direction):
    cfg = agent_config(lab, w)
    if direction == "download" and agent_supports(lab, "downlinkRate"):
        cfg["downlinkRate"] = f"{lab.rate_mbit}mbit"
    return cfg


def _node_queue_devs(lab):
    return [L.UPLINK] + lab.node_ifbs()


class CellSampler(threading.Thread):
    """Root backlog (bytes) of both wire ports and the node's uplink and ifbs,
    time-stamped (the cells of an instance are cut out of it)."""

    def __init__(self, lab, period_s):
        super().__init__(daemon=True)
        self.lab, self.period_s = lab, period_s
        self.stop_evt = threading.Event()
        self.samples = []  # (unix time, {dev: backlog})
        self.node_devs = _node_queue_devs(lab)

    def run(self):
        while not self.stop_evt.wait(self.period_s):
            s = {d: QueueSampler.root_backlog(self.lab.qdisc_stats(self.lab.wire, d)) for d in (L.WIRE_OUT, L.WIRE_IN)}
            s["node"] = max(QueueSampler.root_backlog(self.lab.qdisc_stats(self.lab.node, d)) for d in self.node_devs)
            self.samples.append((time.time(), s))

    def stop(self):
        self.stop_evt.set()
        self.join(timeout=5)

    def window(self, a, b, key):
        v = [s[key] for t, s in self.samples if a <= t <= b]
        return max(v) if v else 0


def _drops(lab, ns, devs):
    return sum(qdisc_counters(lab.qdisc_stats(ns, d))[0] for d in devs)


# the inference pod's TCP loss counters: retransmitted segments, tail-loss
# probes, timeouts, and the retransmissions the receiver reported as
# duplicates (DSACK: the original had arrived, late: reordering, not loss)
POD_TCP_COUNTERS = {"Tcp.RetransSegs": "inf_retrans_segs", "TcpExt.TCPLossProbes": "inf_loss_probes",
                    "TcpExt.TCPTimeouts": "inf_timeouts", "TcpExt.TCPDSACKRecv": "inf_dsack_recv"}


def _cell_counters(lab, direction, inf):
    node_devs = _node_queue_devs(lab)
    up = json.loads(L.sh("ip", "-n", lab.node, "-s", "-j", "link", "show", L.UPLINK).stdout)[0]["stats64"]
    tcp = lab.netstat(inf.netns)
    return {"bottleneck_drops": _drops(lab, lab.wire, [lab.bottleneck_dev(direction)]),
            "node_drops": _drops(lab, lab.node, node_devs),
            "uplink_rx_packets": up["rx"]["packets"], "uplink_tx_packets": up["tx"]["packets"],
            **_cpu_ticks(), **{k: tcp.get(n, 0) for n, k in POD_TCP_COUNTERS.items()},
            **lab.dp.counters(lab)}


def _cpu_ticks():
    """The machine's CPU time so far by kind, in USER_HZ ticks (/proc/stat's
    first line; a cell's difference says how busy the CPUs were, and with what)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return dict(zip(("cpu_user_ticks", "cpu_nice_ticks", "cpu_system_ticks", "cpu_idle_ticks",
                     "cpu_iowait_ticks", "cpu_irq_ticks", "cpu_softirq_ticks"), v))


def _goodput_window(series, a, b):
    """Mean of the summed training goodput intervals (t_start, t_end, bps)
    that lie inside [a, b]."""
    v = [bps for t0, t1, bps in series if t0 >= a - 0.05 and t1 <= b + 0.05]
    return sum(v) / len(v) if v else None


def _loadgen_json(argv, w, out, what):
    """Run a loadgen client for one cell; its JSON result (exit 1: some
    requests failed, still a result)."""
    p = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=w.cell_s + w.timeout_s + 30)
    if p.returncode not in (0, 1) or not os.path.exists(out):
        raise L.LabError(f"{what}: exit {p.returncode}: {p.stderr.strip()[:500]}")
    with open(out) as f:
        return json.load(f)


def _run_cell_loadgen(lab, direction, spec, cc, w, inf, out, label):
    if direction == "egress":
        ns, target = lab.fabric, f"{inf.ip}:{L.LOADGEN_PORT}"
    else:
        ns, target = inf.netns, f"{lab.server_ip}:{L.LOADGEN_PORTS.get(cc, L.LOADGEN_PORT)}"
    rt = L.rt_argv()
    argv = L.nsexec(ns, *rt, lab.loadgen, "client", "--connect", target, "--rate", spec.rate, "--duration",
                    f"{w.cell_s:.2f}", "--conns", spec.conns, "--req", w.req_bytes, "--resp", spec.resp_bytes,
                    "--warmup", f"{w.lg_warmup_s:.2f}", "--drain", f"{w.timeout_s:g}", "--cc", cc, "--label", label,
                    "--out", out)
    if spec.burst:
        argv += ["--burst-factor", spec.burst[0], "--burst-ms", spec.burst[1], "--burst-period-ms", spec.burst[2]]
    d = _loadgen_json(argv, w, out, f"loadgen client in {ns}")
    lat = d["latency_us"]
    return {"p50_us": lat["p50"], "p90_us": lat["p90"], "p99_us": lat["p99"], "p999_us": lat["p999"],
            "max_us": lat["max"], "requests": lat["count"], "errors": d["errors"] + d.get("conn_failures", 0),
            "timeouts": d["incomplete"], "achieved_rate": d["achieved_rate"],
            "send_lag_p99_us": d["send_lag_us"]["p99"], "t0": d["t0_unix_ns"] / 1e9,
            "client_file": os.path.basename(out)}


def _kv_transfer(inf, cc, w):
    """The KV cache (tokens64kv): KV_BYTES from the pod to the fabric's
    last iperf3 server over one connection, started once the token streams'
    warm-up is over; returns the running iperf3."""
    time.sleep(w.lg_warmup_s)
    argv = inf.exec("iperf3", "-c", inf.lab.server_ip, "-p", L.IPERF_PORT0 + L.IPERF_SERVERS - 1, "-n", KV_BYTES,
                    "-C", cc, "-J", "--connect-timeout", "3000")
    return subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run_cell_tokens(lab, spec, client, cc, w, inf, out, label):
    """Token streams (egress): the client in the fabric reads spec.conns
    streams of the pod's server, loadgen tokens-client from loadgen
    tokens-server or (client "sse") httpx-sse from uvicorn + sse-starlette
    (sse_tokens.py); latency = each event's one-way delay. tokens64kv: the
    pod sends its KV cache meanwhile (how long it took is recorded)."""
    rt = L.rt_argv()
    common = ["--streams", spec.conns, "--event", TOKENS_EVENT_BYTES, "--duration", f"{w.cell_s:.2f}", "--warmup",
              f"{w.lg_warmup_s:.2f}", "--drain", f"{w.timeout_s:g}", "--label", label, "--out", out]
    if client == "sse":
        # the client's sockets get the fabric's default congestion control
        # (set to cc by run_instance), as vegeta's do
        argv = L.nsexec(lab.fabric, *rt, lab.sse_python, SSE_SCRIPT, "client", "--url",
                        f"http://{inf.ip}:{SSE_PORT}/tokens", *common)
    else:
        argv = L.nsexec(lab.fabric, *rt, lab.loadgen, "tokens-client", "--connect", f"{inf.ip}:{TOKENS_PORT}",
                        "--cc", cc, *common)
    kv, box = None, {}
    if spec.name.endswith("kv"):
        t = threading.Thread(target=lambda: box.update(p=_kv_transfer(inf, cc, w)))
        t.start()
    try:
        d = _loadgen_json(argv, w, out, "SSE client (sse_tokens.py)" if client == "sse" else "loadgen tokens-client")
    finally:
        if spec.name.endswith("kv"):
            t.join()
            kv = box.get("p")
    kv_s = None
    if kv is not None:
        try:
            o, _ = kv.communicate(timeout=w.cell_s + 60)
        except subprocess.TimeoutExpired:
            kv.kill()
            o, _ = kv.communicate()
        try:
            kv_s = json.loads(o)["end"]["sum_sent"]["seconds"]
        except (ValueError, KeyError, TypeError):
            kv_s = None
    lat = d["delay_us"]
    # the SSE server's lag: each event's write after its engine step
    lag = (d.get("send_lag_us") or {}).get("p99")
    return {"kv_transfer_s": kv_s, "p50_us": lat["p50"], "p90_us": lat["p90"], "p99_us": lat["p99"], "p999_us": lat["p999"],
            "max_us": lat["max"], "requests": lat["count"], "errors": d["bad"] + d["closed"], "timeouts": 0,
            "missing": d["missing"], "achieved_rate": d["events"] / max(1e-9, w.cell_s - w.lg_warmup_s),
            "send_lag_p99_us": lag, "t0": d["t0_unix_ns"] / 1e9, "client_file": os.path.basename(out)}


def _run_cell_modelload(lab, spec, cc, w, inf, out, label):
    """The model load (download): the pod pulls over MODEL_LOAD_CONNS
    connections (iperf3 -R from the fabric's last server) while its 8 KiB
    requests run; the pull's goodput is recorded with the requests'."""
    port = L.IPERF_PORT0 + L.IPERF_SERVERS - 1
    pull = subprocess.Popen([str(a) for a in iperf_argv(inf, port, cc, w.cell_s + 0.5, MODEL_LOAD_CONNS, omit_s=0)]
                            + ["-R"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)  # the pull under way before the requests start
        r = _run_cell_loadgen(lab, "download", spec, cc, w, inf, out, label)
    finally:
        o, _ = pull.communicate(timeout=w.cell_s + 30)
    d = _parse_iperf(o, inf.name, interrupted_ok=True)
    r["model_load_bps"] = d["end"].get("sum_received", {}).get("bits_per_second")
    return r


def _run_cell_http(lab, direction, spec, cc, w, inf, out_prefix):
    import httpload  # noqa: PLC0415
    fname = httpload.FILES[spec.resp_bytes]
    if direction == "egress":
        ns, url = lab.fabric, f"http://{inf.ip}:{L.HTTP_PORT}/{fname}"
    else:
        ns, url = inf.netns, f"http://{lab.server_ip}:{L.HTTP_PORT}/{fname}"
    d = httpload.run_vegeta(lab, ns, url, spec.rate, w.cell_s, w.lg_warmup_s, out_prefix, timeout_s=w.timeout_s,
                            burst=spec.burst)
    lat = d["latency_us"]
    return {"p50_us": lat["p50"], "p90_us": lat["p90"], "p99_us": lat["p99"], "p999_us": lat["p999"],
            "max_us": lat["max"], "requests": lat["count"], "errors": d["errors"], "timeouts": d["timeouts"],
            "error_kinds": d["error_kinds"], "achieved_rate": d["achieved_rate"], "send_lag_p99_us": None,
            "stalled_attacks": d["stalled_attacks"], "unrecorded": d["unrecorded"],
            "t0": d["t0_unix_ns"] / 1e9, "client_file": os.path.basename(out_prefix) + ".json"}


def _training_series(outs, t_base):
    """iperf3 JSON outputs (-i) -> [(t_start, t_end, summed bps)] in unix time."""
    acc = {}
    for d in outs:
        for iv in d.get("intervals", []):
            s = iv["sum"]
            key = (round(s["start"], 2), round(s["end"], 2))
            acc[key] = acc.get(key, 0.0) + s["bits_per_second"]
    return sorted((t_base + a, t_base + b, v) for (a, b), v in acc.items())


def _train_sysctls(lab, spec, train, inst):
    env = spec.get("train_sysctls_env")
    kv = [x.split("=", 1) for x in os.environ.get(env, "").split(";") if "=" in x] if env else []
    for p in train:
        for k, v in kv:
            subprocess.run(["ip", "netns", "exec", p.netns, "sysctl", "-q", "-w", f"{k}={v}"], check=True)
    if kv:
        inst["train_sysctls"] = dict(kv)
    # BENCH_X_POD_CMDS: ";"-separated commands run in every training pod's
    # netns (e.g. "ip route change default via 10.88.0.1 dev eth0 window 65536")
    cmds = [c.strip() for c in os.environ.get("BENCH_X_POD_CMDS", "").split(";") if c.strip()] if env else []
    for p in train:
        for c in cmds:
            subprocess.run(["ip", "netns", "exec", p.netns, "sh", "-c", c], check=True)
    if cmds:
        inst["train_pod_cmds"] = cmds


def _x_node_cmds(lab, spec, inst):
    """BENCH_X_NODE_CMDS: ";"-separated commands run in the node netns once
    the agent reports its mode (e.g. a replaced ifb leaf; pair it with
    BENCH_X_AGENT='{"driftRepairSeconds": 0}' so the agent keeps it)."""
    cmds = ([c.strip() for c in os.environ.get("BENCH_X_NODE_CMDS", "").split(";") if c.strip()]
            if spec.get("train_sysctls_env") else [])
    for c in cmds:
        subprocess.run(["ip", "netns", "exec", lab.node, "sh", "-c", c], check=True)
    if cmds:
        inst["node_cmds"] = cmds


def run_instance(lab, arm, direction, cc, cells, w, rep, outdir, log=print):
    """One arm in one direction with congestion control cc: pods through the
    arm's chain (and its agent), training running throughout, then every cell
    of `cells` ([(load, client)]) in order. Returns one result dict per cell."""
    spec = ARMS[arm]
    itag = f"{arm}-{direction}-{cc}-r{rep}"
    t_inst = time.monotonic()
    lab.reset_uplink()
    lab.set_bottleneck(spec.get("leaf", "bfifo"))
    pods, train, procs, results, servers, routed_side, iperf_out = [], [], [], [], [], [], []
    agent = sampler = None
    base = {"arm": arm, "direction": direction, "cc": cc, "rep": rep, "title": spec["title"],
            "datapath": lab.dp.name, "rate_mbit": lab.rate_mbit, "fifo_bytes": lab.fifo_bytes}
    inst = {}
    lab.use_build(os.environ.get(spec["bins_env"]) if spec.get("bins_env") else None)
    try:
        if spec.get("agent"):
            cfg = matrix_agent_config(lab, w, direction)
            x_down = os.environ.get("BENCH_X_DOWNLINK_MBIT") if spec.get("train_sysctls_env") else None
            if x_down and direction == "download":
                cfg["downlinkRate"] = f"{int(x_down)}mbit"
            if spec.get("train_sysctls_env") and os.environ.get("BENCH_X_AGENT"):
                cfg.update(json.loads(os.environ["BENCH_X_AGENT"]))  # extra agent config keys
            agent = lab.start_agent(cfg)
            inst["agent_config"] = cfg
        short = {"idle": "id", "fifo": "ff", "bandwidth": "bw", "aiqos": "aq", "aiqos_x": "ax", "aiqos_base": "ab",
                 "fq_codel": "fc", "cpu": "cp"}.get(arm, "xx")
        pname = f"{short}{direction[0]}{cc[0]}{rep}"
        if spec["training"]:
            bw = None
            if spec["chain"] == "bandwidth":
                per_pod = int(lab.rate_mbit * 1e6 * w.bw_share / w.n_train)
                bw = ({"egressRate": per_pod, "egressBurst": L.BURST_CONTAINERD} if direction == "egress" else
                      {"ingressRate": per_pod, "ingressBurst": L.BURST_CONTAINERD})
            for k in range(w.n_train):
                train.append(lab.add_pod(f"{pname}t{k}", "training", spec["chain"], bandwidth=bw))
        inf = lab.add_pod(f"{pname}i0", "inference", spec["chain"])
        pods = train + [inf]
        if spec.get("side_link"):
            if lab.dp.name != "routed":
                raise L.LabError(f"arm {arm}: the side link is routed only (datapath {lab.dp.name})")
            lab.route_side(train)
            routed_side = train
        if spec.get("aqm"):
            _set_aqm(lab, spec["aqm"], pods)
        # congestion control explicitly everywhere (the aiqos plugin picks one
        # from the profile; the arms must compare like with like)
        for p in pods:
            lab.set_default_cc(p.netns, cc)
        lab.set_default_cc(lab.fabric, cc)
        _train_sysctls(lab, spec, train, inst)
        clients = {c for _, c in cells}
        if any(lo.startswith("tokens") and c == "loadgen" for lo, c in cells):
            servers.append(lab.spawn(f"tokens-server-{inf.name}", inf.exec(
                *L.rt_argv(), lab.loadgen, "tokens-server", "--listen", f"{inf.ip}:{TOKENS_PORT}",
                "--event", TOKENS_EVENT_BYTES, "--period-ms", TOKENS_PERIOD_MS, "--cc", cc)))
            lab._wait_port(inf.netns, inf.ip, TOKENS_PORT, servers[-1])
        if any(lo.startswith("tokens") and c == "sse" for lo, c in cells):
            if lab.sse_python is None:
                raise L.LabError("the sse cells need the SSE stack's venv: run hack/install-sse.sh")
            # the real HTTP/SSE stack's server (at the lab's priority:
            # lab.rt_argv); its sockets get the pod's default cc
            servers.append(lab.spawn(f"sse-server-{inf.name}", inf.exec(
                *L.rt_argv(), lab.sse_python, SSE_SCRIPT, "server", "--listen",
                f"{inf.ip}:{SSE_PORT}", "--event", TOKENS_EVENT_BYTES, "--period-ms", TOKENS_PERIOD_MS)))
            lab._wait_port(inf.netns, inf.ip, SSE_PORT, servers[-1], timeout_s=30)
        if direction == "egress":
            servers.append(lab.spawn(f"loadgen-server-{inf.name}", inf.exec(
                *L.rt_argv(), lab.loadgen, "server", "--listen", f"{inf.ip}:{L.LOADGEN_PORT}",
                "--cc", cc)))
            lab._wait_port(inf.netns, inf.ip, L.LOADGEN_PORT, servers[-1])
            if "http" in clients:
                import httpload  # noqa: PLC0415
                servers.append(httpload.start_nginx(lab, inf.netns, inf.name, inf.ip))
        if agent is not None:
            inst["mode_wait_s"] = round(agent.wait_mode("mixed" if train else "inference"), 3)
            inst.update({f"agent_{k}": v for k, v in _agent_snapshot(agent).items()})
            lab.dp.after_agent(lab)
            _x_node_cmds(lab, spec, inst)
        inst["node_ifbs"] = lab.node_ifbs()
        sampler = CellSampler(lab, w.sample_s)
        sampler.start()
        slot = w.cell_s + w.timeout_s + w.gap_s
        # longer than the cells can take (a stream cell's setup and drain add
        # to its slot): interrupted when they are done, training must not end
        # first (its final JSON blocked on a pipe, then the interrupt, garbled it)
        iperf_s = w.warm_s + len(cells) * (slot + 15) + w.tail_s + 30
        t_ip = time.time()
        for k, p in enumerate(train):
            argv = iperf_argv(p, L.IPERF_PORT0 + k, cc, iperf_s, w.flows, omit_s=0, interval_s=0.5)
            if direction == "download":
                argv.append("-R")
            # a regular file: iperf3's JSON write never blocks or comes back partial
            iperf_out.append(open(os.path.join(outdir, f"iperf3-{itag}-{k}.json"), "w+"))
            procs.append(subprocess.Popen(argv, stdout=iperf_out[-1], stderr=subprocess.PIPE, text=True))
        if train:
            time.sleep(w.warm_s)
        for i, (load, client) in enumerate(cells):
            ls = load_spec(load, lab.rate_mbit, w)
            cell = cell_name(direction, load, client, cc, lab.dp.name, lab.rate_mbit)
            tag = f"{itag}-{load}-{client}"
            r = dict(base, cell=cell, load=load, client=client, loadavg_start=loadavg(), order=i,
                     offered_mbit=round(ls.mbit(), 1))
            c0 = _cell_counters(lab, direction, inf)
            if load.startswith("tokens"):
                r.update(_run_cell_tokens(lab, ls, client, cc, w, inf, os.path.join(outdir, f"tokens-{tag}.json"),
                                          tag))
            elif load == "modelload":
                r.update(_run_cell_modelload(lab, ls, cc, w, inf, os.path.join(outdir, f"loadgen-{tag}.json"), tag))
            elif client == "loadgen":
                r.update(_run_cell_loadgen(lab, direction, ls, cc, w, inf, os.path.join(outdir, f"loadgen-{tag}.json"),
                                           tag))
            else:
                r.update(_run_cell_http(lab, direction, ls, cc, w, inf, os.path.join(outdir, f"http-{tag}")))
            t_end = time.time()
            c1 = _cell_counters(lab, direction, inf)
            r.update({k: c1[k] - c0[k] for k in c0})
            a = r.pop("t0") + w.lg_warmup_s
            b = min(t_end, a - w.lg_warmup_s + w.cell_s)
            r["window"] = [round(a, 3), round(b, 3)]
            r["bottleneck_backlog_max_b"] = sampler.window(a, b, lab.bottleneck_dev(direction))
            r["node_backlog_max_b"] = sampler.window(a, b, "node")
            r["loadavg_end"] = loadavg()
            with open(os.path.join(outdir, f"tc-{tag}.txt"), "w") as f:
                for dev in _node_queue_devs(lab):
                    f.write(lab.tc_text(lab.node, dev))
                f.write(lab.tc_text(lab.wire, lab.bottleneck_dev(direction)))
                # the training senders' view (cwnd, rwnd_limited): the fabric's in
                # download cells, the first training pod's (and its qdisc) in egress cells
                sender = lab.fabric if direction == "download" else (train[0].netns if train else None)
                if sender:
                    ss = L.sh(*L.nsexec(sender, "ss", "-tin", "state", "established"), check=False)
                    f.write(f"$ ss -tin  # {sender}\n{ss.stdout}")
                if train and direction == "egress":
                    f.write(lab.tc_text(train[0].netns, "eth0"))
            r["tc_file"] = f"tc-{tag}.txt"
            results.append(r)
            log(f"    {cell:28} {arm:9} p50 {_ms(r['p50_us']):>8} p99 {_ms(r['p99_us']):>8} "
                f"err {r['errors']}/{r['timeouts']} (load {r['loadavg_start']:.1f})"
                + (f" — {r['stalled_attacks']} vegeta attack(s) stalled and were stopped; their "
                   f"{r['unrecorded']} unrecorded requests count as timeouts" if r.get("stalled_attacks") else ""))
            time.sleep(w.gap_s if i + 1 < len(cells) else w.tail_s)
        outs = []
        retrans = 0
        ccs_seen = set()
        # the congestion control each pod's new sockets got at the end (nginx
        # uses the netns default: nothing may have reset it meanwhile)
        inst["pod_cc_end"] = sorted({L.sh(*p.exec("sysctl", "-n", "net.ipv4.tcp_congestion_control"),
                                          check=False).stdout.strip() for p in pods})
        # iperf3 ran for the longest the cells could take: interrupt it (its
        # JSON then carries the intervals so far and error "interrupt - ...")
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for k, p in enumerate(procs):
            p.communicate(timeout=60)
            iperf_out[k].seek(0)
            out = iperf_out[k].read()
            d = _parse_iperf(out, train[k].name, interrupted_ok=True)
            outs.append(d)
            retrans += d["end"].get("sum_sent", {}).get("retransmits", 0) or 0
            for key in ("sender_tcp_congestion", "receiver_tcp_congestion"):
                if d["end"].get(key):
                    ccs_seen.add(d["end"][key])
        series = _training_series(outs, t_ip)
        for r in results:
            if train:
                g = _goodput_window(series, *r["window"])
                r["goodput_bps"] = g
                r["goodput_link"] = g / (lab.rate_mbit * 1e6) if g is not None else None
            r["instance_retransmits"] = retrans if train else None
            r["training_cc_seen"] = sorted(ccs_seen)
            r.update(inst)
    finally:
        if sampler is not None:
            sampler.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for p in servers:
            lab.stop_proc(p)
        lab.route_side(routed_side, on=False)
        for f in iperf_out:
            f.close()
        for p in reversed(pods):
            try:
                lab.del_pod(p)
            except L.LabError as e:
                log(f"  warning: {e}")
        if agent is not None:
            lab.stop_agent()
        lab.reset_uplink()
        if spec.get("leaf", "bfifo") != "bfifo":
            lab.set_bottleneck("bfifo")
    secs = round(time.monotonic() - t_inst, 1)
    for r in results:
        r["instance_seconds"] = secs
    return results


def _ms(us):
    return "—" if us is None else f"{us / 1000:.2f}ms"
