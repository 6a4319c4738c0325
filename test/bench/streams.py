#!/usr/bin/env python3
"""streams.py — issue 30's cells on the lab (test/bench/lab.py): token
streams from the inference pod (egress-tokens64/256/64kv with the
project's loadgen; tokens64 and tokens64kv also over the real HTTP/SSE
stack, client sse: uvicorn + sse-starlette serving, httpx + httpx-sse
reading, installed by hack/install-sse.sh, which this runs when sse cells
are selected) and the model load (download-modelload), every arm of BENCH_ARMS (default: idle, the deep FIFO,
aiqos) interleaved over --reps repetitions as `make bench-lab` runs the
matrix (bench.run_matrix); prints the medians and the issue's acceptance,
writes results.json in BUILD/bench/streams-<time>/. Root.

  python3 test/bench/streams.py [BUILD] [--reps 3] [--cells PATTERNS]

BENCH_RATES (default 500; e.g. "500 10000": the token streams at 10 Gbit/s
too) and BENCH_SECONDS as for `make bench`, which runs these cells in its
matrix too. The summary, the table and the verdicts are matrix_report's
(the same as docs/benchmarks.md's), issue 30's rule (medians of the
repetitions):
  token streams: aiqos event p99 <= 2 x idle + 1 ms, >= 10 x below the
    FIFO's where the FIFO is >= 20 x idle; p99.9 <= idle p99.9 + 5 ms; no
    missing events; training's upload >= 95 % of the FIFO arm's
  model load: training's download >= 80 % of the FIFO arm's; the pod's
    request p99 >= 10 x below the FIFO's"""
import argparse
import datetime
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench as B  # noqa: E402
import lab as L  # noqa: E402
import matrix_report as M  # noqa: E402
import outcome as O  # noqa: E402

DEFAULT_CELLS = ("egress-tokens64-loadgen-cubic,egress-tokens256-loadgen-cubic,egress-tokens64-sse-cubic,"
                 "download-modelload-loadgen-cubic")


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
    try:
        cells = O.select_cells(a.cells, L.CCS, O.parse_rates(os.environ.get("BENCH_RATES") or
                                                             str(L.DEFAULT_RATE_MBIT)))
    except L.LabError as e:
        print(f"streams.py: {e}")
        return 2
    if any(O.split_cell(c)[2] == "sse" for c in cells):
        p = subprocess.run(["bash", os.path.join(L.REPO, "hack", "install-sse.sh")])
        if p.returncode != 0:
            print("streams.py: hack/install-sse.sh failed: the sse cells need its venv")
            return 2
    outdir = os.path.join(build, "bench", "streams-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(outdir, exist_ok=True)
    w = O.Workload(cell_s=float(os.environ.get("BENCH_SECONDS", 4.5)), warm_s=2.0, lg_warmup_s=0.5)
    L.install_signal_teardown()
    lab, results, skipped, runnable = B.run_matrix(build, outdir, max(1, a.reps), w, ("cubic", "bbr"), arms, cells)
    for p in lab.teardown():
        print(f"teardown: {p}")
    summ = M.summarize(results)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"cells": cells, "arms": runnable, "skipped": skipped, "reps": a.reps, "rate_mbit": lab.rate_mbit,
                   "workload": vars(w), "results": results, "cell_reps": B.cell_reps(results)}, f, indent=1,
                  default=str)
    print(f"results: {outdir}/results.json\n")
    print(M.stream_table(summ))
    if M.matrix_table(summ).count("\n") > 1:
        print("\n" + M.matrix_table(summ))
    met, n = M.counts(summ)
    print(f"\n{met} of {n} cells meet the acceptance ({M.rule_text()})")
    for line in M.failures(summ):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
