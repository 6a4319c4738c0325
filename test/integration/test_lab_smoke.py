"""test_lab_smoke.py — a short run of the benchmark lab (test/bench/lab.py,
outcome.py) so that `make demo`/`make bench` cannot rot unnoticed: pods made
through the real CNI chain inside the lab's node namespace, bulk TCP and the
open-loop load generator across the bottleneck. Not a benchmark: it asserts
that traffic flows and that the link is the bottleneck, that the plugins of
each chain did their part, and (once the agent exists) that the node mode
switches to mixed when training and inference pods share the node."""

import json
import os
import sys
import time
import types

import pytest

import cni
from conftest import BUILD, REPO

sys.path.insert(0, os.path.join(REPO, "test", "bench"))

import lab as L  # noqa: E402
import outcome as O  # noqa: E402

RATE_MBIT = 200  # lower than the bench: quick to saturate, far from the CPU limit
AT = f"@{RATE_MBIT}"  # a cell's name at another rate than the bench's default (outcome.cell_name)
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
        # bottleneck's FIFO to the agent's tree on the node (the uplink's
        # root; with a veth's tx queue per CPU, EDT where the kernel has fq,
        # else the gated HTB on aiqos-ifb1)
        assert r["uplink_backlog_max_b"] > 0, f"the agent's uplink tree never held the queue: {r}"
        multi = os.cpu_count() > 1
        assert r["agent_uplink_shape"] == ("htb" if not multi else "edt" if lab.has_qdisc("fq")[0] else "htb-ifb"), r


# ---------------------------------------------------------------------------
# The workload matrix (outcome.run_instance): the download
# direction, the HTTP client (nginx + vegeta), the burst load, the aiqos arm
# downloading. Mechanics only (traffic flows the right way, the queue forms
# at the direction's bottleneck, the clients count what they sent), never
# figures.

MATRIX = dict(SHORT, cell_s=2.5, timeout_s=1.5, gap_s=0.2, tail_s=0.3)


@pytest.fixture(scope="module")
def http_tools():
    """vegeta built (hack/build-vegeta.sh: cached, a no-op when current) and nginx installed."""
    p = cni.sh("bash", os.path.join(REPO, "hack", "build-vegeta.sh"), check=False)
    if p.returncode != 0:
        pytest.fail(f"hack/build-vegeta.sh failed: {p.stderr.strip()[-800:]}")
    if not L.Lab(BUILD, tag="chk").nginx:
        pytest.fail("nginx is not installed (hack/install-deps.sh installs nginx-light)")


def check_cell(r, w, rate=None):
    rate = rate or w.rate
    expected = rate * (w.cell_s - w.lg_warmup_s)
    assert r["errors"] == 0 and r["timeouts"] == 0, r
    assert r["requests"] >= 0.7 * expected, f"only {r['requests']} of ~{expected:.0f} requests measured: {r}"
    assert r["p50_us"] and r["p99_us"] >= r["p50_us"], r


def test_matrix_cell_selection():
    cells = O.select_cells("", L.CCS)
    # 24 request cells and issue 30's 12 stream cells (tokens64, tokens64kv x clients loadgen and sse,
    # tokens256 and modelload x loadgen; x 2 ccs)
    assert len(cells) == 36 and len(set(cells)) == 36
    assert O.select_cells("download-*-http-*", L.CCS) == [
        "download-small-http-cubic", "download-small-http-bbr", "download-large-http-cubic",
        "download-large-http-bbr", "download-burst-http-cubic", "download-burst-http-bbr"]
    assert O.select_cells("egress-large-loadgen-bbr, egress-small-*-cubic", ("cubic", "bbr")) == [
        "egress-small-loadgen-cubic", "egress-small-http-cubic", "egress-large-loadgen-bbr"]
    with pytest.raises(L.LabError):
        O.select_cells("upload-*", L.CCS)


