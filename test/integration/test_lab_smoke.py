"""test_lab_smoke.py — a short run of the benchmark lab (test/bench/lab.py,
outcome.py) so that `make demo`/`make bench` cannot rot unnoticed: pods made
through the real CNI chain inside the lab's node namespace, bulk TCP and the
open-loop load generator across the bottleneck. Not a benchmark: it asserts
that traffic flows and that the link is the bottleneck, that the plugins of
each chain did their part, and (once the agent exists) that the node mode
switches to mixed when training and inference pods share the node."""

import os
import sys

import pytest

import cni
from conftest import BUILD, REPO

sys.path.insert(0, os.path.join(REPO, "test", "bench"))

import lab as L  # noqa: E402
import outcome as O  # noqa: E402

RATE_MBIT = 200  # lower than the bench: quick to saturate, far from the CPU limit
SHORT = {"duration_s": 3.0, "warm_s": 1.0, "tail_s": 0.5, "lg_warmup_s": 0.5, "rate": 500.0, "n_train": 1,
         "flows": 2, "mixed_hold_s": 1}


@pytest.fixture
def lab(plugin, tmp_path):
    if not os.access(os.path.join(BUILD, "bench", "loadgen"), os.X_OK):
        pytest.fail(f"{BUILD}/bench/loadgen is not built (run `make`)")
    lab = L.Lab(BUILD, tag=f"sm{cni.SESSION_TAG}", rate_mbit=RATE_MBIT)
    try:
        lab.setup()
        yield lab
    finally:
        problems = lab.teardown()
        assert not problems, problems
        assert not lab.all_netns(), f"lab left netns behind: {lab.all_netns()}"


def check_traffic(r, w):
    expected = w.rate * (w.duration_s - w.lg_warmup_s)
    assert r["errors"] == 0 and r["incomplete"] == 0, r
    assert r["requests"] >= 0.7 * expected, f"only {r['requests']} of ~{expected:.0f} requests measured: {r}"
    # the training pod fills the link but cannot exceed it: the wire is the bottleneck
    assert 0.5 * RATE_MBIT * 1e6 < r["goodput_bps"] < 1.05 * RATE_MBIT * 1e6, r
    assert r["wire_backlog_max_b"] + r["uplink_backlog_max_b"] > 0, f"no queue ever seen: {r}"


def test_lab_traffic_through_the_aiqos_plugin_chain(lab, tmp_path):
    w = O.Workload(**SHORT)
    r = O.run_arm(lab, "plugin", "cubic", w, 0, str(tmp_path))
    check_traffic(r, w)
    assert r["plugin_classes"] == ["inference", "training"], r
    # (kernel-caps: what the plugin learned about this kernel; lock: the
    # state lock; neither is a pod's)
    left = [f for f in os.listdir(lab.state_dir) if f not in ("kernel-caps", "lock")]
    assert not left, f"DEL left aiqos state behind: {left}"


def test_lab_traffic_with_the_reference_bandwidth_plugin(lab, tmp_path):
    w = O.Workload(**SHORT)
    r = O.run_arm(lab, "bandwidth", "bbr", w, 0, str(tmp_path))
    check_traffic(r, w)
    assert r["node_ifbs"] == w.n_train, f"bandwidth plugin made {r['node_ifbs']} ifb devices: {r}"
    assert "ifb" not in O.node_link_kinds(lab), "bandwidth DEL left its ifb behind"


if os.path.exists(os.path.join(REPO, "agent", "main.c")):

    def test_lab_agent_switches_to_mixed(lab, tmp_path):
        assert L.Agent.available(BUILD), f"agent sources exist but {BUILD}/bin/aiqos-agent or aiqosctl is missing"
        w = O.Workload(**SHORT)
        r = O.run_arm(lab, "aiqos", "cubic", w, 0, str(tmp_path))
        check_traffic(r, w)
        assert r["mode_before"] == "idle", r
        assert r["agent_mode"] == "mixed", r
        # the agent shapes below the link rate: the queue moves from the
        # bottleneck's FIFO to the agent's tree on the node uplink
        assert r["uplink_backlog_max_b"] > 0, f"the agent's uplink tree never held the queue: {r}"
        assert r["agent_uplink_shape"] == "htb", r
