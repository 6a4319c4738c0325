# manifests/ against the real control plane (hack/control-plane.sh):
#   - `kubectl apply --dry-run=server --validate=strict -k` of manifests/,
#     manifests/uninstall/ and manifests/examples/: every object passes the
#     real API's validation and admission (and an unknown field is refused,
#     so the check can fail);
#   - the agent (build/bin/aiqos-agent, $AIQOS_BUILD) with the identity the
#     DaemonSet gives it — a token of the ServiceAccount from manifests/,
#     bound by nothing but manifests/clusterrolebinding.yaml — lists and
#     watches its node's pods and posts Events; with any one of the
#     ClusterRole's permissions taken away it visibly fails, so a rule
#     missing from manifests/ fails this test.
# No kubelet: pods are bound to a Node object by name. The agent's uplink is
# a name no interface has, and no pod it sees is of an uplink class: it
# changes nothing on this machine.
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import plane as cplane
from kapi import pod, q

TOP = cplane.TOP
CP = cplane.CP
AGENT_BUILD = Path(os.environ.get("AIQOS_BUILD") or TOP / "build")
NS_SYSTEM = "aiqos-system"
SA = "aiqos-agent"
NS = "aqt-m"
NODE = "aqt-m-node"


@pytest.fixture(scope="module")
def plane():
    try:
        p = cplane.start(prefix="aqt-k8s-m-", controllers=True)
    except cplane.Unavailable as e:
        pytest.skip(str(e))
    except cplane.StartFailed as e:
        pytest.fail(str(e))
    try:
        yield p
    finally:
        p.stop()


