#!/usr/bin/env python3
"""bench.py — `make demo`, `make bench` and `make bench-lab`.

  bench.py demo BUILD        the same workload without aiqos (deep FIFO) and with
                             aiqos (plugin + agent), egress and download, a short
                             table per direction and a latency CDF plot
                             (build/demo/latency-cdf.png)
  bench.py bench-lab BUILD   the P4 workload matrix (direction x inference load
                             x client x congestion control; arms idle, deep
                             FIFO, bandwidth, aiqos), interleaved, repeated;
                             tables on stdout and BUILD/bench/lab-<time>/
  bench.py render RUNDIR     tables, plots (and for a `bench` run the docs)
                             again from RUNDIR/results.json, without measuring
  bench.py render-docs       docs/benchmarks.md and README's results block
                             again from docs/bench/results.json (the
                             published run; its plots kept), e.g. after a
                             change of the report's rule or tables
  bench.py ab RUNDIR         two builds side by side from a bench-lab run with
                             the aiqos_base arm: BENCH_BASE_BUILD=<other build>
                             BENCH_ARMS="idle fifo aiqos aiqos_base" (per cell
                             each build's p99, their ratio per repetition and
                             each build's verdict)
  bench.py reps RUNDIR       every repetition of a bench-lab run: inference
                             p99, the CPUs' idle and softirq share, the
                             inference pod's retransmissions (loss probes,
                             DSACKed: reordered, not lost)
  bench.py bench BUILD       P1 (test/bench/cni-latency.sh), P4 as above, the
                             dynamic re-tune experiment, P2/P3/P5 when the agent
                             and its `make bench-agent` exist; regenerates
                             docs/benchmarks.md (+ docs/bench/*.png, results.json)

Environment: BENCH_REPS (default 3), BENCH_SECONDS (seconds of each cell's
inference load, default 4.5, the first 0.5 not counted; the demo: 8), BENCH_CCS (default "cubic bbr"),
BENCH_ARMS (default all), BENCH_CELLS or CELLS (fnmatch patterns over cell
names DIRECTION-LOAD-CLIENT-CC, e.g. "download-*-http-*,egress-large-*";
default all 36: 24 request/response cells and issue 30's 12 token-stream
(client loadgen, and for 64 streams also sse: the real HTTP/SSE stack of
hack/install-sse.sh) and model-load cells), BENCH_RATES (bottleneck rates in Mbit/s, default "500
10000": every cell at the first, the small, burst and token-stream loads at
each further one on the routed datapath, named CELL@RATE; the FIFO sized in
time, 24 ms: 1.5 MB at 500 Mbit/s, 30 MB at 10 Gbit/s; BENCH_RATE_MBIT, the
older single rate, when BENCH_RATES is unset; the demo: BENCH_RATE_MBIT),
BENCH_DATAPATHS (the pod network's datapaths, lab.DATAPATHS: "routed vxlan
cilium"; default "routed"; the cells of every other datapath are named
DATAPATH/CELL, run at the first rate: those matching BENCH_DATAPATH_CELLS,
default "*-small-http-cubic *-burst-http-cubic"), BENCH_WIRE_RPS=1 (an
exploration, not for `make bench`: RPS on the ends that receive the node's
upload, each flow's packets on one CPU: docs/lab/upload-10g.md). Every number
in the outputs comes from the run."""

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lab as L  # noqa: E402
import linerate as LR  # noqa: E402
import matrix_report as M  # noqa: E402
import outcome as O  # noqa: E402

REPO = L.REPO
ALL_ARMS = ["idle", "fifo", "bandwidth", "aiqos", "fq_codel"]
# the cells the other datapaths than the routed one run (issue 29: small and
# burst x http x cubic, both directions); BENCH_DATAPATH_CELLS overrides
DATAPATH_CELLS = "*-small-http-cubic *-burst-http-cubic"
DEFAULT_RATES = f"{L.DEFAULT_RATE_MBIT} 10000"  # BENCH_RATES: the matrix's rate, then 10 Gbit/s (issue 30 §3)


def log(msg=""):
    print(msg, flush=True)


# ---------------------------------------------------------------------------
# formatting and statistics


ms = M.ms  # one formatting of latencies and rates for the matrix report and this page
mbit = M.mbit


def med_range(values, fmt):
    vals = [v for v in values if v is not None]
    if not vals:
        return "—"
    m = statistics.median(vals)
    if len(vals) == 1 or fmt(min(vals)) == fmt(max(vals)):
        return fmt(m)
    return f"{fmt(m)} ({fmt(min(vals))}–{fmt(max(vals))})"


def ratio_fmt(x):
    if x is None:
        return "—"
    return f"{x:.1f}×" if x >= 10 else f"{x:.2f}×"


def pct_fmt(x):
    return "—" if x is None else f"{100 * x:.1f} %"


