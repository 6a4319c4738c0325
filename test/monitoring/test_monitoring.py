"""test_monitoring.py — manifests/monitoring/ against the real tools:
- the rule file passes `promtool check rules` and its unit tests
  (`promtool test rules`), and the PrometheusRule is generated from it;
- the dashboard is well-formed Grafana JSON whose panels all query the
  Prometheus data source variable;
- live: aiqos-agent on an agentlab node (the fake API server, pods of every
  class tuned through the real CNI chain, traffic out of the uplink, pods
  re-tuned and added while it runs) scraped every second by a real
  Prometheus in the node's netns, with the rules loaded: the real /metrics
  passes `promtool check metrics`, has one label set per family and the
  families docs/reference/metrics.md lists, every
  panel query returns data (at least one finite sample), every rule
  evaluates, the degraded pods of `aiqosctl status` are the ones
  aiqos_pods_tuning{status="degraded"} counts, and with the API server
  gone AiqosAgentNotConnectedToAPI becomes pending;
- bound to the node's address, /metrics answers a scraper in another netns.
Root for the live test (network namespaces); promtool and prometheus from
the Debian package (hack/install-deps.sh)."""

import contextlib
import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse

import pytest
import yaml

import agentlab
import cni
from agentlab import wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MON = os.path.join(REPO, "manifests", "monitoring")
RULES = os.path.join(MON, "aiqos.rules.yaml")
RULES_TEST = os.path.join(MON, "tests", "rules.test.yaml")
PROMRULE = os.path.join(MON, "prometheusrule.yaml")
DASHBOARD = os.path.join(MON, "grafana-dashboard.json")
GEN = os.path.join(REPO, "hack", "gen-prometheusrule.py")
PROM_PORT = 19090  # in the node's own netns: its loopback is ours alone
RATE_INTERVAL = "15s"
# ~2 Mbit/s of UDP to the fabric for 5 minutes at most (no route back: only the egress matters)
UDP_SENDER = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
end = time.monotonic() + 300
while time.monotonic() < end:
    s.sendto(b"x" * 1200, (sys.argv[1], 9))
    time.sleep(0.005)