def test_matrix_cells_at_a_second_rate():
    # BENCH_RATES="500 10000": every cell at 500 Mbit/s; at 10 Gbit/s the
    # small, burst and token-stream loads (not large, not the model load)
    cells = O.select_cells("", ("cubic",), rates=(500, 10000))
    at10g = [c for c in cells if c.endswith("@10000")]
    assert at10g == ["egress-small-loadgen-cubic@10000", "egress-small-http-cubic@10000",
                     "egress-burst-loadgen-cubic@10000", "egress-burst-http-cubic@10000",
                     "download-small-loadgen-cubic@10000", "download-small-http-cubic@10000",
                     "download-burst-loadgen-cubic@10000", "download-burst-http-cubic@10000",
                     "egress-tokens64-loadgen-cubic@10000", "egress-tokens64-sse-cubic@10000",
                     "egress-tokens256-loadgen-cubic@10000"]
    assert len(cells) == 18 + len(at10g)
    # a pattern selects the cell at every rate, or with @RATE at one
    assert O.select_cells("egress-small-loadgen-cubic", ("cubic",), rates=(500, 10000)) == [
        "egress-small-loadgen-cubic", "egress-small-loadgen-cubic@10000"]
    assert O.select_cells("*@10000", ("cubic",), rates=(500, 10000)) == at10g
    assert O.split_cell("egress-tokens64-loadgen-bbr@10000") == ("egress", "tokens64", "loadgen", "bbr")
    assert (O.cell_rate("egress-small-loadgen-cubic@10000"), O.cell_rate("vxlan/egress-small-loadgen-cubic")) == \
        (10000, L.DEFAULT_RATE_MBIT)
    assert O.parse_rates("500, 10000 500") == [500, 10000]
    for bad in ("", "500 10g", "0"):
        with pytest.raises(L.LabError, match="BENCH_RATES"):
            O.parse_rates(bad)
    assert L.fifo_bytes_for(500) == L.DEFAULT_FIFO_BYTES and L.fifo_bytes_for(10000) == 30_000_000


def test_lab_matrix_download_direction(lab, tmp_path):
    w = O.Workload(**MATRIX)
    rs = O.run_instance(lab, "fifo", "download", "cubic", [("small", "loadgen")], w, 0, str(tmp_path))
    assert [r["cell"] for r in rs] == ["download-small-loadgen-cubic" + AT]
    r = rs[0]
    check_cell(r, w)
    # training downloads (iperf3 -R: the fabric sends, with the cell's cc)
    # and fills the link toward the node: the queue is the wire's port
    # toward the node, and the goodput is bounded by it
    assert r["training_cc_seen"] == ["cubic"], r
    assert 0.3 * RATE_MBIT * 1e6 < r["goodput_bps"] < 1.05 * RATE_MBIT * 1e6, r
    assert r["bottleneck_backlog_max_b"] > 0, f"no queue at the download bottleneck (w-node): {r}"
    assert r["node_backlog_max_b"] == 0, r


def test_lab_matrix_http_client_both_directions(http_tools, lab, tmp_path):
    w = O.Workload(**MATRIX)
    for d in O.DIRECTIONS:
        rs = O.run_instance(lab, "fifo", d, "bbr", [("small", "http")], w, 0, str(tmp_path))
        r = rs[0]
        assert r["cell"] == f"{d}-small-http-bbr{AT}", r
        assert r["pod_cc_end"] == ["bbr"], r
        check_cell(r, w)
        assert r["send_lag_p99_us"] is None and r["client_file"].startswith("http-"), r
        assert r["bottleneck_backlog_max_b"] > 0, f"{d}: no queue at the bottleneck: {r}"
        assert r["goodput_bps"] > 0.3 * RATE_MBIT * 1e6, r