def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    osname = platform.system()
    if os.path.exists("/etc/os-release"):
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    osname = line.split("=", 1)[1].strip().strip('"')
    iperf = subprocess.run(["iperf3", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return {"nproc": os.cpu_count(), "kernel": platform.release(), "cpu": cpu, "mem_gib": round(mem_kb / 2**20, 1),
            "os": osname, "commit": L.git_commit(),
            "iperf3": iperf, "loadavg": open("/proc/loadavg").read().split()[:3]}


# ---------------------------------------------------------------------------
# plots (gnuplot, pngcairo)


def gnuplot(script, outdir):
    if shutil.which("gnuplot") is None:
        return "gnuplot is not installed (hack/install-deps.sh installs gnuplot-nox)"
    p = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True, cwd=outdir, timeout=60)
    if p.returncode != 0:
        return f"gnuplot failed: {p.stderr.strip()[:500]}"
    return None


def plot_cdf(path, series, title):
    """series: [(label, [[us, fraction], ...])] -> PNG: the CDF (latency on a
    log axis) and, beside it, the tail (fraction of requests slower, log-log)."""
    outdir = os.path.dirname(path)
    cdf_plots, tail_plots = [], []
    for i, (label, cdf) in enumerate(series):
        dat = os.path.join(outdir, f".cdf-{i}.dat")
        with open(dat, "w") as f:
            prev = 0.0
            for us, frac in cdf:
                f.write(f"{us / 1000.0:.4f} {prev:.6f}\n{us / 1000.0:.4f} {frac:.6f}\n")
                prev = frac
        cdf_plots.append(f"'{dat}' using 1:2 with lines lw 2 lc {i + 1} notitle")
        tail_plots.append(f"'{dat}' using 1:(1-$2 > 0 ? 1-$2 : 1/0) with lines lw 2 lc {i + 1} title '{label}'")
    script = (f"set terminal pngcairo size 1200,560 font 'sans,11'\nset output '{path}'\n"
              f"set multiplot title '{title}' layout 1,2\n"
              "set logscale x\nset format x '%g'\nset xlabel 'request latency (ms, log scale)'\n"
              "set grid xtics ytics mxtics\nunset key\n"
              "set ylabel 'fraction of requests'\nset yrange [0:1.02]\n"
              f"plot {', '.join(cdf_plots)}\n"
              "set key bottom left reverse Left box opaque\nset logscale y\nset format y '10^{%L}'\n"
              "set yrange [1e-4:1]\nset ylabel 'fraction of requests slower "
              "(tail, log scale)'\n"
              f"plot {', '.join(tail_plots)}\nunset multiplot\n")
    err = gnuplot(script, outdir)
    for i in range(len(series)):
        os.unlink(os.path.join(outdir, f".cdf-{i}.dat"))
    return err


def plot_p99(path, rows, title):
    """rows: [(label, median_us, min_us, max_us)] -> PNG of p99 with min-max bars (log y)."""
    outdir = os.path.dirname(path)
    dat = os.path.join(outdir, ".p99.dat")
    with open(dat, "w") as f:
        for i, (label, m, lo, hi) in enumerate(rows):
            f.write(f"{i} \"{label}\" {m / 1000:.4f} {lo / 1000:.4f} {hi / 1000:.4f}\n")
    script = (f"set terminal pngcairo size 960,540 font 'sans,11'\nset output '{path}'\nset title '{title}'\n"
              "set logscale y\nset ylabel 'inference p99 (ms, log scale; median and min–max)'\nset grid ytics\n"
              f"set xrange [-0.6:{len(rows) - 0.4}]\nset xtics rotate by -25\nset format y '%g'\nunset key\n"
              f"plot '{dat}' using 1:3:4:5:xtic(2) with yerrorbars pt 7 ps 1.5 lw 2\n")
    err = gnuplot(script, outdir)
    os.unlink(dat)
    return err


def plot_timeline(path, dyns, title):
    """dyns: run_dynamic results -> p99 per window over time, mode changes marked."""
    outdir = os.path.dirname(path)
    plots, sets = [], []
    for i, d in enumerate(dyns):
        dat = os.path.join(outdir, f".tl-{i}.dat")
        with open(dat, "w") as f:
            for t, p99, n in d["windows"]:
                if p99 is not None and n:
                    f.write(f"{t:.3f} {p99 / 1000:.4f}\n")
        plots.append(f"'{dat}' using 1:2 with linespoints pt 7 ps 0.4 lw 1.5 title 'inference p99 per 100 ms: "
                     f"{d['title']}'")
        gdat = os.path.join(outdir, f".gp-{i}.dat")
        with open(gdat, "w") as f:
            for t, bps in d["goodput"]:
                f.write(f"{t:.3f} {bps / 1e6:.1f}\n")
        plots.append(f"'{gdat}' using 1:2 axes x1y2 with steps dt 2 lw 1 title 'training goodput: {d['title']}'")
        for k, (t, m) in enumerate(d.get("mode_changes", [])):
            t = max(0.0, t)
            if t > 0.05:  # the first entry is the mode the agent started in
                sets.append(f"set arrow from {t:.3f}, graph 0 to {t:.3f}, graph 1 nohead dt 3 lw 1.5 "
                            "lc rgb 'dark-green'\n")
            sets.append(f"set label 'agent mode: {m}' at {t:.3f}, graph {0.95 - 0.06 * k:.2f} offset 0.5,0 "
                        "tc rgb 'dark-green'\n")
    arrive = dyns[0]["inference_arrived_s"]
    sets.append(f"set arrow from {arrive:.3f}, graph 0 to {arrive:.3f}, graph 1 nohead lw 1 lc rgb 'gray'\n"
                f"set label 'inference pod arrives' at {arrive:.3f}, graph 0.62 offset 0.5,0 tc rgb 'gray40'\n")
    script = (f"set terminal pngcairo size 1100,560 font 'sans,11'\nset output '{path}'\nset title '{title}'\n"
              "set xlabel 'time since the training pods started (s)'\nset logscale y\nset format y '%g'\n"
              "set ylabel 'inference p99 per 100 ms window (ms, log)'\nset y2label 'training goodput (Mbit/s)'\n"
              "set y2range [0:*]\nset y2tics\nset ytics nomirror\nset grid xtics ytics\nset key outside bottom center "
              f"horizontal\n{''.join(sets)}plot {', '.join(plots)}\n")
    err = gnuplot(script, outdir)
    for i in range(len(dyns)):
        for n in (f".tl-{i}.dat", f".gp-{i}.dat"):
            os.unlink(os.path.join(outdir, n))
    return err


# ---------------------------------------------------------------------------
# demo


def qdisc_kind(tc_line):
    """'qdisc replace dev X parent 1:10 handle 10: fq_codel ...' -> 'fq_codel ...' (kind and options)."""
    tok = str(tc_line or "").split()
    if "handle" in tok:
        i = tok.index("handle") + 2
        return " ".join(tok[i:i + 3])
    return " ".join(tok[-3:])


def demo(build):
    """Both directions, small responses from the project's loadgen, cubic:
    idle, deep FIFO and aiqos; a table per direction and the latency CDFs."""
    t_start = time.monotonic()
    outdir = os.path.join(build, "demo")
    os.makedirs(outdir, exist_ok=True)
    w = O.Workload(cell_s=float(os.environ.get("BENCH_SECONDS", 8)), warm_s=2.0)
    cc = "cubic"
    agent_ok = L.Agent.available(build)
    lab = L.Lab(build, rate_mbit=int(os.environ.get("BENCH_RATE_MBIT", L.DEFAULT_RATE_MBIT)))
    spec = O.load_spec("small", lab.rate_mbit, w)
    log("aiqos demo: inference latency while training fills the node's link, in both directions\n")
    log(f"The lab (network namespaces on this machine): a node whose link is a {lab.rate_mbit} Mbit/s bottleneck in\n"
        f"both directions, each with a deep {lab.fifo_bytes / 1e6:.1f} MB FIFO (what NIC and switch port queues do by\n"
        "default). Pods are created through the real CNI chain (ptp + host-local; then aiqos in the aiqos arm).\n"
        f"Training: {w.n_train} pods x {w.flows} iperf3 flows. Inference: {spec.text} (loadgen, open loop,\n"
        f"{w.cell_s:g} s), latency counted from each request's scheduled send time. Congestion control {cc}.\n"
        f"  egress:   {O.DIRECTION_TEXT['egress'].split(': ', 1)[1]}\n"
        f"  download: {O.DIRECTION_TEXT['download'].split(': ', 1)[1]}\n\n"
        "aiqos reads each pod's annotation ai.workload (training | inference); its agent sees both kinds on the\n"
        "node and puts the uplink in mode \"mixed\": inference first, training keeps a floor and everything\n"
        "inference leaves unused, each class with its own short queue.\n")
    results = {}
    failed = None
    try:
        lab.setup()
        for d in O.DIRECTIONS:
            for arm in ("idle", "fifo", "aiqos"):
                if arm == "aiqos" and not agent_ok:
                    failed = (f"the aiqos arm needs the agent: {build}/bin/aiqos-agent and aiqosctl are not built")
                    break
                log(f"  running: {d}, {O.ARMS[arm]['title']} ...")
                rs = O.run_instance(lab, arm, d, cc, [("small", "loadgen")], w, 0, outdir, log=lambda *_: None)
                results[(d, arm)] = rs[0]
            if failed:
                break
        agent_download = O.agent_supports(lab, "downlinkRate")
    except L.LabError as e:
        failed = str(e)
        agent_download = False
    finally:
        for p in lab.teardown():
            log(f"teardown: {p}")
    for d in O.DIRECTIONS:
        rows = [(arm, results[(d, arm)]) for arm in ("idle", "fifo", "aiqos") if (d, arm) in results]
        if not rows:
            continue
        log(f"\n{d}:")
        log(f"  {'arm':28}{'p50':>9} {'p99':>9} {'p99.9':>9}    {'training':>12}  {'errors':>6}  node mode")
        for arm, r in rows:
            log(f"  {r['title']:28}{ms(r['p50_us']):>9} {ms(r['p99_us']):>9} {ms(r['p999_us']):>9}    "
                f"{mbit(r.get('goodput_bps')):>12}  {r['errors'] + r['timeouts']:>6}  {r.get('agent_mode') or '—'}")
        f, a, i = results.get((d, "fifo")), results.get((d, "aiqos")), results.get((d, "idle"))
        if f and a and a["p99_us"] and f.get("goodput_bps") and a.get("goodput_bps"):
            log(f"  -> with aiqos, inference p99 is {f['p99_us'] / a['p99_us']:.1f}x lower than with the deep FIFO "
                f"({ms(a['p99_us'])} vs {ms(f['p99_us'])}); training keeps "
                f"{100 * a['goodput_bps'] / f['goodput_bps']:.0f} % of its goodput"
                + (f"; {a['p99_us'] / i['p99_us']:.1f}x the unloaded p99." if i and i["p99_us"] else "."))
        if d == "download" and a and not agent_download:
            log("  (this agent has no download tree — no `downlinkRate` key — so the queue stays at the wire's port\n"
                "   toward the node, where nothing on the node acts)")
        elif d == "download" and a:
            log(f"  queue on the node (ifb {', '.join(a.get('node_ifbs') or []) or '—'}): max "
                f"{a['node_backlog_max_b'] / 1000:.0f} kB; at the wire's port toward the node: max "
                f"{a['bottleneck_backlog_max_b'] / 1000:.0f} kB")
    a = results.get(("egress", "aiqos"))
    if a and a.get("agent_uplink_effective"):
        eff = a["agent_uplink_effective"]
        log(f"\nWhat the agent did: mode {a.get('agent_mode')} ({a.get('mode_wait_s', 0):.2f} s after the pods were "
            "added); on the uplink (as applied):")
        for line in eff[:14]:
            log(f"    tc {line}")
        if len(eff) > 14:
            log(f"    ... ({len(eff) - 14} more)")
    series = []
    for (d, arm), r in results.items():
        with contextlib.suppress(OSError, ValueError, KeyError):
            with open(os.path.join(outdir, r["client_file"])) as fh:
                series.append((f"{d}: {r['title']}", json.load(fh)["cdf"]))
    png = os.path.join(outdir, "latency-cdf.png")
    if series:
        err = plot_cdf(png, series, f"inference request latency, {lab.rate_mbit} Mbit/s link shared with training")
        log(f"\nplot: {png}" if err is None else f"\nplot: not written: {err}")
    with open(os.path.join(outdir, "results.json"), "w") as fh:
        json.dump({f"{d}-{arm}": r for (d, arm), r in results.items()}, fh, indent=1)
    log(f"raw results: {outdir}/ ({time.monotonic() - t_start:.0f} s)")
    if failed:
        log(f"\ndemo incomplete: {failed}")
        return 1
    return 0


# ---------------------------------------------------------------------------
# bench


def run_p4(build, outdir, reps, w, ccs, arms):
    lab = L.Lab(build, rate_mbit=int(os.environ.get("BENCH_RATE_MBIT", L.DEFAULT_RATE_MBIT)))
    results, skipped, dynamic = [], {}, []
    try:
        lab.setup()
        runnable = []
        for arm in arms:
            ok, why = O.arm_available(lab, arm)
            if ok:
                runnable.append(arm)
            else:
                skipped[arm] = why
                log(f"P4: arm '{arm}' skipped: {why}")
        combos = [("idle", "cubic")] if "idle" in runnable else []
        combos += [(a, cc) for a in runnable if a != "idle" for cc in ccs]
        for rep in range(reps):
            # interleave: every repetition runs every arm, starting one later each time
            order = combos[rep % len(combos):] + combos[:rep % len(combos)]
            for arm, cc in order:
                t = time.monotonic()
                r = O.run_arm(lab, arm, cc, w if arm != "idle" else w, rep, outdir, log=log)
                results.append(r)
                log(f"P4 rep {rep + 1}/{reps} {arm:9} {cc:5}: p50 {ms(r['p50_us']):>8} p99 {ms(r['p99_us']):>8} "
                    f"p99.9 {ms(r['p999_us']):>8} goodput {mbit(r.get('goodput_bps')):>12} "
                    f"(load {r['loadavg_start']:.1f}, {time.monotonic() - t:.0f} s)")
        return lab, results, skipped, runnable
    except BaseException:
        for p in lab.teardown():
            log(f"teardown: {p}")
        raise


def run_dynamic_all(lab, outdir, w, runnable):
    dyn = []
    for arm in ("fifo", "aiqos"):
        if arm in runnable:
            log(f"dynamic re-tune experiment: {arm} ...")
            dyn.append(O.run_dynamic(lab, arm, "cubic", w, outdir, log=log))
    return dyn


def summarize(results, ccs):
    """Per (arm, cc): medians and ranges; ratios per repetition against idle and the peers."""
    by = {}
    for r in results:
        by.setdefault((r["arm"], r["cc"]), []).append(r)
    idle = {r["rep"]: r for r in results if r["arm"] == "idle"}
    rows = {}
    for (arm, cc), rs in by.items():
        row = {"arm": arm, "cc": cc, "title": rs[0]["title"], "n": len(rs)}
        for k in ("p50_us", "p99_us", "p999_us", "goodput_bps", "goodput_link", "retransmits", "qdisc_ce_marks",
                  "sender_ce_delivered", "wire_drops", "uplink_drops", "wire_backlog_max_b", "uplink_backlog_max_b",
                  "errors", "send_lag_p99_us", "loadavg_start"):
            row[k] = [r.get(k) for r in rs]
        row["p99_vs_idle"] = [r["p99_us"] / idle[r["rep"]]["p99_us"] for r in rs if r["rep"] in idle]
        row["modes"] = sorted({r.get("agent_mode") for r in rs if r.get("agent_mode")})
        rows[(arm, cc)] = row
    # per-repetition ratios of aiqos against each peer
    peers = {}
    for cc in ccs:
        a = {r["rep"]: r for r in results if r["arm"] == "aiqos" and r["cc"] == cc}
        for peer in ("fifo", "bandwidth", "fq_codel"):
            p = {r["rep"]: r for r in results if r["arm"] == peer and r["cc"] == cc}
            reps = sorted(set(a) & set(p))
            if reps:
                peers[(peer, cc)] = {"p99_ratio": [p[k]["p99_us"] / a[k]["p99_us"] for k in reps],
                                     "goodput_ratio": [a[k]["goodput_bps"] / p[k]["goodput_bps"] for k in reps]}
    return rows, peers


def p4_tables(rows, ccs, arms):
    """Two markdown tables: inference latency, then training and queues."""
    def n0(v):
        return f"{v:.0f}"

    def kb(v):
        return f"{v / 1000:.0f} kB"

    lat = ["| arm | cc | inference p50 | p99 | p99.9 | p99 / idle p99 | node mode |", "|---|---|---|---|---|---|---|"]
    trn = ["| arm | cc | training goodput | goodput / link | retransmits | CE marks: qdiscs / senders | "
           "bottleneck drops | max backlog: bottleneck / node uplink |", "|---|---|---|---|---|---|---|---|"]
    for arm in arms:
        for cc in (["cubic"] if arm == "idle" else ccs):
            row = rows.get((arm, cc))
            if not row:
                continue
            tr = arm != "idle"
            c = cc if tr else "—"
            lat.append(f"| {row['title']} | {c} | {med_range(row['p50_us'], ms)} | {med_range(row['p99_us'], ms)} | "
                       f"{med_range(row['p999_us'], ms)} | {med_range(row['p99_vs_idle'], ratio_fmt) if tr else '1'} | "
                       f"{', '.join(row['modes']) or '—'} |")
            if tr:
                trn.append(f"| {row['title']} | {c} | {med_range(row['goodput_bps'], mbit)} | "
                           f"{med_range(row['goodput_link'], pct_fmt)} | {med_range(row['retransmits'], n0)} | "
                           f"{med_range(row['qdisc_ce_marks'], n0)} / {med_range(row['sender_ce_delivered'], n0)} | "
                           f"{med_range(row['wire_drops'], n0)} | {med_range(row['wire_backlog_max_b'], kb)} / "
                           f"{med_range(row['uplink_backlog_max_b'], kb)} |")
    return "\n".join(lat), "\n".join(trn)


def verdict_table(rows, peers, ccs):
    """P4 targets (docs/benchmarks.md) against the medians of this run (aiqos vs idle and the deep FIFO)."""
    out = ["| cc | aiqos p99 / idle p99 (≤ 2×) | deep FIFO p99 / aiqos p99 (≥ 10×) | aiqos goodput / FIFO goodput "
           "(≥ 95 %) |", "|---|---|---|---|"]
    any_row = False
    for cc in ccs:
        a = rows.get(("aiqos", cc))
        f = peers.get(("fifo", cc))
        if not a or not f or not a["p99_vs_idle"]:
            continue
        any_row = True
        vi = statistics.median(a["p99_vs_idle"])
        vf = statistics.median(f["p99_ratio"])
        vg = statistics.median(f["goodput_ratio"])
        def mark(ok):
            return "met" if ok else "**missed**"
        out.append(f"| {cc} | {ratio_fmt(vi)}: {mark(vi <= 2)} | {ratio_fmt(vf)}: {mark(vf >= 10)} | "
                   f"{pct_fmt(vg)}: {mark(vg >= 0.95)} |")
    return "\n".join(out) if any_row else ""


def peers_table(peers, ccs):
    out = ["| aiqos against | cc | inference p99: peer / aiqos | training goodput: aiqos / peer |", "|---|---|---|---|"]
    for (peer, cc), v in sorted(peers.items(), key=lambda kv: (ALL_ARMS.index(kv[0][0]), kv[0][1])):
        out.append(f"| {O.ARMS[peer]['title']} | {cc} | {med_range(v['p99_ratio'], ratio_fmt)} | "
                   f"{med_range(v['goodput_ratio'], pct_fmt)} |")
    return "\n".join(out)


def p4_plots(outdir, results, rows, ccs, arms, rate_mbit):
    """The CDF of the repetition with the median p99 per arm, and p99 ranges."""
    plots = {}
    for cc in ccs:
        series = []
        for arm in arms:
            rs = sorted((r for r in results if r["arm"] == arm and (r["cc"] == cc or arm == "idle")),
                        key=lambda r: r["p99_us"])
            if rs:
                r = rs[len(rs) // 2]
                with open(os.path.join(outdir, r["loadgen_file"])) as f:
                    series.append((r["title"], json.load(f)["cdf"]))
        png = os.path.join(outdir, f"p4-cdf-{cc}.png")
        err = plot_cdf(png, series, f"inference latency, training {cc}, {rate_mbit} Mbit/s bottleneck "
                                    "(repetition with the median p99)")
        plots[f"cdf-{cc}"] = (png, err)
    prow = []
    for arm in arms:
        for cc in (["cubic"] if arm == "idle" else ccs):
            row = rows.get((arm, cc))
            if row:
                v = row["p99_us"]
                prow.append((f"{arm} {cc}" if arm != "idle" else "idle", statistics.median(v), min(v), max(v)))
    png = os.path.join(outdir, "p4-p99.png")
    plots["p99"] = (png, plot_p99(png, prow, "inference p99 per arm"))
    return plots


def run_p1(build):
    log("P1: test/bench/cni-latency.sh ...")
    t = time.monotonic()
    p = subprocess.run(["bash", os.path.join(REPO, "test", "bench", "cni-latency.sh"), build], capture_output=True,
                       text=True, timeout=3600)
    log(p.stdout)
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-3000:], "seconds": time.monotonic() - t}


