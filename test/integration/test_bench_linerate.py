"""test_bench_linerate.py — a short smoke of the line-rate benchmark
(test/bench/linerate.py, `make bench-linerate`): one repetition of 1 s per
arm on both uplinks, and the layouts it measured are the ones the policy
says: on the noqueue veth mixed mode leaves the root as it is, on the mq
"NIC" it keeps mq with a child per queue and the classifier, a
configured uplinkRate gives HTB on either, and with it the download arm
(the pods receive) runs through the shaped ifb, next to a default run that
downloads too; every sender runs cubic, as the table says. The figures are not checked
(timing on a shared machine); the table and the summary line are. Root,
iperf3."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
              pytest.mark.skipif(not shutil.which("iperf3"), reason="needs iperf3 (hack/install-deps.sh)")]


def test_linerate_smoke_layouts(tmp_path):
    build = os.environ.get("AIQOS_BUILD", os.path.join(REPO, "build"))
    out = tmp_path / "lr.json"
    p = subprocess.run([sys.executable, os.path.join(REPO, "test", "bench", "linerate.py"), "--build", build,
                        "--reps", "1", "--seconds", "1", "--arms", "mixed,mixed@400gbit,mixed@400gbit:down", "--uplinks",
                        "noqueue,mq", "--seed", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1].endswith("failed"), p.stdout[-500:]
    assert "| uplink before | arm |" in p.stdout, p.stdout
    res = json.loads(out.read_text())
    shapes = {(r["uplink"], r["arm"]): r["shape"] for r in res["results"]}
    assert shapes == {("noqueue", "default"): "noqueue", ("noqueue", "mixed"): "none",
                      ("noqueue", "mixed@400gbit"): "htb-ifb", ("mq", "default"): "mq", ("mq", "mixed"): "mq",
                      ("mq", "mixed@400gbit"): "htb-ifb", ("noqueue", "default:down"): "noqueue",
                      ("noqueue", "mixed@400gbit:down"): "htb (ifb)", ("mq", "default:down"): "mq",
                      ("mq", "mixed@400gbit:down"): "htb (ifb)"}, shapes
    rows = {(r["uplink"], r["arm"]) for r in res["rows"]}
    assert ("noqueue", "default:down") in rows and ("noqueue", "mixed@400gbit:down") in rows, rows
    lay = res["layouts"]
    assert lay["noqueue:mixed"].splitlines()[0].startswith("qdisc noqueue 0: root"), lay["noqueue:mixed"]
    mq = lay["mq:mixed"]
    assert mq.splitlines()[0].startswith("qdisc mq 1: root"), mq
    assert sum(1 for line in mq.splitlines() if " parent 1:" in line) == 4, mq
    # the classifier: a clsact filter, or a tcx link where the kernel has tcx
    assert "clsact" in mq or "tcx egress aiqos_cls_edt" in mq, mq
    assert all(r["train_bps"] > 0 for r in res["results"]), res["results"]
    # every sender ran the congestion control the table names (the host's
    # default is bbr; a netns may only pick one the host allows)
    ccs = res["meta"]["ccs"]
    assert set(ccs) == {"fab", "train0", "train1", "infer0"} and set(ccs.values()) == {"cubic"}, ccs
    assert res["meta"]["cc"] == "cubic" and ", cubic;" in p.stdout, res["meta"]