def test_lab_matrix_burst_cells(http_tools, lab, tmp_path):
    w = O.Workload(**dict(MATRIX, cell_s=3.0))
    rs = O.run_instance(lab, "idle", "egress", "cubic", [("burst", "loadgen"), ("burst", "http")], w, 0,
                        str(tmp_path))
    lg, http = rs
    for r in rs:
        check_cell(r, w)
    # loadgen: the 100 ms windows of the bursts carry ~5x the others' requests
    import json
    with open(os.path.join(str(tmp_path), lg["client_file"])) as f:
        d = json.load(f)
    assert d["burst_factor"] == w.burst_factor and d["burst_ms"] == w.burst_ms, d
    counts = d["windows"]["count"]
    per = w.burst_period_ms // d["windows"]["ms"]
    on = [c for i, c in enumerate(counts) if i % per == 0]
    off = [c for i, c in enumerate(counts) if i % per not in (0, per - 1)]
    assert sum(on) / len(on) > 2.5 * sum(off) / len(off), (on, off)
    # vegeta: one burst attack per period on top of the base rate
    with open(os.path.join(str(tmp_path), http["client_file"])) as f:
        h = json.load(f)
    assert h["bursts"] == int(w.cell_s * 1000 // w.burst_period_ms), h


if os.path.exists(os.path.join(REPO, "agent", "main.c")):

    def test_lab_matrix_aiqos_download(lab, tmp_path):
        assert L.Agent.available(BUILD), f"agent sources exist but {BUILD}/bin/aiqos-agent or aiqosctl is missing"
        w = O.Workload(**MATRIX)
        rs = O.run_instance(lab, "aiqos", "download", "cubic", [("small", "loadgen")], w, 0, str(tmp_path))
        r = rs[0]
        check_cell(r, w)
        assert r["agent_mode"] == "mixed", r
        assert r["goodput_bps"] > 0.3 * RATE_MBIT * 1e6, r
        if O.agent_supports(lab, "downlinkRate"):
            # the agent's download tree: an ifb on the uplink's ingress holds the queue
            assert r["agent_config"]["downlinkRate"] == f"{RATE_MBIT}mbit", r
            assert r["node_ifbs"], f"downlinkRate configured but no ifb in the node netns: {r}"
            assert r["node_backlog_max_b"] > 0, f"the download tree never held the queue: {r}"


def test_vegeta_results_summary():
    # vegeta CSV rows: timestamp ns, code, latency ns, bytes out, bytes in, error, ...
    import httpload
    t0 = 10**18
    rows = [[str(t0 + i * 10**6), "200", str((i + 1) * 1000), "0", "8192", "", "", "", str(i), "GET", "u", ""]
            for i in range(1000)]
    rows[0] = [str(t0 - 10**9), "500", "1", "0", "0", "", "", "", "x", "GET", "u", ""]  # before the warm-up cut
    rows[10][1], rows[10][5] = "0", "Get \"http://x\": context deadline exceeded (Client.Timeout exceeded)"
    rows[11][1], rows[11][5] = "0", "dial tcp: connection refused"
    rows[12][1] = "503"
    s = httpload.summarize(rows, 0.0, t0)
    assert s["sent"] == 999 and s["timeouts"] == 1 and s["errors"] == 2, s
    lat = s["latency_us"]
    assert lat["count"] == 996 and lat["max"] == 1000.0, lat
    assert 980 <= lat["p99"] <= 1000 and 480 <= lat["p50"] <= 520, lat
    assert s["cdf"][-1][1] == 1.0 and all(a[0] <= b[0] for a, b in zip(s["cdf"], s["cdf"][1:])), s["cdf"][:3]
    assert httpload.rate_spec(100) == "1000/10s" and httpload.rate_spec(555.6) == "5556/10s"


def test_vegeta_stalled_attack_costs_the_cell_not_the_run(tmp_path, monkeypatch):
    # a vegeta that records 3 results and then hangs until SIGINT (which
    # ends a real one too): the run goes on, and the requests it never
    # recorded count as timeouts
    import httpload
    fake = tmp_path / "vegeta"
    rows = "".join(f"{10**18 + i * 10**6},200,1000,0,8192,,,,{i},GET,u,\\n" for i in range(3))
    fake.write_text("#!/bin/sh\n"
                    f"if [ \"$1\" = encode ]; then printf '{rows}'; exit 0; fi\n"
                    "trap 'exit 0' INT\nwhile :; do sleep 0.05; done\n")
    fake.chmod(0o755)
    lab = types.SimpleNamespace(vegeta=str(fake))
    monkeypatch.setattr(httpload, "STALL_MARGIN_S", 0.5)
    monkeypatch.setattr(httpload.L, "nsexec", lambda ns, *argv: list(argv))
    t = time.monotonic()
    s = httpload.run_vegeta(lab, "ns", "http://x/8k", 100, 1.0, 0.0, str(tmp_path / "c"), timeout_s=0.5)
    assert time.monotonic() - t < 10, "the stalled attack was not stopped at its deadline"
    assert s["stalled_attacks"] == 1 and s["unrecorded"] == 97, s
    assert s["latency_us"]["count"] == 3 and s["timeouts"] == 97 and s["sent"] == 100 and s["errors"] == 0, s


def test_vxlan_datapath_crosses_the_wire_encapsulated(plugin):
    """The bench's vxlan datapath (lab.DATAPATHS): the pods' traffic to the
    servers reaches them only through vx0 (the wire has no route to the
    overlay), with the pods' MTU 1450, in both directions."""
    lab = L.Lab(BUILD, tag=f"vx{cni.SESSION_TAG}"[:8], rate_mbit=RATE_MBIT, datapath="vxlan")
    try:
        lab.setup()
        assert "10.98." not in L.sh("ip", "-n", lab.wire, "route").stdout
        pod = lab.add_pod("vxp", "training")
        assert "mtu 1450" in L.sh("ip", "-n", pod.netns, "link", "show", "eth0").stdout

        def vx0(direction):
            out = L.sh("ip", "-n", lab.node, "-s", "-j", "link", "show", "vx0").stdout
            return json.loads(out)[0]["stats64"][direction]["bytes"]
        for extra, direction in (((), "tx"), (("-R",), "rx")):  # upload, then download (the fabric sends)
            before = vx0(direction)
            p = L.sh(*O.iperf_argv(pod, L.IPERF_PORT0, "cubic", 1.0, 1, omit_s=0), *extra, timeout=30)
            assert '"bits_per_second"' in p.stdout, p.stdout[-500:]
            assert vx0(direction) - before > 1_000_000, direction
    finally:
        problems = lab.teardown()
        assert not problems, problems


def test_stream_cells_selected_by_name():
    assert O.select_cells("egress-tokens*-loadgen-cubic,download-modelload-*", ("cubic", "bbr")) == [
        "egress-tokens64-loadgen-cubic", "egress-tokens256-loadgen-cubic", "egress-tokens64kv-loadgen-cubic",
        "download-modelload-loadgen-cubic", "download-modelload-loadgen-bbr"]
    # in the matrix by default (issue 30 §2), the token streams with both clients
    assert [c for c in O.select_cells("", ("cubic",)) if "tokens" in c or "modelload" in c] == [
        "egress-tokens64-loadgen-cubic", "egress-tokens64-sse-cubic", "egress-tokens256-loadgen-cubic",
        "egress-tokens64kv-loadgen-cubic", "egress-tokens64kv-sse-cubic", "download-modelload-loadgen-cubic"]
    # 256 streams: the Python stack, not the network, is the bottleneck (outcome.STREAM_CLIENTS)
    assert O.select_cells("*-sse-*", ("cubic",)) == ["egress-tokens64-sse-cubic", "egress-tokens64kv-sse-cubic"]


# ---------------------------------------------------------------------------
# The token streams over the real HTTP/SSE stack (client sse: uvicorn +
# sse-starlette in the pod, httpx + httpx-sse in the fabric, from the venv of
# hack/install-sse.sh; test/bench/sse_tokens.py is the glue).

@pytest.fixture(scope="module")
def sse_python():
    """The SSE stack's venv (hack/install-sse.sh: a no-op when installed)."""
    p = L.sh("bash", os.path.join(REPO, "hack", "install-sse.sh"), "--print-python", check=False, timeout=900)
    if p.returncode != 0:
        pytest.fail(f"hack/install-sse.sh failed: {p.stderr.strip()[-800:]}")
    return p.stdout.strip()


def test_sse_install_check_names_the_missing_venv(tmp_path):
    # --check installs nothing: exit 1 and how to install when the venv is not there
    p = L.sh("bash", os.path.join(REPO, "hack", "install-sse.sh"), "--check", check=False,
             env=dict(os.environ, AIQOS_CACHE=str(tmp_path)))
    assert p.returncode == 1 and "run hack/install-sse.sh" in p.stderr, p
    assert not os.listdir(tmp_path), os.listdir(tmp_path)


def test_sse_stack_pins_what_the_docs_name(sse_python):
    # the versions the bench's docs name (outcome.sse_stack, from the
    # requirements file) are the ones the venv imports
    import subprocess
    want = O.sse_stack()
    assert {"uvicorn", "sse-starlette", "httpx", "httpx-sse"} <= set(want), want
    p = subprocess.run([sse_python, "-c", "import json, sys; sys.path.insert(0, sys.argv[1]); import sse_tokens; "
                        "print(json.dumps(sse_tokens.versions()))", os.path.join(REPO, "test", "bench")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    for k, v in json.loads(p.stdout).items():
        assert want[k] == v, (k, want[k], v)
    assert f"uvicorn {want['uvicorn']}" in O.CLIENT_TEXT["sse"] and f"httpx-sse {want['httpx-sse']}" in \
        O.load_spec("tokens64", 500, O.Workload()).text


def test_sse_client_counts_events_a_dead_server_never_sent(sse_python, tmp_path):
    """On loopback, the client's accounting: a full run (no event missing
    or malformed, every event's delay and the server's lag measured); a
    server that dies halfway through the window (every stream counted
    closed, exit 1, the events before measured); no server at all (the
    streams cannot open: exit 2)."""
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = os.path.join(REPO, "test", "bench", "sse_tokens.py")
    srv = subprocess.Popen([sse_python, script, "server", "--listen", f"127.0.0.1:{port}", "--event", "300",
                            "--period-ms", "25"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert "listening" in srv.stdout.readline()

        def client(out, duration, streams=8):
            return subprocess.Popen([sse_python, script, "client", "--url", f"http://127.0.0.1:{port}/tokens",
                                     "--streams", str(streams), "--duration", str(duration), "--warmup", "0.2",
                                     "--drain", "0.5", "--out", str(out)], stderr=subprocess.PIPE, text=True)
        ok = client(tmp_path / "ok.json", 1.5)
        assert ok.wait(timeout=30) == 0, ok.stderr.read()
        d = json.loads((tmp_path / "ok.json").read_text())
        # 8 streams x 40 events/s x 1.3 s
        assert d["missing"] == 0 and d["bad"] == 0 and d["closed"] == 0 and d["events"] >= 0.8 * 8 * 40 * 1.3, d
        assert d["delay_us"]["count"] == d["events"] and 0 < d["delay_us"]["p50"] <= d["delay_us"]["p99"], d
        assert d["send_lag_us"]["count"] == d["events"], d
        cut = client(tmp_path / "cut.json", 3.0)
        time.sleep(1.5)
        srv.terminate()
        srv.wait(timeout=15)
        assert cut.wait(timeout=30) == 1, cut.stderr.read()
        d = json.loads((tmp_path / "cut.json").read_text())
        assert d["closed"] == 8 and d["events"] > 0, d
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    gone = client(tmp_path / "gone.json", 1.0)
    assert gone.wait(timeout=30) == 2 and "failed" in gone.stderr.read()


def test_lab_token_streams_over_the_sse_stack(sse_python, lab, tmp_path):
    """64 lock-step streams from uvicorn + sse-starlette in the inference
    pod to httpx-sse in the fabric while training fills the deep FIFO: every
    event arrives, each one's delay is measured, the server's lag is
    reported, and the events crossed the queue at the bottleneck."""
    assert lab.sse_python == sse_python, (lab.sse_python, sse_python)
    w = O.Workload(**MATRIX)
    rs = O.run_instance(lab, "fifo", "egress", "cubic", [("tokens64", "sse")], w, 0, str(tmp_path))
    r = rs[0]
    assert r["cell"] == "egress-tokens64-sse-cubic" + AT and r["client"] == "sse", r
    check_cell(r, w, rate=64 * 1000 / O.TOKENS_PERIOD_MS)
    assert r["missing"] == 0 and r["send_lag_p99_us"] is not None, r
    assert r["goodput_bps"] > 0.3 * RATE_MBIT * 1e6, r
    assert r["bottleneck_backlog_max_b"] > 0, f"no queue at the bottleneck: {r}"
    with open(os.path.join(str(tmp_path), r["client_file"])) as f:
        d = json.load(f)
    assert d["stack"]["uvicorn"] == O.sse_stack()["uvicorn"] and d["streams"] == 64, d


if os.path.exists(os.path.join(REPO, "agent", "main.c")):

    def test_lab_token_streams_and_model_load(lab, tmp_path):
        """Issue 30's loads, short: 64 lock-step token streams from the
        inference pod while training uploads (every event arrives, its
        delay measured), and the model load (the pod pulls over 8
        connections while training downloads, its requests measured)."""
        w = O.Workload(**MATRIX)
        rs = O.run_instance(lab, "aiqos", "egress", "cubic", [("tokens64", "loadgen")], w, 0, str(tmp_path))
        r = rs[0]
        assert r["cell"] == "egress-tokens64-loadgen-cubic" + AT, r
        check_cell(r, w, rate=64 * 1000 / O.TOKENS_PERIOD_MS)
        assert r["missing"] == 0, r
        assert r["goodput_bps"] > 0.3 * RATE_MBIT * 1e6, r
        rs = O.run_instance(lab, "fifo", "download", "cubic", [("modelload", "loadgen")], w, 0, str(tmp_path))
        r = rs[0]
        assert r["cell"] == "download-modelload-loadgen-cubic" + AT, r
        check_cell(r, w)
        assert r["model_load_bps"] > 0.1 * RATE_MBIT * 1e6, r
        assert r["goodput_bps"] > 0.05 * RATE_MBIT * 1e6, r