def run_agent_bench(build):
    """P2/P3/P5 belong to the agent (`make bench-agent`). Run it when
    the agent is built and the target exists; otherwise say why not."""
    if not L.Agent.available(build):
        return {"skipped": f"{build}/bin/aiqos-agent is not built yet"}
    probe = subprocess.run(["make", "-C", REPO, "-n", "bench-agent", f"BUILD={build}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return {"skipped": "the agent is built but `make bench-agent` does not exist yet"}
    log("P2/P3/P5: make bench-agent ...")
    p = subprocess.run(["make", "-C", REPO, "-s", "--no-print-directory", "bench-agent", f"BUILD={build}"],
                       capture_output=True, text=True, timeout=3600)
    log(p.stdout[-4000:])
    return {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-3000:]}


def run_linerate(build, outdir):
    """P6 line rate: test/bench/linerate.py, its own script; the
    section below is its markdown table."""
    if not L.Agent.available(build):
        return {"skipped": f"{build}/bin/aiqos-agent is not built"}
    log("P6: test/bench/linerate.py ...")
    md = os.path.join(outdir, "linerate.md")
    p = subprocess.run([sys.executable, os.path.join(HERE, "linerate.py"), "--build", build, "--sysctl-arms",
                        "--json", os.path.join(outdir, "linerate.json"), "--markdown", md],
                       capture_output=True, text=True, timeout=3600)
    log(p.stdout[-4000:])
    if p.returncode != 0 or not os.path.exists(md):
        return {"skipped": f"linerate.py exited {p.returncode}: {p.stderr.strip()[-500:]}"}
    with open(md) as f:
        return {"markdown": f.read()}


# `make bench-agent` prints "key: value" lines; the ones with a target (docs/benchmarks.md)
AGENT_METRICS = [
    ("p2_add_pod_p50_ms", "P2 pod added → kernel re-tuned, p50 (ms)", None),
    ("p2_add_pod_p99_ms", "P2 pod added → kernel re-tuned, p99 (ms)", ("<=", 20, "≤ 20 ms (+ debounce)")),
    ("p2_delete_pod_p99_ms", "P2 pod deleted → kernel re-tuned, p99 (ms)", ("<=", 20, "≤ 20 ms (+ debounce)")),
    ("rss_kib", "P3 agent RSS with the pods below (KiB)", ("<=", 16384, "≤ 16 MiB")),
    ("rss_peak_kib", "P3 agent peak RSS (KiB)", ("<=", 16384, "≤ 16 MiB")),
    ("idle_cpu_pct", "P3 CPU when idle (%)", ("<=", 0.5, "~0")),
    ("churn_cpu_pct", "P3 CPU under churn (%)", None),
    ("pods", "pods on the node", None),
    ("first_reconcile_250_ms", "P5 reconcile of 250 pods (ms)", ("<=", 50, "≤ 50 ms")),
    ("uplink_objects", "P5 tc objects on the uplink", None),
    ("watch_decode_events_per_s", "P5 watch decoding (events/s per core)", (">=", 50000, "≥ 50k/s")),
]


def agent_bench_lines(ab):
    vals = {}
    for line in ab.get("stdout", "").splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() and " " not in k.strip():
            vals[k.strip()] = v.strip()
    out = [f"`make bench-agent` (issue #3's benchmark; exit {ab.get('rc')}):", "",
           "| metric | value | target |", "|---|---|---|"]
    known = set()
    for key, label, target in AGENT_METRICS:
        known.add(key)
        if key not in vals:
            out.append(f"| {label} | not measured by `make bench-agent` | {target[2] if target else ''} |")
            continue
        verdict = ""
        if target:
            try:
                x = float(vals[key])
                ok = x <= target[1] if target[0] == "<=" else x >= target[1]
                verdict = f"{target[2]}: {'met' if ok else 'MISSED'}"
            except ValueError:
                verdict = target[2]
        out.append(f"| {label} | {vals[key]} | {verdict} |")
    rest = [f"{k}: {v}" for k, v in vals.items() if k not in known]
    if rest:
        out += ["", "Everything else it printed:", "", "```", *rest, "```"]
    return out + [""]


def write_docs(path, docs_dir, ctx):
    m = ctx["machine"]
    w = ctx["workload"]
    lines = [
        "# Benchmarks",
        "",
        f"Generated by `{ctx['command']}` on {ctx['date']} — every number below comes from that run "
        "(do not edit by hand; run the command again).",
        "",
        "## Machine",
        "",
        f"- {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']} GiB, kernel {m['kernel']}, {m['os']}",
        f"- commit {m['commit']}; {m['iperf3']}",
        f"- load average when the run started: {' '.join(m['loadavg'])} (other work on the machine shows up as "
        "latency; the P4 detail table reports the load average per arm and loadgen's own send lag)",
        f"- vegeta: {ctx.get('vegeta') or 'not built'}",
        *([f"- SSE stack (client sse): {ctx['sse_stack']}"] if ctx.get("sse_stack") else []),
        f"- total time: {ctx['seconds'] / 60:.1f} min (the P4 matrix: {ctx.get('matrix_seconds', 0) / 60:.1f} min)",
        "",
    ]
    # P1
    lines += ["## P1 — CNI exec latency", "", "`test/bench/cni-latency.sh` (aiqos vs the reference `bandwidth` "
              "and `tuning` plugins and the exec floor; sequential and 10 concurrent):", ""]
    p1 = ctx.get("p1")
    if p1 is None:
        lines += ["Not run (`--skip-p1`).", ""]
    else:
        lines += ["```", p1["stdout"].rstrip(), "```", ""]
        if p1["rc"] != 0:
            lines += [f"cni-latency.sh exited {p1['rc']}: `{p1['stderr'].strip()[-500:]}`", ""]
    # P4
    w = ctx["workload"]
    loads = ctx["loads"]
    rates = ctx.get("rates") or [ctx["rate_mbit"]]
    fifo_ms = ctx["fifo_bytes"] * 8 / (ctx["rate_mbit"] * 1e3)
    if len(rates) > 1:
        fifo_text = (f"a deep byte FIFO on each port sized in time, {fifo_ms:.0f} ms at the rate: "
                     + ", ".join(f"{L.fifo_bytes_for(r) / 1e6:.1f} MB at {M.rate_text(r)}" for r in rates))
    else:
        fifo_text = f"a deep {ctx['fifo_bytes'] / 1e6:.1f} MB byte FIFO on each port ({fifo_ms:.0f} ms at the rate)"
    lines += [
        "## P4 — the point: inference latency while training fills the link, across a workload matrix",
        "",
        "The lab (`test/bench/lab.py`): network namespaces on this machine. A *node* namespace is the pods' host; "
        f"its uplink crosses a *wire* namespace that is the bottleneck link in both directions "
        f"({' or '.join(M.rate_text(r) for r in rates)} HTB with {fifo_text}, what a NIC or switch "
        "port queue does by default; GSO on) to a *fabric* namespace with the servers and clients (iperf3, "
        "`loadgen`, nginx, vegeta). Pods are namespaces attached through the real CNI chain (reference `ptp` + "
        "`host-local`, then `bandwidth` or `aiqos`), executed in the node namespace.",
        "",
        "The matrix (each cell `DIRECTION-LOAD-CLIENT-CC`):",
        "",
        *[f"- **{d}** — {O.DIRECTION_TEXT[d].split(': ', 1)[1]}; the bottleneck queue is the wire's port "
          f"{'toward the node' if d == 'download' else 'toward the fabric'}." for d in O.DIRECTIONS],
        *[f"- inference load **{lo}**: {loads[lo]}." for lo in O.LOADS + tuple(O.STREAM_LOADS) if lo in loads],
        *[f"- client **{c}**: {O.CLIENT_TEXT[c]}." for c in O.CLIENT_TEXT
          if c in O.CLIENTS or any(s["client"] == c for s in ctx.get("summ", {}).values())],
        "- congestion control **cubic** or **bbr**, set explicitly in every namespace (pods' and the fabric's "
        "default, iperf3 `-C`, loadgen `--cc`); the host's `tcp_allowed_congestion_control` gets the missing one "
        "for the run (a pod netns may only select listed ones).",
        "",
        f"Training: {w['n_train']} pods × {w['flows']} iperf3 flows (upload in egress cells, `-R` download in "
        f"download cells), running through all the cells of an arm's instance; {w['warm_s']:g} s of training alone "
        f"first. Each cell's inference load runs {w['cell_s']:g} s (the first {w['lg_warmup_s']:g} s not counted); "
        f"a request still unanswered {w['timeout_s']:g} s after the end is a timeout. Training goodput per cell is "
        "iperf3's 0.5 s intervals inside the cell's window. loadgen counts latency from each request's "
        "*scheduled* send time (Poisson, no coordinated omission); vegeta from its actual send.",
        "",
        "Arms (one instance per direction × cc, its cells in a row):",
        "- **idle**: the inference pod alone (the cell's unloaded baseline).",
        "- **default deep FIFO**: ptp + host-local only; the queue builds in the bottleneck FIFO.",
        f"- **reference bandwidth plugin**: ptp + `bandwidth` on the training pods with containerd's runtimeConfig "
        f"(egressRate, or ingressRate in download cells, {ctx['bw_per_pod_mbit']:.0f} Mbit/s each"
        + (f" at {M.rate_text(ctx['rate_mbit'])}, scaled with the rate" if len(rates) > 1 else "") + " = "
        f"{100 * ctx['bw_share']:.0f} % of the link in total, burst 2^32−1 bits): its 25 ms TBF.",
        f"- **aiqos**: ptp + `aiqos` + `aiqos-agent` (fake API server), config `uplinkRate: {ctx['rate_mbit']}mbit`"
        + (" (the cell's rate)" if len(rates) > 1 else "")
        + (f", and `downlinkRate: {ctx['rate_mbit']}mbit` in download cells" if ctx.get("agent_download") else
           "; this agent has no download tree (no `downlinkRate`): download cells run with the egress tree only")
        + "; the agent must report mode `mixed` before traffic starts. The node's uplink is a veth with one tx "
        "queue per CPU, and this kernel has no fq: with several queues its shaper is the gated HTB (`htb-ifb`: "
        "the tree on `aiqos-ifb1`, taken while the upload is over half the shaped rate), with one HTB at the "
        "root.",
        "",
        f"{ctx['reps']} repetitions; per repetition and (direction, cc) every arm runs in turn, the order rotated "
        "by the repetition (arms interleaved), the cells' order too; a cell whose repetitions disagree (met in one, "
        f"missed in another) gets repetitions added the same way until it has {M.DISAGREE_REPS} (the tables' *reps* "
        "column). Medians; ratios are computed per repetition (same cell, same repetition), then their median. "
        f"Acceptance per cell (DESIGN §6 P4, issue 30 §4), for the aiqos arm: {M.rule_text()}. "
        + (f"At {' and '.join(M.rate_text(r) for r in rates[1:])} the small, burst and token-stream loads run "
           "again on the routed datapath (cells named `CELL@RATE`); whether this machine holds a cell's rate is "
           "measured, not assumed: the deep-FIFO arm's training goodput plus the inference load offered must reach "
           f"{100 * M.HELD_SHARE:.0f} % of the rate and its bottleneck must queue, and the CPUs must leave room: "
           "the *cpu* arm runs there too, the same training pods routed over a second wire identical to the first "
           "(lab.route_side), inference alone on the first (the CPUs' time and the kernel's per-CPU input queues "
           "still shared, as on any node); where its inference p99 already breaks the bound and aiqos's is no "
           "higher, the machine's work alone does, and the cell is not held. " if len(rates) > 1 else "")
        + ("The load generators, nginx and the SSE stack's server and client run at normal priority, as an "
           "inference server and its clients do (lab.LOADGEN_RT_PRIO: on two CPUs a real-time process starves the "
           "kernel's ksoftirqd, where the kernel defers softirq work under load, a shaper's timer-driven dequeues "
           "among it, and whatever else is not real-time); " if not L.LOADGEN_RT_PRIO else
           f"The load generators, nginx and the SSE stack's server and client run at real-time priority "
           f"(SCHED_FIFO {L.LOADGEN_RT_PRIO}, BENCH_RT_PRIO); ")
        + "the machine is shared: the load average per arm and loadgen's own send lag are in the detail table.",
        "",
    ]
    for arm, why in ctx["skipped"].items():
        lines += [f"- **{O.ARMS[arm]['title']}: not run** — {why}."]
    if ctx["skipped"]:
        lines += [""]
    nh = f" ({ctx['not_held']} more not held at this machine's rate)" if ctx.get("not_held") else ""
    lines += [f"### The matrix: {ctx['met']} of {ctx['n_cells']} cells meet the acceptance{nh}", "",
              "The request/response cells (the token-stream and model-load cells are in the next table):", "",
              ctx["matrix_table"], ""]
    if ctx.get("stream_table"):
        lines += ["### Token streams and the model load (issue 30)", "",
                  "Token streams (egress): the client in the fabric reads the pod's lock-step streams (client loadgen: "
                  "loadgen's tokens-server and tokens-client; client sse: SSE responses of uvicorn + sse-starlette "
                  "read by httpx + httpx-sse, the versions in the load's text above, whose idle p99 is mostly the "
                  "Python stack's own time, not the network's); latency is "
                  "each event's one-way delay write → read (p99, p99.9, max: medians over the repetitions), an event "
                  "*missing* is one the stream's sequence skipped or that never arrived; upload kept is training's "
                  "goodput against the FIFO arm's. The model load (download): the inference pod pulls over "
                  f"{O.MODEL_LOAD_CONNS} connections while training downloads and its 8 KiB requests run; training's "
                  "download against the FIFO arm's, the pull's own goodput, the requests' p99.", "",
                  ctx["stream_table"], ""]
    if ctx["failures"]:
        lines += ["Cells that miss it, and why (from the medians above):", "", *ctx["failures"], ""]
    lines += ["The table README.md shows (same run):", "", ctx["readme_block"], ""]
    for key, (png, err) in sorted(ctx["plots"].items()):
        rel = os.path.relpath(png, os.path.dirname(path))
        lines += [f"![{key}]({rel})" if err is None else f"Plot {key} not written: {err}", ""]
    lines += ["### Every arm of every cell", "",
              "Median (min–max) over the repetitions. *Bottleneck drops* are the wire port's (the direction's "
              "bottleneck), *node drops* the node uplink's and its ifbs' qdiscs; *max backlog* is sampled every "
              f"{w['sample_s']:g} s; *send lag* is how late loadgen sent its requests (the machine's noise), in the "
              "token-stream cells with client sse how long after its engine step the SSE server wrote an event.", "",
              ctx["detail_table"], ""]
    # dynamic
    lines += ["## Dynamic re-tune", "",
              "Training pods saturate the link from t = 0; the inference pod arrives at t ≈ 4 s (CNI ADD, API object) "
              "and runs its load to the end; p99 per 100 ms window of send time.", ""]
    dyn = ctx.get("dynamic") or []
    if not any(d["arm"] == "aiqos" for d in dyn):
        lines += ["The aiqos run of this experiment needs the agent (not built for this run); the timeline below "
                  "shows only the arms that ran.", ""]
    for d in dyn:
        ch = ", ".join(f"{m} at {max(0.0, t):.2f} s" for t, m in d.get("mode_changes", [])) or "—"
        lines += [f"- {d['title']}: pod ready at {d['inference_ready_s']:.2f} s; p99 over the run "
                  f"{ms(d['latency_us']['p99'])}; agent modes: {ch}"]
        mixed = [t for t, m in d.get("mode_changes", []) if m == "mixed"]
        if mixed:
            before = [p for t, p, n in d["windows"] if p is not None and n and t < mixed[0]]
            after = [p for t, p, n in d["windows"] if p is not None and n and t >= mixed[0]]
            if before and after:
                lines += [f"  - windows before the switch to mixed ({len(before)}): worst p99 {ms(max(before))}, "
                          f"median {ms(statistics.median(before))}; after ({len(after)}): worst {ms(max(after))}, "
                          f"median {ms(statistics.median(after))}. Until the agent adds the pod's filter, its "
                          "traffic is unclassified and falls into the default class, which already ranks above "
                          "training (HTB prio 1 vs 2)."]
    if dyn:
        png, err = ctx["plots_dyn"]
        rel = os.path.relpath(png, os.path.dirname(path))
        lines += ["", f"![re-tune timeline]({rel})" if err is None else f"Plot not written: {err}", ""]
    # agent
    lines += ["## P2 / P3 / P5 — agent reaction, footprint, scale", ""]
    ab = ctx["agent_bench"]
    if "skipped" in ab:
        lines += [f"Not run: {ab['skipped']}. These benchmarks belong to the agent (`make bench-agent`); "
                  "`make bench` runs and includes them once they exist.", ""]
    else:
        lines += agent_bench_lines(ab)
    # P6 (test/bench/linerate.py)
    lr = ctx.get("linerate") or {"skipped": "this run has no line-rate part (a saved run from before "
                                            "test/bench/linerate.py, or `make bench-lab`); `make bench` or "
                                            "`make bench-linerate` measures it"}
    lines += ["## P6 — line rate (a fast multi-queue uplink, no bottleneck)", ""]
    lines += [lr["markdown"],
              "Reading it: on a `noqueue` uplink aiqos installs nothing unless a rate is configured (nothing "
              "waits there to order); on the `mq` uplink mixed mode keeps `mq`, grafts a child per tx queue "
              "and adds the BPF classifier (on this kernel `pfifo_fast` children: no fq, fq_codel or prio, so "
              "training and inference mode leave it as it is); `@" + LR.RATE + "` is the shaper the operator asked "
              "for, at a rate the lab does not reach, so the rows show what it costs, not what it shapes. On "
              "this kernel (no fq, so no EDT) that shaper is HTB on the ifb `aiqos-ifb1` behind a gate "
              "(shape `htb-ifb`): the root stays as it is, and a BPF program after the classifier at the "
              "clsact egress hook sends packets through the HTB tree only while the traffic is over half "
              "the shaped rate, which it is not here; so the rows pay the classifier and the gate, not "
              "HTB's work per packet (HTB at the root cost about a fifth: docs/lab/line-rate.md takes it "
              "apart). The `:down` rows: the pods "
              "download at line rate through the download tree a configured rate plans; its gate at the "
              "uplink's ingress lets arrivals under half the shaped rate skip the ifb (HTB at 98 % of the "
              "rate, a second lock), which they do here: what those rows still pay is the gate and the "
              "ACKs' way out past the upload gate (docs/lab/download.md). The `sysctl:` rows are per-pod settings on the training pods alone: "
              "64 MiB buffers (dropped from the training profile after a run whose senders were bbr; the row "
              "is what they cost with cubic), ECN (kept), and "
              "BBR (the profile's first choice of congestion control; on this kernel, which has no fq, "
              "BBR paces inside TCP, and next to cubic it is CPU-bound at a fraction of the rate: the "
              "training profile now takes bbr only where fq made it onto the pod, so here its pods run cubic).",
              "", "`make bench-linerate` runs only this.", ""] if "markdown" in lr else \
        [f"Not run: {lr['skipped']}.", ""]
    lines += ["## Reproduce", "", "```", ctx["command"], "```", "",
              "`make bench-lab` runs only the P4 matrix (tables and plots under `BUILD/bench/`, docs untouched); "
              "a subset: `make bench-lab CELLS='download-*-http-* egress-large-*'` (fnmatch patterns over "
              "`DIRECTION-LOAD-CLIENT-CC`; also `BENCH_CELLS`). `make demo` is the short version (deep FIFO vs "
              "aiqos, both directions); `hack/lab.sh up` sets up the lab and keeps it for exploring by hand until "
              "Ctrl-C; `test/bench/bench.py render BUILD/bench/<run>` regenerates this page (and README's table) "
              "from a saved run (`test/bench/bench.py render-docs` from `docs/bench/results.json`, its plots kept); "
              "`test/bench/streams.py` runs only the token-stream and model-load cells. Environment: `BENCH_REPS`, "
              "`BENCH_SECONDS`, `BENCH_CCS`, `BENCH_ARMS`, `BENCH_CELLS`, `BENCH_RATES` (default `500 10000`: the "
              "second rate for the small, burst and token-stream loads), `BENCH_DATAPATHS`.", "",
              "Raw results (per-arm loadgen/iperf3 JSON, tc dumps): `BUILD/bench/<run>/`; the summary is "
              f"`{os.path.relpath(os.path.join(docs_dir, 'results.json'), REPO)}`.", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def run_matrix(build, outdir, reps, w, ccs, arms, cells, log=log, datapaths=("routed",)):
    """The P4 matrix on each datapath and at each rate of the cells (their
    @RATE, outcome.cell_rate): a lab of its own each, one after the other;
    the other datapaths at the first rate only, the routed one at the first
    rate last, its lab returned up for what follows.
    Returns (lab, results, skipped, runnable arms)."""
    rates = []
    for c in cells:
        if O.cell_rate(c) not in rates:
            rates.append(O.cell_rate(c))
    plan = [(dp, rate) for dp in datapaths for rate in (rates if dp == "routed" else rates[:1])]
    plan.sort(key=lambda p: (p[0] == "routed", p == ("routed", rates[0])))
    results, skipped, runnable = [], {}, []
    import fnmatch  # noqa: PLC0415
    dp_pats = os.environ.get("BENCH_DATAPATH_CELLS", DATAPATH_CELLS).replace(",", " ").split()
    for i, (dp, rate) in enumerate(plan):
        cs = [O.cell_base(c) for c in cells if O.cell_rate(c) == rate]
        if dp != "routed":  # issue 29's cells on the other datapaths (BENCH_DATAPATH_CELLS)
            cs = [c for c in cs if any(fnmatch.fnmatchcase(c, p) for p in dp_pats)]
        # at the further rates the machine's CPUs may be the limit: the "cpu"
        # arm measures it (matrix_report.held)
        dp_arms = arms + ["cpu"] if dp == "routed" and rate != rates[0] and "cpu" not in arms else arms
        log(f"P4: datapath {dp}, {M.rate_text(rate)}: {len(cs)} cells")
        # each datapath's and rate's raw files in a folder of its own (their
        # names are the cell's without either), the routed first rate's at the top
        sub = "" if (dp, rate) == ("routed", rates[0]) else f"{dp}-{rate}mbit"
        os.makedirs(os.path.join(outdir, sub), exist_ok=True)
        lab, res, sk, run = run_matrix_on(build, os.path.join(outdir, sub), reps, w, dp_arms, cs, log, dp, rate)
        for r in res:
            for k in ("client_file", "tc_file"):
                if sub and r.get(k):
                    r[k] = os.path.join(sub, r[k])
        results += res
        skipped.update(sk)
        run = [a for a in run if a in arms]  # the run's arms: those asked for
        runnable = run if not runnable else [a for a in runnable if a in run]
        if i + 1 < len(plan):
            for p in lab.teardown():
                log(f"teardown: {p}")
    return lab, results, skipped, runnable


def cell_reps(results):
    """{cell: repetitions it got} (more than the run's where they disagreed)."""
    out = {}
    for r in results:
        out.setdefault(r["cell"], set()).add(r["rep"])
    return {c: len(v) for c, v in out.items()}


def schedule(cells, arms, first, last):
    """The instances of repetitions first..last-1: per repetition, per
    (direction, cc) group of the cells, every arm in turn, the arms' order
    and the cells' order rotated by the repetition (interleaved).
    [(rep, direction, cc, arm, [(load, client)])]."""
    groups = {}
    for c in cells:
        d, load, client, cc = O.split_cell(c)
        groups.setdefault((d, cc), []).append((load, client))
    out = []
    for rep in range(first, last):
        for (d, cc), gcells in groups.items():
            order = arms[rep % len(arms):] + arms[:rep % len(arms)]
            cs = gcells[rep % len(gcells):] + gcells[:rep % len(gcells)]
            out += [(rep, d, cc, arm, cs) for arm in order]
    return out


def run_matrix_on(build, outdir, reps, w, arms, cells, log, datapath, rate_mbit=L.DEFAULT_RATE_MBIT):
    """The P4 matrix on one datapath at one rate (the bottleneck FIFO sized
    in time, lab.fifo_bytes_for): per repetition, per (direction, cc)
    group, every arm as one instance (rotated by the repetition: arms
    interleaved), its cells in an order rotated by the repetition too. Then
    the cells whose repetitions disagree (met in one, missed in another) get
    repetitions added the same way until they have matrix_report.DISAGREE_REPS."""
    lab = L.Lab(build, rate_mbit=rate_mbit, fifo_bytes=L.fifo_bytes_for(rate_mbit), datapath=datapath)
    results, skipped = [], {}
    try:
        lab.setup()
        runnable = []
        for arm in arms:
            ok, why = O.arm_available(lab, arm)
            if ok:
                runnable.append(arm)
            else:
                skipped[arm] = why
                log(f"P4: arm '{arm}' skipped: {why}")
        need_http = any(O.split_cell(c)[2] == "http" for c in cells)
        if need_http and (lab.vegeta is None or lab.nginx is None):
            raise L.LabError("the HTTP cells need nginx (hack/install-deps.sh) and vegeta (hack/build-vegeta.sh): "
                             f"nginx {lab.nginx or 'missing'}, vegeta {lab.vegeta or 'missing'}")
        if any(O.split_cell(c)[2] == "sse" for c in cells) and lab.sse_python is None:
            raise L.LabError("the sse cells need the HTTP/SSE stack's venv (uvicorn, sse-starlette, httpx, httpx-sse): "
                             "run hack/install-sse.sh (`make bench` and hack/lab.sh do)")

        def run_reps(cs, first, last, what):
            plan = schedule(cs, runnable, first, last)
            for k, (rep, d, cc, arm, gcells) in enumerate(plan):
                t = time.monotonic()
                log(f"P4 {datapath} {M.rate_text(rate_mbit)} {what} rep {rep + 1}/{last} [{k + 1}/{len(plan)}] {arm} "
                    f"{d} {cc}: {len(gcells)} cells")
                results.extend(O.run_instance(lab, arm, d, cc, gcells, w, rep, outdir, log=log))
                log(f"    ({time.monotonic() - t:.0f} s)")
        run_reps(cells, 0, reps, "matrix")
        split = M.disagreeing(results)
        if split and reps < M.DISAGREE_REPS:
            log(f"P4: repetitions disagree in {len(split)} cells ({', '.join(split)}): "
                f"{M.DISAGREE_REPS - reps} more each")
            run_reps(split, reps, M.DISAGREE_REPS, "disagreeing cells")
        return lab, results, skipped, runnable
    except BaseException:
        for p in lab.teardown():
            log(f"teardown: {p}")
        raise


def plot_label(s):
    """A cell's label on the matrix plots (its rate when not the default)."""
    at = f" {M.rate_text(s['rate_mbit'])}" if "@" in s["cell"] else ""
    return f"{s['load']} {s['client']} {s['cc']}{at}"


def plot_matrix(path, summ, direction, arms, title):
    """Median p99 (min–max bars) of every cell of one direction, one series per arm (log y)."""
    outdir = os.path.dirname(path)
    cells = [s for s in summ.values() if s["direction"] == direction]
    if not cells:
        return "no cells in this direction"
    plots = []
    width = 0.8 / max(1, len(arms))
    for j, arm in enumerate(arms):
        dat = os.path.join(outdir, f".mx-{j}.dat")
        with open(dat, "w") as f:
            for i, s in enumerate(cells):
                a = s["arms"].get(arm)
                v = [x for x in (a["p99_us"] if a else []) if x is not None]
                if v:
                    label = plot_label(s)
                    f.write(f"{i + (j - (len(arms) - 1) / 2) * width:.3f} {statistics.median(v) / 1000:.4f} "
                            f"{min(v) / 1000:.4f} {max(v) / 1000:.4f} \"{label}\"\n")
        plots.append(f"'{dat}' using 1:2:3:4 with yerrorbars pt 7 ps 1.2 lw 1.5 title '{O.ARMS[arm]['title']}'")
    xt = ", ".join(f"\"{plot_label(s)}\" {i}" for i, s in enumerate(cells))
    script = (f"set terminal pngcairo size 1200,560 font 'sans,10'\nset output '{path}'\nset title '{title}'\n"
              "set logscale y\nset format y '%g'\nset ylabel 'inference p99 (ms, log; median, min–max)'\n"
              f"set grid ytics\nset xrange [-0.6:{len(cells) - 0.4}]\nset xtics ({xt}) rotate by -30\n"
              f"set key outside bottom center horizontal\nplot {', '.join(plots)}\n")
    err = gnuplot(script, outdir)
    for j in range(len(arms)):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(outdir, f".mx-{j}.dat"))
    return err


CDF_CELLS = ["egress-small-loadgen-cubic", "download-small-loadgen-cubic", "egress-large-http-cubic",
             "download-large-http-cubic", "egress-burst-loadgen-bbr", "download-burst-http-bbr"]


def matrix_plots(outdir, results, summ, arms, rate_mbit):
    plots = {}
    for d in O.DIRECTIONS:
        png = os.path.join(outdir, f"p4-matrix-{d}.png")
        if any(s["direction"] == d for s in summ.values()):
            rates = sorted({s["rate_mbit"] or rate_mbit for s in summ.values() if s["direction"] == d})
            plots[f"matrix-{d}"] = (png, plot_matrix(png, summ, d, arms, f"inference p99 per cell, {d}, "
                                                                         f"{' / '.join(M.rate_text(r) for r in rates)} "
                                                                         "bottleneck"))
    for cell in CDF_CELLS:
        if cell not in summ:
            continue
        series = []
        for arm in arms:
            rs = sorted((r for r in results if r["cell"] == cell and r["arm"] == arm and r.get("p99_us")),
                        key=lambda r: r["p99_us"])
            if rs:
                r = rs[len(rs) // 2]
                with contextlib.suppress(OSError, ValueError, KeyError):
                    with open(os.path.join(outdir, r["client_file"])) as f:
                        series.append((r["title"], json.load(f)["cdf"]))
        if series:
            png = os.path.join(outdir, f"p4-cdf-{cell}.png")
            plots[f"cdf-{cell}"] = (png, plot_cdf(png, series, f"inference latency, {cell} (repetition with the "
                                                               "median p99)"))
    return plots


def bench(build, full, reps, skip_p1=False):
    t0 = time.monotonic()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    outdir = os.path.join(build, "bench", f"lab-{stamp}")
    os.makedirs(outdir, exist_ok=True)
    w = O.Workload(cell_s=float(os.environ.get("BENCH_SECONDS", 4.5)), warm_s=2.0, lg_warmup_s=0.5)
    ccs = os.environ.get("BENCH_CCS", "cubic bbr").split()
    arms = os.environ.get("BENCH_ARMS", " ".join(ALL_ARMS)).split()
    unknown = [a for a in arms if a not in O.ARMS or a == "plugin"] + [c for c in ccs if c not in L.CCS]
    if unknown or not ccs:
        log(f"BENCH_ARMS/BENCH_CCS: unknown {unknown} (arms: {' '.join(ALL_ARMS)}; ccs: {' '.join(L.CCS)}), or "
            "BENCH_CCS empty")
        return 2
    cells_env = os.environ.get("BENCH_CELLS") or os.environ.get("CELLS") or ""
    rates = O.parse_rates(os.environ.get("BENCH_RATES") or os.environ.get("BENCH_RATE_MBIT") or DEFAULT_RATES)
    cells = O.select_cells(cells_env, ccs, rates)
    datapaths = os.environ.get("BENCH_DATAPATHS", "routed").split()
    if not datapaths or any(d not in L.DATAPATHS for d in datapaths):
        log(f"BENCH_DATAPATHS: {' '.join(datapaths) or '(empty)'}: want some of {' '.join(L.DATAPATHS)}")
        return 2
    mach = machine()
    log(f"bench: {mach['nproc']} CPUs, kernel {mach['kernel']}, load {' '.join(mach['loadavg'])}; "
        f"{len(cells)} cells x {len(datapaths)} datapaths x {len(arms)} arms x {reps} repetitions; results in {outdir}")
    p1 = run_p1(build) if (full and not skip_p1) else None
    t_m = time.monotonic()
    lab, results, skipped, runnable = run_matrix(build, outdir, reps, w, ccs, arms, cells, datapaths=datapaths)
    matrix_s = time.monotonic() - t_m
    agent_download = O.agent_supports(lab, "downlinkRate")  # before teardown removes the lab's binaries
    try:
        dyn = run_dynamic_all(lab, outdir, O.Workload(), runnable) if full else []
    finally:
        for p in lab.teardown():
            log(f"teardown: {p}")
    agent_bench = run_agent_bench(build) if full else {"skipped": "bench-lab"}
    linerate = run_linerate(build, outdir) if full else {"skipped": "bench-lab"}
    env = " ".join(f"{k}={shlex.quote(os.environ[k])}" for k in
                   ("BENCH_REPS", "BENCH_SECONDS", "BENCH_CCS", "BENCH_ARMS", "BENCH_CELLS", "CELLS",
                    "BENCH_RATES", "BENCH_RATE_MBIT", "BENCH_DATAPATHS") if k in os.environ)
    run_rates = sorted({O.cell_rate(c) for c in cells})
    run = {"matrix": True, "machine": mach, "workload": vars(w), "loads": {
               lo: O.load_spec(lo, lab.rate_mbit, w).text for lo in O.LOADS + tuple(O.STREAM_LOADS)},
           "results": results, "cells": cells, "rates": run_rates,
           "fifo_bytes_per_rate": {str(r): L.fifo_bytes_for(r) for r in run_rates}, "cell_reps": cell_reps(results),
           "dynamic": dyn, "skipped": skipped, "p1": p1, "agent_bench": agent_bench, "linerate": linerate, "ccs": ccs,
           "arms": [a for a in arms if a in runnable], "reps": reps, "rate_mbit": lab.rate_mbit,
           "fifo_bytes": lab.fifo_bytes, "full": full, "vegeta": lab.vegeta, "matrix_seconds": matrix_s,
           "sse_stack": f"{O.sse_stack_text()} ({lab.sse_python})" if lab.sse_python else None,
           "agent_download": agent_download, "datapaths": datapaths,
           "datapath_text": {d: L.DATAPATHS[d].text for d in datapaths},
           "command": f"{env + ' ' if env else ''}make {'bench' if full else 'bench-lab'}",
           "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "seconds": time.monotonic() - t0}
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(run, f, indent=1)
    render(outdir, run)
    log(f"bench: done in {(time.monotonic() - t0) / 60:.1f} min (matrix {matrix_s / 60:.1f} min); raw results in "
        f"{outdir}")
    return 0


def published_plots(docs_dir):
    """The plots docs/bench/ holds, keyed as render() keys them."""
    plots, dyn = {}, None
    for f in sorted(os.listdir(docs_dir)):
        path = os.path.join(docs_dir, f)
        if f == "retune-timeline.png":
            dyn = (path, None)
        elif f.startswith("p4-") and f.endswith(".png"):
            plots[f[len("p4-"):-len(".png")]] = (path, None)
    return plots, dyn


def render(outdir, run, publish_docs=True, replot=True):
    """Tables and plots from a run's results.json; for `make bench` also
    docs/benchmarks.md, docs/bench/*.png, docs/bench/results.json and the
    results block of README.md. replot=False (`bench.py render-docs`): the
    docs again from docs/bench/results.json, its published plots kept."""
    summ = M.summarize(run["results"])
    titles = {a: O.ARMS[a]["title"] for a in O.ARMS}
    mt = M.matrix_table(summ)
    st = M.stream_table(summ)
    dt = M.detail_table(summ, titles)
    met, n = M.counts(summ)
    log("\n" + mt + "\n")
    if st:
        log(st + "\n")
    log(f"{met} of {n} cells meet the acceptance" + (f"; {M.not_held(summ)} not held" if M.not_held(summ) else ""))
    for line in M.failures(summ):
        log(line)
    if not publish_docs:
        return summ
    docs_dir = os.path.join(REPO, "docs", "bench")
    if replot:
        plots = matrix_plots(outdir, run["results"], summ, run["arms"], run["rate_mbit"])
        plots_dyn = None
        if run["dynamic"]:
            png = os.path.join(outdir, "retune-timeline.png")
            plots_dyn = (png, plot_timeline(png, run["dynamic"], "inference p99 while training runs; the inference "
                                                                 "pod arrives"))
    if not run["full"]:
        return summ
    if replot:
        os.makedirs(docs_dir, exist_ok=True)
        for old in os.listdir(docs_dir):
            if old.endswith(".png"):
                os.unlink(os.path.join(docs_dir, old))

        def publish(item):
            png, err = item
            if err is None and os.path.exists(png):
                dst = os.path.join(docs_dir, os.path.basename(png))
                shutil.copyfile(png, dst)
                return dst, None
            return png, err
        plots = {k: publish(v) for k, v in plots.items()}
        if plots_dyn:
            plots_dyn = publish(plots_dyn)
        with open(os.path.join(docs_dir, "results.json"), "w") as f:
            json.dump(run, f, indent=1)
    else:
        plots, plots_dyn = published_plots(docs_dir)
        if run["dynamic"] and plots_dyn is None:
            plots_dyn = (os.path.join(docs_dir, "retune-timeline.png"), "not in docs/bench/ (render-docs keeps "
                                                                         "the published plots)")
    ctx = dict(run)
    ctx.update({"matrix_table": mt, "stream_table": st, "detail_table": dt, "failures": M.failures(summ),
                "met": met, "n_cells": n, "not_held": M.not_held(summ), "summ": summ,
                "readme_block": M.readme_block(run, summ), "plots": plots, "plots_dyn": plots_dyn,
                "bw_share": run["workload"]["bw_share"],
                "bw_per_pod_mbit": run["rate_mbit"] * run["workload"]["bw_share"] / run["workload"]["n_train"]})
    md = os.path.join(REPO, "docs", "benchmarks.md")
    write_docs(md, docs_dir, ctx)
    readme = os.path.join(REPO, "README.md")
    with open(readme) as f:
        text = f.read()
    try:
        text = M.replace_block(text, ctx["readme_block"])
        with open(readme, "w") as f:
            f.write(text)
        log(f"wrote {md}, {docs_dir}/ and the results table of {readme}")
    except ValueError as e:
        log(f"wrote {md} and {docs_dir}/; README.md not updated: {e}")
    return summ


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cmd", choices=["demo", "bench", "bench-lab", "render", "render-docs", "ab", "reps"])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"),
                    help="the build directory (render, ab, reps: a run directory BUILD/bench/lab-*)")
    ap.add_argument("--reps", type=int, default=int(os.environ.get("BENCH_REPS", 3)))
    ap.add_argument("--skip-p1", action="store_true", help="bench: do not run cni-latency.sh")
    a = ap.parse_args(argv)
    build = os.path.abspath(a.build)
    if a.cmd == "render":
        with open(os.path.join(build, "results.json")) as f:
            render(build, json.load(f))
        return 0
    if a.cmd == "render-docs":  # docs/benchmarks.md and README's block again from docs/bench/results.json
        docs_dir = os.path.join(REPO, "docs", "bench")
        with open(os.path.join(docs_dir, "results.json")) as f:
            render(docs_dir, json.load(f), replot=False)
        return 0
    if a.cmd == "ab":  # a run with the aiqos_base arm (BENCH_BASE_BUILD): the two builds side by side
        with open(os.path.join(build, "results.json")) as f:
            print(M.ab_table(json.load(f)["results"])[0])
        return 0
    if a.cmd == "reps":  # every repetition: p99, the CPUs' idle and softirq share, the pod's retransmissions
        with open(os.path.join(build, "results.json")) as f:
            print(M.reps_table(json.load(f)["results"]))
        return 0
    if os.geteuid() != 0:
        log(f"{a.cmd}: needs root (network namespaces, qdiscs)")
        return 2
    L.install_signal_teardown()
    try:
        if a.cmd == "demo":
            return demo(build)
        return bench(build, a.cmd == "bench", max(1, a.reps), a.skip_p1)
    except L.LabError as e:
        log(f"{a.cmd}: {e}")
        return 1
    except KeyboardInterrupt:
        log(f"{a.cmd}: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