def wait_for(what, fn, timeout=30.0, interval=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - report the last failure
            last = e
        time.sleep(interval)
    pytest.fail("timed out after %.0fs waiting for %s (last error: %r)" % (timeout, what, last))


def holds_for(fn, seconds, interval=0.25):
    """fn() stays falsy for the whole time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if fn():
            return False
        time.sleep(interval)
    return True


# ---- server-side validation ---------------------------------------------------------

def dry_run(plane, path, *extra):
    return plane.k("apply", "--dry-run=server", "--validate=strict", "-k", str(path), *extra, check=False)


def test_manifests_pass_server_side_validation(plane):
    # Namespaced objects need their namespace to exist, even in a dry run;
    # pods their ServiceAccount (made by the controller manager).
    plane.k("apply", "--validate=strict", "-f", str(TOP / "manifests" / "namespace.yaml"))
    wait_for("the default ServiceAccount of namespace default",
             lambda: plane.admin.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200)
    for path, extra, want in (
            (TOP / "manifests", (), {"namespace/aiqos-system", "serviceaccount/aiqos-agent",
                                     "clusterrole.rbac.authorization.k8s.io/aiqos-agent",
                                     "clusterrolebinding.rbac.authorization.k8s.io/aiqos-agent",
                                     "configmap/aiqos-config", "daemonset.apps/aiqos-agent"}),
            (TOP / "manifests" / "uninstall", (), {"daemonset.apps/aiqos-uninstall"}),
            (TOP / "manifests" / "examples", ("-n", "default"), {"pod/aiqos-example-inference",
                                                                 "pod/aiqos-example-training"})):
        r = dry_run(plane, path, *extra)
        assert r.returncode == 0, "%s: %s %s" % (path, r.stdout, r.stderr)
        got = {line.split()[0] for line in r.stdout.splitlines() if line.endswith("(server dry run)")}
        assert got == want, (path, r.stdout)
    # Nothing was created by the dry runs.
    assert plane.k("-n", NS_SYSTEM, "get", "daemonsets", "-o", "name").stdout.strip() == ""


def test_server_side_validation_refuses_an_unknown_field(plane, tmp_path):
    overlay = tmp_path / "bad"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources:\n  - %s\npatches:\n  - target: {kind: DaemonSet, name: aiqos-agent}\n"
        "    patch: '[{\"op\": \"add\", \"path\": \"/spec/template/spec/containers/0/imagePullPolcy\","
        " \"value\": \"Never\"}]'\n" % os.path.relpath(TOP / "manifests", overlay))
    r = dry_run(plane, overlay)
    assert r.returncode != 0
    assert "imagePullPolcy" in r.stderr and "unknown field" in r.stderr, r.stderr


# ---- the agent with the manifests' identity ---------------------------------------------------

class Agent:
    def __init__(self, plane, tmp):
        self.plane = plane
        self.tmp = tmp
        self.kubeconfig = tmp / "agent.kubeconfig"
        plane.cp("token", NS_SYSTEM, SA, str(self.kubeconfig))
        (tmp / "config.json").write_text(json.dumps({"uplink": "aqt-m-none0", "debounceMs": 50}))
        self.sock = tmp / "agent.sock"
        self.proc = None
        self.log = None
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()

    def start(self):
        self.log = open(self.tmp / "agent.log", "a")
        self.proc = subprocess.Popen(
            [str(AGENT_BUILD / "bin" / "aiqos-agent"), "--kubeconfig", str(self.kubeconfig), "--node-name", NODE,
             "--config", str(self.tmp / "config.json"), "--socket", str(self.sock),
             "--state-dir", str(self.tmp / "state"), "--metrics-addr", "127.0.0.1:%d" % self.port,
             "--log-level", "debug"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.log:
            self.log.close()
        self.proc = None

    def ready(self):
        assert self.proc.poll() is None, "the agent exited %s: %s" % (self.proc.returncode, self.log_text())
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/readyz" % self.port, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def pods(self):
        r = subprocess.run([str(AGENT_BUILD / "bin" / "aiqosctl"), "--socket", str(self.sock), "status", "--json"],
                           capture_output=True, text=True, timeout=10)
        # exit 1 with the status still printed: the agent is not connected or
        # not ready (this file's tests take permissions away on purpose)
        if r.returncode not in (0, 1) or not r.stdout.strip():
            return set()
        return {(p["namespace"], p["name"]) for p in json.loads(r.stdout).get("pods", [])}

    def log_text(self):
        return (self.tmp / "agent.log").read_text(errors="replace")[-3000:]


def events_for(plane, name, reason):
    lst = plane.admin.get("/api/v1/namespaces/%s/events?%s" % (
        NS, q(fieldSelector="involvedObject.name=%s,reason=%s" % (name, reason))))
    return lst["items"]


def create_pod(plane, name, annotations):
    plane.admin.create("/api/v1/namespaces/%s/pods" % NS, pod(NS, name, NODE, annotations))


@pytest.fixture(scope="module")
def installed(plane):
    """manifests/ applied for real, a Node and a namespace for pods."""
    plane.k("apply", "--validate=strict", "-k", str(TOP / "manifests"))
    plane.admin.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    plane.admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    # Nothing but manifests/clusterrolebinding.yaml grants this identity anything.
    who = "system:serviceaccount:%s:%s" % (NS_SYSTEM, SA)
    bindings = json.loads(plane.k("get", "clusterrolebindings,rolebindings", "-A", "-o", "json").stdout)["items"]
    granting = [b["metadata"]["name"] for b in bindings
                if b["metadata"].get("labels", {}).get("kubernetes.io/bootstrapping") != "rbac-defaults"
                and any((s.get("kind") == "ServiceAccount" and s.get("name") == SA)
                        or (s.get("kind") == "Group" and s.get("name") in (
                            "system:serviceaccounts", "system:serviceaccounts:" + NS_SYSTEM))
                        for s in b.get("subjects") or [])]
    assert granting == ["aiqos-agent"], granting
    assert plane.k("auth", "can-i", "list", "secrets", "--all-namespaces", "--as", who,
                   check=False).stdout.strip() == "no"
    return plane


def role_without(plane, group_resource_verb):
    """The manifests' ClusterRole with one verb of one rule taken away."""
    role = json.loads(plane.k("get", "clusterrole", "aiqos-agent", "-o", "json").stdout)
    res, verb = group_resource_verb
    rules = []
    for rule in role["rules"]:
        rule = dict(rule)
        if res in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
        rules.append(rule)
    plane.admin.ok("PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/aiqos-agent", {"rules": rules},
                   content_type="application/merge-patch+json")


@pytest.fixture
def agent(installed, tmp_path):
    a = Agent(installed, tmp_path)
    try:
        yield a
    finally:
        a.stop()
        # the manifests' role back, whatever a test took away
        installed.k("apply", "--validate=strict", "-k", str(TOP / "manifests"))


def test_agent_lists_watches_and_posts_events_with_the_manifests_rbac(installed, agent):
    plane = installed
    create_pod(plane, "m-bogus", {"ai.workload": "no-such-class"})
    agent.start()
    wait_for("the agent ready (LIST of its node's pods)", agent.ready, 30)
    assert (NS, "m-bogus") in agent.pods()
    # events create: the agent tells the pod its annotation is invalid
    got = wait_for("an InvalidWorkload Event on m-bogus",
                   lambda: events_for(plane, "m-bogus", "InvalidWorkload"), 20)
    assert got[0]["source"]["component"] == "aiqos-agent" or got[0].get("reportingComponent") == "aiqos-agent", got[0]
    # WATCH: a pod created now shows up without a relist
    create_pod(plane, "m-late", {})
    wait_for("m-late in the agent's view (WATCH)", lambda: (NS, "m-late") in agent.pods(), 20)
    plane.admin.ok("DELETE", "/api/v1/namespaces/%s/pods/m-late?%s" % (NS, q(gracePeriodSeconds=0)))
    wait_for("m-late gone from the agent's view", lambda: (NS, "m-late") not in agent.pods(), 20)
    assert "403" not in agent.log_text() and "Forbidden" not in agent.log_text(), agent.log_text()


def test_agent_without_list_is_never_ready(installed, agent):
    role_without(installed, ("pods", "list"))
    agent.start()
    assert holds_for(agent.ready, 8), "ready although it may not list pods"
    wait_for("a 403 in the agent's log", lambda: "403" in agent.log_text() or "orbidden" in agent.log_text(), 10)


def test_agent_without_watch_misses_new_pods(installed, agent):
    role_without(installed, ("pods", "watch"))
    agent.start()
    wait_for("the agent's first LIST", lambda: (NS, "m-bogus") in agent.pods(), 30)
    create_pod(installed, "m-unseen", {})
    try:
        assert holds_for(lambda: (NS, "m-unseen") in agent.pods(), 6), "saw a new pod without watch"
        wait_for("a 403 in the agent's log", lambda: "403" in agent.log_text() or "orbidden" in agent.log_text(), 10)
    finally:
        installed.admin.ok("DELETE", "/api/v1/namespaces/%s/pods/m-unseen?%s" % (NS, q(gracePeriodSeconds=0)))


def test_agent_without_event_create_posts_nothing(installed, agent):
    role_without(installed, ("events", "create"))
    create_pod(installed, "m-bogus2", {"ai.workload": "no-such-class-either"})
    agent.start()
    wait_for("m-bogus2 in the agent's view", lambda: (NS, "m-bogus2") in agent.pods(), 30)
    try:
        assert holds_for(lambda: events_for(installed, "m-bogus2", "InvalidWorkload"), 6), \
            "an Event was posted without events create"
        wait_for("a 403 in the agent's log", lambda: "403" in agent.log_text() or "orbidden" in agent.log_text(), 10)
    finally:
        installed.admin.ok("DELETE", "/api/v1/namespaces/%s/pods/m-bogus2?%s" % (NS, q(gracePeriodSeconds=0)))
