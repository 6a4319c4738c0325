# The real control plane (etcd + kube-apiserver + kube-controller-manager +
# kube-scheduler from hack/build-k8s.sh) started by hack/control-plane.sh on
# 127.0.0.1: readiness, LIST with a node field selector, WATCH with bookmarks,
# compaction and 410 on a too-old resourceVersion, RBAC for a ServiceAccount.
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kapi import Api, pod, q

TOP = Path(__file__).resolve().parents[2]
CP = TOP / "hack" / "control-plane.sh"
BUILD = TOP / "hack" / "build-k8s.sh"
NS = "aqt-cp"
NODE_A = "aqt-cp-node-a"
NODE_B = "aqt-cp-node-b"


class ControlPlane:
    def __init__(self, env):
        self.env = env
        self.dir = Path(env["AIQOS_CP_DIR"])
        self.vars = {}
        for line in (self.dir / "cp.env").read_text().splitlines():
            k, _, v = line.partition("=")
            self.vars[k] = v
        self.server = self.vars["AIQOS_CP_SERVER"]
        self.ca = self.vars["AIQOS_CP_CA"]
        self.admin = Api(self.server, self.ca, cert=self.vars["AIQOS_CP_ADMIN_CERT"],
                         key=self.vars["AIQOS_CP_ADMIN_KEY"])

    def run(self, *args, check=True, timeout=180):
        r = subprocess.run([str(CP), *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            pytest.fail("control-plane.sh %s failed (%d):\n%s\n%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def pids(self):
        out = {}
        for f in (self.dir / "run").glob("*.pid"):
            out[f.stem] = int(f.read_text().strip())
        return out

    def logs(self):
        text = []
        for f in sorted((self.dir / "logs").glob("*.log")):
            lines = f.read_text(errors="replace").splitlines()[-30:]
            text.append("--- %s\n%s" % (f.name, "\n".join(lines)))
        return "\n".join(text)


def alive(pid):
    """True if the process exists and is not a zombie waiting for its reaper."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def expected_version(bindir):
    # .../k8s/<version>/bin
    return Path(bindir).parent.name


@pytest.fixture(scope="module")
def cp():
    r = subprocess.run([str(BUILD), "--check", "--print-bin-dir"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("Kubernetes binaries are not built: run hack/build-k8s.sh (%s)" % r.stderr.strip())
    bindir = r.stdout.strip()
    d = tempfile.mkdtemp(prefix="aqt-k8s-cp-")
    env = dict(os.environ, AIQOS_CP_DIR=d, AIQOS_K8S_BIN=bindir, AIQOS_CP_COMPACTION_INTERVAL="0")
    env.pop("KUBECONFIG", None)
    t0 = time.monotonic()
    r = subprocess.run([str(CP), "start", "--with-controllers"], env=env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        subprocess.run([str(CP), "stop"], env=env, capture_output=True)
        pytest.fail("control-plane.sh start failed (%d):\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
    plane = ControlPlane(env)
    plane.bindir = bindir
    plane.start_seconds = time.monotonic() - t0
    try:
        yield plane
    finally:
        subprocess.run([str(CP), "stop"], env=env, capture_output=True, timeout=120)


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


@pytest.fixture(scope="module")
def ns(cp):
    """A namespace with the default ServiceAccount (made by the controller
    manager) and two fake nodes, so the pod GC controller keeps bound pods."""
    cp.admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    for n in (NODE_A, NODE_B):
        cp.admin.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}})
    wait_for("the default ServiceAccount in %s (kube-controller-manager)" % NS,
             lambda: cp.admin.request("GET", "/api/v1/namespaces/%s/serviceaccounts/default" % NS)[0] == 200)
    return NS


def names(podlist):
    return sorted(p["metadata"]["name"] for p in podlist["items"])


def create_pod(cp, name, node, annotations=None):
    return cp.admin.create("/api/v1/namespaces/%s/pods" % NS, pod(NS, name, node, annotations))


def delete_pod_now(cp, name):
    # No kubelet: a graceful delete would leave the pod terminating forever.
    return cp.admin.ok("DELETE", "/api/v1/namespaces/%s/pods/%s?%s" % (NS, name, q(gracePeriodSeconds=0)))


def test_ready_version_and_idempotent_start(cp):
    assert cp.admin.request("GET", "/readyz")[1] == "ok"
    assert cp.admin.get("/version")["gitVersion"] == expected_version(cp.bindir)
    # kubectl of the same version, built by hack/build-k8s.sh.
    kubectl = subprocess.run([str(Path(cp.bindir) / "kubectl"), "--kubeconfig", cp.vars["KUBECONFIG"],
                              "get", "--raw", "/readyz"], capture_output=True, text=True, timeout=30)
    assert kubectl.returncode == 0, kubectl.stderr
    assert kubectl.stdout.strip() == "ok"
    assert cp.run("status").returncode == 0
    pids = cp.pids()
    assert sorted(pids) == ["apiserver", "controller-manager", "etcd", "scheduler"]
    again = cp.run("start", "--with-controllers")
    assert "already running" in again.stderr
    assert cp.pids() == pids
    env = cp.run("env").stdout
    assert "export KUBECONFIG='%s'" % cp.vars["KUBECONFIG"] in env
    assert "export AIQOS_CP_SERVER='%s'" % cp.server in env
    assert re.search(r"^export AIQOS_CP_SERVER='https://127\.0\.0\.1:\d+'$", env, re.M)
    # Every component listens on loopback only.
    args = (cp.dir / "run" / "apiserver.args").read_text().splitlines()
    assert "--bind-address=127.0.0.1" in args
    assert "--authorization-mode=Node,RBAC" in args
    assert "--etcd-compaction-interval=0" in args


def test_list_with_node_field_selector(cp, ns):
    create_pod(cp, "list-a1", NODE_A)
    create_pod(cp, "list-a2", NODE_A, {"ai.workload": "inference"})
    create_pod(cp, "list-b1", NODE_B)
    out = cp.admin.get("/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_A))
    assert out["kind"] == "PodList"
    assert int(out["metadata"]["resourceVersion"]) > 0
    assert [n for n in names(out) if n.startswith("list-")] == ["list-a1", "list-a2"]
    for p in out["items"]:
        assert p["spec"]["nodeName"] == NODE_A
    a2 = [p for p in out["items"] if p["metadata"]["name"] == "list-a2"][0]
    assert a2["metadata"]["annotations"]["ai.workload"] == "inference"
    # Paging: limit=1 gives a continue token over the same snapshot.
    page = cp.admin.get("/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_A, limit=1))
    assert len(page["items"]) == 1 and page["metadata"].get("continue")
    for n in ("list-a1", "list-a2", "list-b1"):
        delete_pod_now(cp, n)


def test_watch_events_and_bookmark(cp, ns):
    create_pod(cp, "w-a1", NODE_A)
    create_pod(cp, "w-a2", NODE_A)
    lst = cp.admin.get("/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_A))
    rv = lst["metadata"]["resourceVersion"]
    status, events = cp.admin.watch("/api/v1/pods?" + q(
        watch=1, fieldSelector="spec.nodeName=" + NODE_A, resourceVersion=rv,
        allowWatchBookmarks="true", timeoutSeconds=8), timeout=30)
    assert status == 200
    create_pod(cp, "w-a3", NODE_A, {"ai.workload": "training"})
    create_pod(cp, "w-b1", NODE_B)  # other node: must not show up
    cp.admin.ok("PATCH", "/api/v1/namespaces/%s/pods/w-a1" % NS,
                {"metadata": {"annotations": {"ai.workload": "inference"}}},
                content_type="application/merge-patch+json")
    delete_pod_now(cp, "w-a2")
    seen = []
    bookmarks = []
    for ev in events:  # ends when the server closes the stream (timeoutSeconds)
        if ev["type"] == "BOOKMARK":
            bookmarks.append(ev["object"])
        else:
            md = ev["object"]["metadata"]
            seen.append((ev["type"], md["name"], "deletionTimestamp" in md))
            assert int(md["resourceVersion"]) > int(rv)
    # Deleting a bound pod, even with gracePeriodSeconds=0, first sets
    # deletionTimestamp (MODIFIED), then removes it (DELETED).
    assert seen == [("ADDED", "w-a3", False), ("MODIFIED", "w-a1", False),
                    ("MODIFIED", "w-a2", True), ("DELETED", "w-a2", True)]
    # The server sends a bookmark shortly before timeoutSeconds ends the stream.
    assert bookmarks, "no BOOKMARK before the watch timed out"
    bm = bookmarks[-1]
    assert bm["kind"] == "Pod"
    assert int(bm["metadata"]["resourceVersion"]) >= int(rv)
    assert set(bm["metadata"]) <= {"resourceVersion", "creationTimestamp", "annotations"}
    for n in ("w-a1", "w-a3", "w-b1"):
        delete_pod_now(cp, n)


def test_watch_list_initial_events_end_bookmark(cp, ns):
    create_pod(cp, "wl-a1", NODE_A)
    status, events = cp.admin.watch("/api/v1/pods?" + q(
        watch=1, fieldSelector="spec.nodeName=" + NODE_A, allowWatchBookmarks="true",
        sendInitialEvents="true", resourceVersionMatch="NotOlderThan", timeoutSeconds=10), timeout=30)
    assert status == 200
    added = []
    for ev in events:
        if ev["type"] == "ADDED":
            added.append(ev["object"]["metadata"]["name"])
            continue
        assert ev["type"] == "BOOKMARK", ev
        assert ev["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
        break
    else:
        pytest.fail("stream ended without the initial-events-end bookmark")
    assert "wl-a1" in added
    delete_pod_now(cp, "wl-a1")


def test_compaction_and_too_old_resource_version(cp, ns):
    first = create_pod(cp, "old-a1", NODE_A)
    old_rv = first["metadata"]["resourceVersion"]
    for i in range(3):
        create_pod(cp, "old-a%d" % (i + 2), NODE_A)
    compacted = int(cp.run("compact").stdout.strip())
    assert compacted > int(old_rv)
    # A running API server still serves the old revision from its watch cache
    # (it learns of compactions only from its own --etcd-compaction-interval
    # loop). A fresh one (restart, rollout) starts its cache at the current
    # revision, and etcd no longer has the old one.
    cp.run("restart", "apiserver")
    status, body = cp.admin.request("GET", "/api/v1/pods?" + q(
        fieldSelector="spec.nodeName=" + NODE_A, resourceVersion=old_rv, resourceVersionMatch="Exact"))
    assert status == 410, body
    assert body["reason"] == "Expired"
    # The watch answers 200, then one ERROR event carrying the 410 Status.
    status, events = cp.admin.watch("/api/v1/pods?" + q(
        watch=1, fieldSelector="spec.nodeName=" + NODE_A, resourceVersion=old_rv,
        allowWatchBookmarks="true", timeoutSeconds=5), timeout=30)
    evs = list(events)
    if status == 200:
        assert evs and evs[0]["type"] == "ERROR", evs[:3]
        st = evs[0]["object"]
    else:
        st = evs[0]
    assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired", st
    assert "too old resource version" in st["message"]
    # Relisting gives a resourceVersion that can be watched from.
    lst = cp.admin.get("/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_A))
    assert int(lst["metadata"]["resourceVersion"]) >= compacted
    status, events = cp.admin.watch("/api/v1/pods?" + q(
        watch=1, fieldSelector="spec.nodeName=" + NODE_A, resourceVersion=lst["metadata"]["resourceVersion"],
        timeoutSeconds=2), timeout=30)
    assert status == 200
    assert [e for e in events if e["type"] == "ERROR"] == []
    for i in range(4):
        delete_pod_now(cp, "old-a%d" % (i + 1))


def agent_rbac(cp, sa):
    cp.admin.create("/api/v1/namespaces/%s/serviceaccounts" % NS,
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}})
    cp.admin.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": sa},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        ]})
    cp.admin.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": sa},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": NS}]})


def test_rbac_service_account_token(cp, ns, tmp_path):
    sa = "aqt-agent"
    agent_rbac(cp, sa)
    create_pod(cp, "rbac-a1", NODE_A)
    kc = tmp_path / "agent.kubeconfig"
    out = cp.run("token", NS, sa, str(kc)).stdout.strip()
    assert out == str(kc)
    text = kc.read_text()
    assert "server: %s" % cp.server in text
    assert "certificate-authority: %s" % cp.ca in text
    assert "client-certificate" not in text
    assert oct(kc.stat().st_mode & 0o777) == "0o600"
    token = re.search(r"^\s+token: (\S+)$", text, re.M).group(1)
    agent = Api(cp.server, cp.ca, token=token)

    who = agent.create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert who["status"]["userInfo"]["username"] == "system:serviceaccount:%s:%s" % (NS, sa)

    path = "/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_A)
    # RBAC caches catch up with the new binding within moments.
    lst = wait_for("the agent's RBAC to take effect", lambda: agent.request("GET", path)[0] == 200 and agent.get(path))
    assert "rbac-a1" in names(lst)
    status, events = agent.watch(path + "&" + q(watch=1, resourceVersion=lst["metadata"]["resourceVersion"],
                                                  allowWatchBookmarks="true", timeoutSeconds=1))
    assert status == 200
    list(events)
    ev = agent.create("/api/v1/namespaces/%s/events" % NS, {
        "apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "rbac-a1."},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": "rbac-a1"},
        "reason": "Tuned", "message": "aiqos test", "type": "Normal", "source": {"component": "aiqos-agent"}})
    assert ev["reason"] == "Tuned"

    for method, p in (("DELETE", "/api/v1/namespaces/%s/pods/rbac-a1" % NS),
                      ("GET", "/api/v1/namespaces/%s/secrets" % NS),
                      ("GET", "/api/v1/nodes")):
        status, body = agent.request(method, p)
        assert status == 403, (method, p, status, body)
        assert body["reason"] == "Forbidden"
        assert "system:serviceaccount:%s:%s" % (NS, sa) in body["message"]
    # kubectl reads the same kubeconfig and agrees.
    kubectl = str(Path(cp.bindir) / "kubectl")
    for verb, want in (("watch", "yes"), ("delete", "no"), ("patch", "no")):
        r = subprocess.run([kubectl, "--kubeconfig", str(kc), "auth", "can-i", verb, "pods", "-n", NS],
                           capture_output=True, text=True, timeout=30)
        assert r.stdout.strip() == want, (verb, r.stdout, r.stderr)
    # The pod is still there: the 403 changed nothing.
    assert cp.admin.get("/api/v1/namespaces/%s/pods/rbac-a1" % NS)["metadata"]["name"] == "rbac-a1"
    # A token is refused once its ServiceAccount is gone.
    cp.admin.ok("DELETE", "/api/v1/namespaces/%s/serviceaccounts/%s" % (NS, sa))
    wait_for("the deleted ServiceAccount's token to be refused", lambda: agent.request("GET", path)[0] == 401)
    delete_pod_now(cp, "rbac-a1")


def test_node_identity_is_limited_to_its_pods(cp, ns, tmp_path):
    kc = tmp_path / "node.kubeconfig"
    cp.run("node-kubeconfig", NODE_A, str(kc))
    text = kc.read_text()
    cert = re.search(r"client-certificate: (\S+)", text).group(1)
    key = re.search(r"client-key: (\S+)", text).group(1)
    node = Api(cp.server, cp.ca, cert=cert, key=key)
    create_pod(cp, "node-a1", NODE_A)
    own = node.get("/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_A))
    assert "node-a1" in names(own)
    status, body = node.request("GET", "/api/v1/pods?" + q(fieldSelector="spec.nodeName=" + NODE_B))
    assert status == 403, body
    delete_pod_now(cp, "node-a1")


def test_stop_removes_everything(cp):
    pids = cp.pids()
    assert len(pids) == 4
    cp.run("stop")
    for name, pid in pids.items():
        assert not alive(pid), "%s (pid %d) still running after stop" % (name, pid)
    assert not cp.dir.exists()
    # Idempotent: a second stop, and status, on nothing.
    assert cp.run("stop").returncode == 0
    assert cp.run("status", check=False).returncode != 0
