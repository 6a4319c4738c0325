#!/usr/bin/env python3
"""streams.py — issue 30's cells on the lab (test/bench/lab.py): token
streams from the inference pod (egress-tokens64/256) and the model load
(download-modelload), every arm of BENCH_ARMS (default: idle, the deep FIFO,
aiqos) interleaved over --reps repetitions as `make bench-lab` runs the
matrix (bench.run_matrix); prints the medians and the issue's acceptance,
writes results.json in BUILD/bench/streams-<time>/. Root.

  python3 test/bench/streams.py [BUILD] [--reps 3] [--cells PATTERNS]

Acceptance (issue 30, medians of the repetitions):
  token streams: aiqos event p99 <= 2 x idle + 1 ms and >= 10 x below the
    FIFO's; no missing events; training's upload >= 95 % of the FIFO arm's
  model load: training's download >= 80 % of the FIFO arm's; the pod's
    request p99 >= 10 x below the FIFO's"""
import argparse
import datetime
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as B  # noqa: E402
import lab as L  # noqa: E402
import outcome as O  # noqa: E402

DEFAULT_CELLS = "egress-tokens64-loadgen-cubic,egress-tokens256-loadgen-cubic,download-modelload-loadgen-cubic"


def med(rs, key):
    v = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(v) if v else None


def summarize(results, cells, arms):
    """{cell: {arm: medians}} and the acceptance lines."""
    summ, lines = {}, []
    for c in cells:
        summ[c] = {}
        for a in arms:
            rs = [r for r in results if r["cell"] == c and r["arm"] == a]
            if rs:
                summ[c][a] = {"reps": len(rs), "p99_us": med(rs, "p99_us"), "p999_us": med(rs, "p999_us"),
                              "max_us": med(rs, "max_us"), "missing": sum(r.get("missing") or 0 for r in rs),
                              "errors": sum(r.get("errors") or 0 for r in rs),
                              "goodput_mbit": (med(rs, "goodput_bps") or 0) / 1e6,
                              "model_load_mbit": (med(rs, "model_load_bps") or 0) / 1e6,
                              "p99_all_us": [r.get("p99_us") for r in rs]}
        s = summ[c]
        idle, fifo, aq = s.get("idle"), s.get("fifo"), s.get("aiqos")
        if not (fifo and aq):
            continue
        kept = aq["goodput_mbit"] / fifo["goodput_mbit"] if fifo["goodput_mbit"] else None
        below = fifo["p99_us"] / aq["p99_us"] if aq["p99_us"] else None
        if "tokens" in c:
            bound = 2 * idle["p99_us"] + 1000 if idle else None
            ok = (bound is not None and aq["p99_us"] <= bound and below is not None and below >= 10 and
                  aq["missing"] == 0 and kept is not None and kept >= 0.95)
            lines.append(f"{c}: aiqos p99 {aq['p99_us'] / 1000:.2f} ms (bound 2 x idle + 1 ms = "
                         f"{bound / 1000 if bound else float('nan'):.2f} ms), FIFO {fifo['p99_us'] / 1000:.2f} ms "
                         f"({below:.1f}x), p99.9 {aq['p999_us'] / 1000:.2f} ms (idle "
                         f"{idle['p999_us'] / 1000 if idle else float('nan'):.2f}), missing {aq['missing']}, upload "
                         f"kept {100 * kept:.1f} % -> {'PASS' if ok else 'FAIL'}")
        else:
            ok = kept is not None and kept >= 0.8 and below is not None and below >= 10
            lines.append(f"{c}: training download aiqos {aq['goodput_mbit']:.0f} Mbit/s vs FIFO "
                         f"{fifo['goodput_mbit']:.0f} ({100 * kept:.1f} %), model load {aq['model_load_mbit']:.0f} vs "
                         f"{fifo['model_load_mbit']:.0f} Mbit/s; requests p99 {aq['p99_us'] / 1000:.2f} ms vs FIFO "
                         f"{fifo['p99_us'] / 1000:.2f} ms ({below:.1f}x) -> {'PASS' if ok else 'FAIL'}")
    return summ, lines


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), "build"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cells", default=os.environ.get("CELLS") or DEFAULT_CELLS)
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("streams.py: needs root (network namespaces, qdiscs)")
        return 2
    build = os.path.abspath(a.build)
    arms = os.environ.get("BENCH_ARMS", "idle fifo aiqos").split()
    cells = O.select_cells(a.cells, L.CCS)
    outdir = os.path.join(build, "bench", "streams-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(outdir, exist_ok=True)
    w = O.Workload(cell_s=float(os.environ.get("BENCH_SECONDS", 4.5)), warm_s=2.0, lg_warmup_s=0.5)
    L.install_signal_teardown()
    lab, results, skipped, runnable = B.run_matrix(build, outdir, max(1, a.reps), w, ("cubic", "bbr"), arms, cells)
    for p in lab.teardown():
        print(f"teardown: {p}")
    summ, lines = summarize(results, cells, runnable)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"cells": cells, "arms": runnable, "skipped": skipped, "reps": a.reps, "rate_mbit": lab.rate_mbit,
                   "workload": vars(w), "results": results, "summary": summ}, f, indent=1, default=str)
    print(f"results: {outdir}/results.json")
    for c in cells:
        for arm, s in summ[c].items():
            print(f"  {c:34} {arm:6} p99 {s['p99_us'] / 1000:8.2f} ms  p99.9 {s['p999_us'] / 1000:8.2f} ms  max "
                  f"{s['max_us'] / 1000:8.2f} ms  missing {s['missing']:4}  training {s['goodput_mbit']:6.1f} Mbit/s"
                  + (f"  model load {s['model_load_mbit']:6.1f} Mbit/s" if "modelload" in c else "")
                  + f"  (p99 per rep: {', '.join(f'{x / 1000:.2f}' for x in s['p99_all_us'] if x)})")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