"""  # what Grafana's $__rate_interval is for a 1 s scrape interval, with margin


def tool(name):
    path = shutil.which(name)
    if not path:
        pytest.fail(f"{name} not installed (Debian package prometheus; hack/install-deps.sh)")
    return path


def run(*argv, input=None, timeout=60):
    return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)


# ---- static checks ----

def test_rules_check():
    p = run(tool("promtool"), "check", "rules", RULES)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS: 9 rules found" in p.stdout, p.stdout


def test_rules_unit_tests():
    p = run(tool("promtool"), "test", "rules", RULES_TEST)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "SUCCESS" in p.stdout


def test_rules_unit_tests_cover_every_alert():
    alerts = {r["alert"] for g in yaml.safe_load(open(RULES))["groups"] for r in g["rules"] if "alert" in r}
    tested, firing = set(), set()
    for t in yaml.safe_load(open(RULES_TEST))["tests"]:
        for a in t.get("alert_rule_test", []):
            tested.add(a["alertname"])
            if a.get("exp_alerts"):
                firing.add(a["alertname"])
    assert alerts == tested == firing, (alerts, tested, firing)


def test_rules_unit_tests_can_fail(tmp_path):
    """The unit tests see a broken rule: the same tests against rules whose
    thresholds moved fail."""
    rules = yaml.safe_load(open(RULES))
    for g in rules["groups"]:
        for r in g["rules"]:
            r["expr"] = r["expr"].replace("16 * 1024 * 1024", "32 * 1024 * 1024").replace("> 10", "> 100")
            if r.get("for") == "5m":
                r["for"] = "1m"
    (tmp_path / "aiqos.rules.yaml").write_text(yaml.safe_dump(rules))
    (tmp_path / "tests").mkdir()
    shutil.copy(RULES_TEST, tmp_path / "tests" / "rules.test.yaml")
    p = run(tool("promtool"), "test", "rules", str(tmp_path / "tests" / "rules.test.yaml"))
    assert p.returncode != 0, p.stdout
    for name in ("AiqosAgentMemoryOverBudget", "AiqosWatchReconnectStorm", "AiqosAgentNotConnectedToAPI"):
        assert name in p.stdout + p.stderr, p.stdout + p.stderr


def test_prometheusrule_generated_from_rules():
    p = run("/usr/bin/python3", GEN, "--check")
    assert p.returncode == 0, p.stderr
    obj = yaml.safe_load(open(PROMRULE))
    assert obj["apiVersion"] == "monitoring.coreos.com/v1" and obj["kind"] == "PrometheusRule"
    assert obj["spec"] == yaml.safe_load(open(RULES))


def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def panel_queries():
    """(panel title, refId, expr) of every target of every panel."""
    out = []
    for p in dashboard()["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["refId"], t["expr"]))
    return out


def test_dashboard_wellformed():
    d = dashboard()
    names = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "instance"} <= names
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"].lower() for p in d["panels"])
    for want in ("mode", "backlog", "drops", "ecn", "throughput", "re-tune"):
        assert want in titles, want
    for p in d["panels"]:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == "${datasource}"
            assert 'instance=~"$instance"' in t["expr"], (p["title"], t["expr"])


def grafana_to_promql(expr):
    return expr.replace("$__rate_interval", RATE_INTERVAL).replace("$instance", ".*")


# ---- live: a real agent, a real Prometheus ----

def metrics_port(node):
    port = None
    for line in open(node.agent_log):
        if "metrics_port=" in line:
            port = int(line.split("metrics_port=")[1].split()[0])
    assert port, f"no metrics port in the log:\n{node.agent_log_tail()}"
    return port


def http_get(node, port, path, timeout=10):
    def call():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()
    return agentlab.in_netns_call(node.node.name, call)


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def label_sets(text):
    """family -> set of label-name tuples (le/quantile aside)."""
    types, out = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        name = m.group(1)
        fam = name
        for suf in ("_bucket", "_sum", "_count"):
            if name.endswith(suf) and types.get(name[: -len(suf)]) in ("histogram", "summary"):
                fam = name[: -len(suf)]
        labels = tuple(k for k, _ in LABEL.findall(m.group(3) or "") if k not in ("le", "quantile"))
        out.setdefault(fam, set()).add(labels)
    return out


class Prometheus:
    def __init__(self, node, target_port, tmp):
        self.node = node
        self.dir = tmp
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [RULES],
            "scrape_configs": [{"job_name": "aiqos", "static_configs": [
                {"targets": [f"127.0.0.1:{target_port}"], "labels": {"node": node.name}}]}],
        }
        self.config = os.path.join(tmp, "prometheus.yml")
        with open(self.config, "w") as f:
            yaml.safe_dump(cfg, f)
        self.log = os.path.join(tmp, "prometheus.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", node.node.name, tool("prometheus"), f"--config.file={self.config}",
                 f"--storage.tsdb.path={os.path.join(tmp, 'tsdb')}",
                 f"--web.listen-address=127.0.0.1:{PROM_PORT}", "--log.level=warn"],
                stdout=log, stderr=log, start_new_session=True)
        wait_until(lambda: self._ready(), 30, "prometheus ready", interval_s=0.2)

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"prometheus exited {self.proc.returncode}:\n{self.log_tail()}")
        try:
            return http_get(self.node, PROM_PORT, "/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def log_tail(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-4000:]

    def api(self, path, **params):
        q = urllib.parse.urlencode(params)
        status, text = http_get(self.node, PROM_PORT, f"/api/v1/{path}{'?' + q if q else ''}")
        body = json.loads(text)
        assert status == 200 and body.get("status") == "success", (path, params, status, text[:500])
        return body["data"]

    def query(self, expr):
        return self.api("query", query=expr)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def finite_samples(data):
    vals = []
    if data["resultType"] == "vector":
        vals = [float(r["value"][1]) for r in data["result"]]
    elif data["resultType"] == "scalar":
        vals = [float(data["result"][1])]
    return [v for v in vals if math.isfinite(v)]


def has_data(key, data):
    """At least one finite sample; the throughput panels: inference and
    training both sending."""
    title, ref = key
    if "throughput" in title.lower() and ref == "A":
        by_class = {r["metric"].get("class"): float(r["value"][1]) for r in data["result"]}
        return by_class.get("inference", 0) > 0 and by_class.get("training", 0) > 0
    return bool(finite_samples(data))


@pytest.fixture
def node(lab):
    n = agentlab.NodeLab(lab)
    try:
        n.start_api()
        yield n
    finally:
        n.cleanup()


def test_dashboard_and_rules_against_a_real_agent(node, lab):
    promtool = tool("promtool")
    node.start_agent({"uplinkRate": "500mbit", "debounceMs": 50, "mixedHoldSeconds": 2})
    port = metrics_port(node)
    pods = {
        "inference": node.add_pod({"ai.workload": "inference", "kubernetes.io/egress-bandwidth": "50M"}),
        "training": node.add_pod({"ai.workload": "training", "kubernetes.io/egress-bandwidth": "100M"}),
        "default": node.add_pod({"kubernetes.io/egress-bandwidth": "20M"}),
    }
    wait_until(lambda: (node.status(check=False) or {}).get("mode") == "mixed", 10, "mode mixed")

    tmp = tempfile.mkdtemp(prefix="aqm-prom-", dir=lab.tmp)
    prom = None
    pings = []
    try:
        # traffic of both classes out of the uplink (no route back: only the egress matters)
        for cls in ("inference", "training"):
            pings.append(subprocess.Popen(
                cni.in_ns(pods[cls].ns, "/usr/bin/python3", "-c", UDP_SENDER, f"{node.uplink_net}.1"),
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, f"ping-{cls}.log"), "w"),
                start_new_session=True))
        prom = Prometheus(node, port, tmp)
        for cls, p in zip(("inference", "training"), pings):
            assert p.poll() is None, open(os.path.join(tmp, f"ping-{cls}.log")).read()

        # the real exposition: promtool's linter, one label set per family
        status, text = http_get(node, port, "/metrics")
        assert status == 200
        p = run(promtool, "check", "metrics", input=text)
        assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr
        for fam, sets in label_sets(text).items():
            assert len(sets) == 1, f"{fam} has {len(sets)} label sets: {sets}"
        for fam in ("aiqos_build_info", "process_resident_memory_bytes", "aiqos_uplink_queue_backlog_bytes",
                    "aiqos_pod_queue_backlog_bytes", "aiqos_class_guaranteed_rate_bytes_per_second",
                    "aiqos_api_request_duration_seconds", "aiqos_plugin_request_duration_seconds"):
            assert f"# TYPE {fam} " in text, fam
        assert not re.search(r'[{,](namespace|pod)="', text), "labels that clash with the target labels"
        # docs/reference/metrics.md lists exactly the families the agent serves
        doc = open(os.path.join(REPO, "docs", "reference", "metrics.md")).read()
        table = doc[doc.index("## Families"):doc.index("### Migration")]
        documented = set(re.findall(r"`((?:aiqos|process)_[a-z_]+)`", table))
        served = set(label_sets(text))
        assert served == documented, (f"served, not documented: {sorted(served - documented)}; "
                                      f"documented, not served: {sorted(documented - served)}")

        # activity while Prometheus watches: pod re-tunes (and their Events),
        # node re-tunes, plugin requests
        queries = [(t, ref, grafana_to_promql(e)) for t, ref, e in panel_queries()]
        pending = dict(((t, ref), q) for t, ref, q in queries)
        last = {}
        deadline = time.monotonic() + 120
        flip, n = 0, 0
        while pending and time.monotonic() < deadline:
            flip += 1
            pods["default"].annotate({"kubernetes.io/egress-bandwidth": f"{20 + flip % 2 * 10}M"})
            if flip % 4 == 0 and n < 3:
                n += 1
                node.add_pod({"ai.workload": "inference" if n % 2 else "training"})
            time.sleep(1.5)
            for key, q in list(pending.items()):
                data = prom.query(q)
                last[key] = data
                if has_data(key, data):
                    del pending[key]
        assert not pending, "panel queries without data:\n" + "\n".join(
            f"  {t} [{ref}]: {pending[(t, ref)]}\n    -> {json.dumps(last.get((t, ref)))[:300]}"
            for t, ref in pending) + f"\n--- prometheus ---\n{prom.log_tail()}"

        # the retired names are gone (so "data" above means something)
        assert not has_data(("old", "A"), prom.query('aiqos_qdisc_backlog_bytes{instance=~".*"}'))
        # the target was up all along, and every rule evaluates
        up = finite_samples(prom.query('avg_over_time(up{job="aiqos"}[1m])'))
        assert up and up[0] >= 0.9, up
        groups = prom.api("rules")["groups"]
        rules = [r for g in groups for r in g["rules"]]
        assert len(rules) == 9
        bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
        assert not bad, bad

        # degraded pods (this kernel's fallbacks) are counted as aiqosctl shows them
        def same_count():
            st = node.status()
            n = sum(1 for p in st["pods"] if p["status"] == "degraded")
            _, text = http_get(node, port, "/metrics")
            counted = finite_samples(prom.query('aiqos_pods_tuning{status="degraded"}'))
            ok = f'aiqos_pods_tuning{{status="degraded"}} {n}\n' in text and counted == [float(n)]
            return (n, st) if ok else None
        degraded, st = wait_until(same_count, 10, "aiqos_pods_tuning{status=degraded} = aiqosctl status", 0.5)
        out = node.aiqosctl("status").stdout
        assert out.count("degraded") >= degraded, out
        alerts = {r["name"]: r["state"] for r in rules}
        if degraded:
            assert alerts["AiqosPodsDegraded"] in ("pending", "firing"), alerts
        assert alerts["AiqosUplinkTuningFailing"] == "inactive", alerts
        assert alerts["AiqosAgentDown"] == "inactive", alerts
        assert alerts["AiqosAgentNotConnectedToAPI"] == "inactive", alerts

        # the API server goes away: the real series make its alert pending
        os.killpg(node.api_proc.pid, signal.SIGKILL)
        node.api_proc.wait(5)

        def api_alert():
            rs = {r["name"]: r for g in prom.api("rules")["groups"] for r in g["rules"]}
            return rs["AiqosAgentNotConnectedToAPI"]["state"] == "pending"
        wait_until(api_alert, 30, "AiqosAgentNotConnectedToAPI pending", 0.5)
    finally:
        for p in pings:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)
        if prom:
            prom.stop()


def test_metrics_scrapable_from_off_the_node(node):
    """Bound to the node's address (what the DaemonSet's $(POD_IP):9464 is
    with the host network), /metrics answers a scraper in another netns; the
    default loopback bind does not."""
    node_ip = f"{node.uplink_net}.2"

    def get_from_fabric(addr, port):
        def call():
            c = http.client.HTTPConnection(addr, port, timeout=3)
            try:
                c.request("GET", "/metrics")
                r = c.getresponse()
                return r.status, r.read().decode()
            finally:
                c.close()
        return agentlab.in_netns_call(node.fabric.name, call)

    node.start_agent({"uplinkRate": "500mbit"}, args=("--metrics-addr", f"{node_ip}:19464"))
    status, text = get_from_fabric(node_ip, 19464)
    assert status == 200 and "# TYPE aiqos_build_info gauge" in text
    node.stop_agent()
    node.start_agent({"uplinkRate": "500mbit"}, args=("--metrics-addr", "127.0.0.1:19464"))
    with pytest.raises(OSError):
        get_from_fabric(node_ip, 19464)
