"""test_bench_docs.py — README.md's results table is the one the last
`make bench` wrote (README's figures had gone stale against
docs/benchmarks.md). Both documents carry the block between
matrix_report.README_BEGIN and README_END; it must be identical in both and
equal to what test/bench/matrix_report.py renders from docs/bench/results.json
(the run's saved results), so a hand edit of either document, or a bench run
whose docs were not committed together, fails here. No root needed."""

import json
import os
import sys

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "test", "bench"))

import matrix_report as M  # noqa: E402

README = os.path.join(REPO, "README.md")
BENCHMARKS = os.path.join(REPO, "docs", "benchmarks.md")
RESULTS = os.path.join(REPO, "docs", "bench", "results.json")


def read(path):
    with open(path) as f:
        return f.read()


def test_readme_results_block_equals_benchmarks_md():
    readme, bench = M.extract_block(read(README)), M.extract_block(read(BENCHMARKS))
    assert readme is not None, f"README.md has no results block ({M.README_BEGIN!r} ... {M.README_END!r})"
    assert bench is not None, "docs/benchmarks.md has no results block: regenerate it with `make bench`"
    assert readme == bench, ("README.md's results table differs from docs/benchmarks.md's: run `make bench` (or "
                             "`test/bench/bench.py render BUILD/bench/<run>`) and commit both")


def test_results_block_is_what_the_saved_run_renders():
    with open(RESULTS) as f:
        run = json.load(f)
    assert run.get("matrix"), "docs/bench/results.json is not a P4 matrix run: regenerate it with `make bench`"
    want = M.readme_block(run, M.summarize(run["results"]))
    assert M.extract_block(read(BENCHMARKS)) == want, "docs/benchmarks.md's results block is not its run's"
    assert M.extract_block(read(README)) == want, "README.md's results block is not docs/bench/results.json's"


def test_block_replacement_round_trip():
    # the mechanics render() uses on README.md: a document with the markers
    # gets exactly the new block, the text around it unchanged
    doc = f"intro\n\n{M.README_BEGIN}\nold\n{M.README_END}\n\noutro\n"
    new = f"{M.README_BEGIN}\nnew table\n{M.README_END}"
    out = M.replace_block(doc, new)
    assert out == f"intro\n\n{new}\n\noutro\n"
    assert M.extract_block(out) == new
    try:
        M.replace_block("no markers here", new)
    except ValueError:
        pass
    else:
        raise AssertionError("replace_block accepted a document without markers")


def synthetic(cell, p99, goodput, errors=None):
    """One result per arm and repetition: p99 = {arm: [ms per rep]}."""
    out = []
    for arm, vals in p99.items():
        for rep, v in enumerate(vals):
            out.append({"cell": cell, "arm": arm, "rep": rep, "p99_us": v * 1000.0, "p50_us": v * 500.0,
                        "goodput_bps": goodput.get(arm, [None] * len(vals))[rep],
                        "errors": (errors or {}).get(arm, 0), "timeouts": 0})
    return out


def test_matrix_verdict_follows_the_acceptance():
    ok = synthetic("egress-small-loadgen-cubic", {"idle": [0.5, 0.6, 0.7], "fifo": [20, 25, 30],
                                                  "aiqos": [1.0, 1.1, 1.3]},
                   {"fifo": [400e6] * 3, "aiqos": [390e6] * 3})
    s = M.summarize(ok)["egress-small-loadgen-cubic"]
    assert s["verdict"] == "met", s["why"]
    # the ratios are per repetition: 20/1.0, 25/1.1, 30/1.3 -> median 22.7
    assert abs(M.med(s["fifo_over_aiqos"]) - 25 / 1.1) < 1e-9
    # 2.5x idle: missed for small responses, met for large ones (<= 3x)
    for load, want in (("small", "missed"), ("large", "met")):
        cell = f"download-{load}-http-bbr"
        r = synthetic(cell, {"idle": [1.0] * 3, "fifo": [100.0] * 3, "aiqos": [2.5] * 3},
                      {"fifo": [400e6] * 3, "aiqos": [400e6] * 3})
        s = M.summarize(r)[cell]
        assert s["verdict"] == want, (load, s["why"])
    # goodput below 95 % of the FIFO's, errors, or a missing arm
    r = synthetic("egress-burst-http-cubic", {"idle": [1.0] * 3, "fifo": [100.0] * 3, "aiqos": [1.0] * 3},
                  {"fifo": [400e6] * 3, "aiqos": [370e6] * 3})
    s = M.summarize(r)["egress-burst-http-cubic"]
    assert s["verdict"] == "missed" and any("goodput" in w for w in s["why"]), s
    r = synthetic("egress-burst-http-cubic", {"idle": [1.0] * 3, "fifo": [100.0] * 3, "aiqos": [1.0] * 3},
                  {"fifo": [400e6] * 3, "aiqos": [400e6] * 3}, errors={"aiqos": 1})
    s = M.summarize(r)["egress-burst-http-cubic"]
    assert s["verdict"] == "missed" and s["aiqos_failed_requests"] == 3, s
    r = synthetic("egress-burst-http-cubic", {"fifo": [100.0] * 3, "aiqos": [1.0] * 3},
                  {"fifo": [400e6] * 3, "aiqos": [400e6] * 3})
    assert M.summarize(r)["egress-burst-http-cubic"]["verdict"] == "incomplete"


def test_missed_ratio_names_the_idle_floor():
    # 10x below a FIFO whose own p99 is under 10x the idle p99 is below what
    # the link gives the inference pod alone: the reason says so; when the
    # FIFO is 20x idle, it does not
    cell = "egress-large-http-bbr"
    r = synthetic(cell, {"idle": [3.0] * 3, "fifo": [25.0] * 3, "aiqos": [4.5] * 3},
                  {"fifo": [260e6] * 3, "aiqos": [255e6] * 3})
    s = M.summarize(r)[cell]
    assert s["verdict"] == "missed" and "unattainable here" in s["why"][0], s["why"]
    assert "8.33×" in s["why"][0], s["why"]
    r = synthetic(cell, {"idle": [3.0] * 3, "fifo": [60.0] * 3, "aiqos": [7.0] * 3},
                  {"fifo": [260e6] * 3, "aiqos": [255e6] * 3})
    s = M.summarize(r)[cell]
    assert s["verdict"] == "missed" and "unattainable" not in s["why"][0], s["why"]
