"""kubelab.py — a lab node (agentlab.NodeLab) whose agent watches the real
kube-apiserver instead of the API stand-in: etcd + kube-apiserver started by
hack/control-plane.sh (through test/k8s/plane.py, the k8s suite's fixture
code) *inside the node's network namespace*, so everything stays on that
namespace's loopback and the agent reaches it at 127.0.0.1 as it would a
local API server. The agent uses the plane's admin kubeconfig (client
certificate).

The tests drive pods through NodeLab's small control API (POST/PATCH/DELETE
/pods, GET /pods), translated here into real API calls: a create (the server
assigns the uid), a status patch (phase Running, podIPs, as the kubelet
would), a merge patch of the annotations (None removes a key) and a delete
with gracePeriodSeconds=0. No controllers, no kubelet: the namespace and its
default ServiceAccount are created directly."""

import os
import sys

import agentlab

sys.path.insert(0, os.path.join(agentlab.REPO, "test", "k8s"))

import kapi  # noqa: E402
import plane as cplane  # noqa: E402

NAMESPACE = "aqt"
Unavailable = cplane.Unavailable


class KubeNodeLab(agentlab.NodeLab):
    plane = None

    def start_api(self):
        """The control plane in this node's netns (Unavailable without binaries)."""
        self.plane = cplane.start(prefix="cp-", controllers=False, wrap=["ip", "netns", "exec", self.node.name],
                                  parent=self.dir)
        self.kubeconfig = self.plane.kubeconfig
        for path, obj in (("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": NAMESPACE}}),
                          (f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
                           {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})):
            self.kube("POST", path, obj, ok=(201, 409))

    def kube(self, method, path, body=None, ok=(200, 201), content_type="application/json"):
        """One request to the real API server (from inside the node netns)."""
        status, out = agentlab.in_netns_call(
            self.node.name, lambda: self.plane.admin.request(method, path, body, content_type, timeout=30))
        if ok and status not in ok:
            raise AssertionError(f"kube-apiserver {method} {path}: HTTP {status}: {str(out)[:2000]}")
        return out

    def _pod_path(self, ns, name, sub=""):
        return f"/api/v1/namespaces/{ns}/pods/{name}{sub}"

    def _status(self, ns, name, status):
        return self.kube("PATCH", self._pod_path(ns, name, "/status"), {"status": status},
                         content_type="application/merge-patch+json")

    def api(self, method, path, body=None, ok=(200, 201)):
        """NodeLab's control API, translated (see the header)."""
        parts = [p for p in path.split("/") if p]
        if parts == ["pods"] and method == "GET":
            return self.kube("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
        if parts == ["pods"] and method == "POST" and "items" not in body:
            ns = body["namespace"]
            obj = kapi.pod(ns, body["name"], body["node"], body.get("annotations"))
            made = self.kube("POST", f"/api/v1/namespaces/{ns}/pods", obj)
            st = {"phase": body.get("phase", "Running")}
            if body.get("podIPs"):
                st.update(podIP=body["podIPs"][0], podIPs=[{"ip": ip} for ip in body["podIPs"]])
            self._status(ns, body["name"], st)
            return {"object": made}
        if len(parts) == 3 and parts[0] == "pods":
            ns, name = parts[1], parts[2]
            if method == "DELETE":
                return self.kube("DELETE", self._pod_path(ns, name) + "?gracePeriodSeconds=0")
            if method == "PATCH":
                body = dict(body)
                out = None
                if "podIPs" in body:
                    ips = body.pop("podIPs")
                    out = self._status(ns, name, {"phase": "Running", "podIP": ips[0] if ips else None,
                                                  "podIPs": [{"ip": ip} for ip in ips]})
                if "annotations" in body:
                    out = self.kube("PATCH", self._pod_path(ns, name),
                                    {"metadata": {"annotations": body.pop("annotations")}},
                                    content_type="application/merge-patch+json")
                assert not body, f"kubelab: cannot translate PATCH keys {sorted(body)}"
                return out
        raise AssertionError(f"kubelab: no translation for {method} {path}")

    def restart(self, component):
        """hack/control-plane.sh restart COMPONENT (waits until it is ready again)."""
        self.plane.cp("restart", component, timeout=180)

    def cleanup(self):
        super().cleanup()
        if self.plane:
            self.plane.stop()
