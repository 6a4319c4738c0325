#!/usr/bin/python3
"""make-corpus.py — regenerate the seed corpora of test/fuzz/corpus/<target>/
from the real programs: the CNI chains of the integration lab (ptp with a
kindnet-style 0.3.1 conflist, bridge 1.0.0, every spec version, containerd's
runtimeConfig) give the plugin's stdin and the state files it writes, a
recording agent socket gives the plugin's protocol requests, the fake API
server (test/apiserver/fakeapi.py) gives real watch streams and PodLists.
Hand-written seeds (kubeconfigs of the unit tests, the ConfigMap's agent
config, quantities) are kept in SEEDS below. Root (network namespaces).

usage: make-corpus.py [BUILD [cni|kube|static]...]
  (default build/ and every group; seeds are (over)written in
  test/fuzz/corpus/<target>/, files of earlier runs are left)"""

import base64
import hashlib
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import cni  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")
FAKEAPI = os.path.join(REPO, "test", "apiserver", "fakeapi.py")
GENCERTS = os.path.join(REPO, "test", "apiserver", "gencerts.sh")

# containerd's runtimeConfig for a pod with annotations and bandwidth (what
# the CRI plugin passes with the two capabilities the plugin declares)
CONTAINERD_RC = {
    "io.kubernetes.cri.pod-annotations": {
        "ai.workload": "inference",
        "kubernetes.io/egress-bandwidth": "100M",
        "kubernetes.io/config.seen": "2024-05-01T10:00:00.000000000Z",
        "kubernetes.io/config.source": "api",
    },
    "bandwidth": {"ingressRate": 200000000, "ingressBurst": cni.BURST_CONTAINERD,
                  "egressRate": 100000000, "egressBurst": cni.BURST_CONTAINERD},
}


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, (dict, list)):
        data = json.dumps(data, separators=(",", ":"))
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def no_log(text):
    c = json.loads(text)
    c.pop("logFile", None)
    return c


def seed_cni(build):
    """Real chains in scratch netns: aiqos's stdin for each verb, its state files."""
    lab = cni.Lab(os.path.join(build, "bin", "aiqos"), "fz")
    agent = lab.fake_agent(annotations={"ai.workload": "training", "kubernetes.io/egress-bandwidth": "1G"})
    try:
        # kindnet's conflist: ptp + host-local at 0.3.1
        kn = lab.conflist("0.3.1", "ptp", name="kindnet")
        att = lab.attachment(conflist=kn, annotations=CONTAINERD_RC["io.kubernetes.cri.pod-annotations"])
        att.add()
        # (without logFile: the fuzz target runs whole verbs only on those)
        put("cni_stdin", "kindnet-0.3.1-add.json", no_log(att.aiqos_add_run.stdin))
        put("cni_stdin", "kindnet-0.3.1-del.json", no_log(att.delete(only_aiqos=True)[0].stdin))
        # bridge at 1.0.0 with containerd's runtimeConfig; CHECK and DEL too
        att = lab.attachment(version="1.0.0", base="bridge", annotations=CONTAINERD_RC[
            "io.kubernetes.cri.pod-annotations"], bandwidth=CONTAINERD_RC["bandwidth"])
        att.add()
        put("cni_stdin", "bridge-1.0.0-add.json", att.aiqos_add_run.stdin)
        put("cni_stdin", "bridge-1.0.0-check.json", att.check().stdin)
        # every version through ptp; annotations from the (recording) agent
        for v in cni.ALL_VERSIONS:
            att = lab.attachment(version=v)
            att.add()
            put("cni_stdin", f"ptp-{v}-add.json", att.aiqos_add_run.stdin)
        for i, path in enumerate(lab.state_jsons()):
            with open(path) as f:
                put("state", f"state-{i}.json", f.read())
        # an intent record, as ADD writes it before it touches the kernel
        with open(lab.state_jsons()[0]) as f:
            intent = json.load(f)
        intent.update(pending=True, failure="ADD did not finish: interrupted before it recorded what it applied")
        put("state", "state-pending.json", json.dumps(intent, indent=2))
        conf = json.loads(att.aiqos_add_run.stdin)
        # GC (1.1.0): valid attachments instead of prevResult
        gc = {k: v for k, v in conf.items() if k not in ("prevResult", "runtimeConfig")}
        gc["cni.dev/valid-attachments"] = [{"containerID": att.container_id, "ifname": "eth0"}]
        put("cni_stdin", "ptp-1.1.0-gc.json", gc)
        st = {k: v for k, v in conf.items() if k not in ("prevResult", "runtimeConfig")}
        st["agentRequired"] = True
        put("cni_stdin", "ptp-1.1.0-status.json", st)
        # the protocol lines the plugin sent
        seen = set()
        for req in agent.requests:
            if req.get("op") not in seen:
                seen.add(req.get("op"))
                put("proto", f"plugin-{req.get('op', 'raw')}.json", json.dumps(req, separators=(",", ":")) + "\n")
        # the annotations the runtime handed over
        put("annotations", "containerd.json", CONTAINERD_RC["io.kubernetes.cri.pod-annotations"])
        put("annotations", "containerd-bandwidth.json", CONTAINERD_RC["bandwidth"])
    finally:
        lab.cleanup()


def api_call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request(method, path, body=json.dumps(body).encode() if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def seed_kube():
    """Watch streams and PodLists from the fake API server on loopback."""
    pki = f"/tmp/aqt-pki-{os.getuid()}"
    subprocess.run(["bash", GENCERTS, pki], check=True, capture_output=True)
    tmp = tempfile.mkdtemp(prefix="aqt-fz-")
    ready = os.path.join(tmp, "ready.json")
    proc = subprocess.Popen(["/usr/bin/python3", FAKEAPI, "--certs", pki, "--token-file",
                             os.path.join(tmp, "token"), "--token", "t0", "--ready-file", ready, "--quiet",
                             "--bookmark-interval", "0"], stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(200):
            if os.path.exists(ready):
                break
            time.sleep(0.05)
        ports = json.load(open(ready))
        ctl = ports["control_port"]
        pods = [
            {"namespace": "ml", "name": "infer-0", "node": "n1", "annotations": {"ai.workload": "inference"},
             "podIPs": ["10.244.1.5", "fd00::5"], "phase": "Running"},
            {"namespace": "ml", "name": "train-0", "node": "n1",
             "annotations": {"ai.workload": "training", "ai.workload/profile": "training-dctcp",
                             "kubernetes.io/egress-bandwidth": "10G"}, "podIP": "10.244.1.6", "phase": "Pending"},
            {"namespace": "default", "name": "web", "node": "n1", "annotations": {}, "phase": "Running"},
        ]
        api_call(ctl, "POST", "/pods", {"items": pods})
        # a full pod: GPU requests/limits, host network, several containers
        api_call(ctl, "PUT", "/pods", {
            "metadata": {"namespace": "ml", "name": "gpu-0", "uid": "7d3c1e52-9a0b-4f7e-8c21-5b6a4d3e2f10",
                         "annotations": {"ai.workload": "training", "kubernetes.io/ingress-bandwidth": "25G"}},
            "spec": {"nodeName": "n1", "hostNetwork": False, "containers": [
                {"name": "trainer", "resources": {"requests": {"nvidia.com/gpu": "4", "cpu": "8"},
                                                  "limits": {"nvidia.com/gpu": "4"}}},
                {"name": "sidecar", "resources": {"limits": {"amd.com/gpu": "2000m"}}},
                {"name": "log", "resources": {}}]},
            "status": {"phase": "Running", "podIP": "10.244.1.9",
                       "podIPs": [{"ip": "10.244.1.9"}, {"ip": "fd00::9"}]}})
        api_call(ctl, "PATCH", "/pods/ml/infer-0", {"annotations": {"ai.workload": "training"}})
        api_call(ctl, "DELETE", "/pods/default/web?graceful=1")
        ctx = ssl.create_default_context(cafile=os.path.join(pki, "ca.crt"))
        ctx.check_hostname = False

        def get(path, raw=False):
            c = http.client.HTTPSConnection("127.0.0.1", ports["port"], context=ctx, timeout=10)
            c.request("GET", path, headers={"Authorization": "Bearer t0"})
            r = c.getresponse()
            data = r.read()
            c.close()
            return data

        sel = "fieldSelector=spec.nodeName%3Dn1"
        put("event", "podlist.json", get(f"/api/v1/pods?{sel}"))
        put("event", "podlist-page.json", get(f"/api/v1/pods?{sel}&limit=1"))
        stream = get(f"/api/v1/pods?watch=1&{sel}&resourceVersion=1&allowWatchBookmarks=true&timeoutSeconds=1")
        put("watch", "stream-replay.jsonl", b"\x00" * 9 + stream)
        for i, line in enumerate(stream.splitlines()):
            put("event", f"event-{i}.json", line)
        # faults: an in-stream 410, garbage and an oversized event
        api_call(ctl, "POST", "/faults", [{"type": "gone", "mode": "event", "after_events": 2},
                                          ])
        put("watch", "stream-410.jsonl", b"\x21" + b"\x17" * 8 + get(
            f"/api/v1/pods?watch=1&{sel}&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1"))
        api_call(ctl, "POST", "/faults", [{"type": "garbage", "after_events": 1},
                                          {"type": "oversized", "bytes": 300, "after_events": 2}])
        put("watch", "stream-garbage.jsonl", b"\x43" + b"\x5a" * 8 + get(
            f"/api/v1/pods?watch=1&{sel}&resourceVersion=0&timeoutSeconds=1"))
        api_call(ctl, "POST", "/compact", {})
        put("event", "expired.json", get(f"/api/v1/pods?watch=1&{sel}&resourceVersion=1&timeoutSeconds=1"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


PEM = ("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUb3Jn\n-----END CERTIFICATE-----\n")


def kubeconfig(cluster_body, user_body):
    """The unit tests' kubeconfig shape (test_agent_kubeconfig.c)."""
    return ("apiVersion: v1\nkind: Config\ncurrent-context: ctx\npreferences: {}\ncontexts:\n"
            "- name: other\n  context: {cluster: c2, user: u2}\n- name: ctx\n  context:\n    cluster: c1\n"
            "    user: u1\n    namespace: team-a\nclusters:\n- name: c2\n  cluster: {server: 'https://other:443'}\n"
            f"- name: c1\n  cluster:\n{cluster_body}users:\n- name: u1\n  user:\n{user_body}")


def seed_static():
    b64 = base64.b64encode(PEM.encode()).decode()
    kcs = {
        "token-ca.yaml": kubeconfig("    server: https://api.example.com:6443/\n    certificate-authority: ca.crt\n"
                                    "    tls-server-name: kubernetes.default\n", "    token: abc.def\n"),
        "kind.yaml": kubeconfig(f"    certificate-authority-data: {b64}\n    server: https://127.0.0.1:36443\n",
                                f"    client-certificate-data: {b64}\n    client-key-data: \"{b64[:20]}\\n{b64[20:]}\"\n"),
        "files.yaml": kubeconfig("    server: https://[fd00::1]:6443\n", "    client-certificate: client.crt\n"
                                 "    client-key: client.key\n    tokenFile: token\n"),
        "fuzz-context.yaml": kubeconfig("    server: https://a:1\n    certificate-authority: ca.crt\n",
                                        "    token: t\n").replace("name: other", "name: fuzz"),
        "agentlab.yaml": ("apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n"
                          "    server: https://127.0.0.1:41234\n    certificate-authority: ca.crt\n"
                          "users:\n- name: agent\n  user:\n    tokenFile: token\n"
                          "contexts:\n- name: lab\n  context: {cluster: lab, user: agent}\ncurrent-context: lab\n"),
        "anchors.yaml": ("current-context: &c ctx\ncontexts:\n- name: *c\n  context: &ctx {cluster: c1, user: u1}\n"
                         "clusters:\n- name: c1\n  cluster: {server: \"https://h\", insecure-skip-tls-verify: true}\n"
                         "users:\n- name: u1\n  user: {token: x}\n"),
    }
    for name, text in kcs.items():
        put("kubeconfig", name, text)

    cm = open(os.path.join(REPO, "manifests", "configmap.yaml")).read()
    body = cm.split("config.json: |", 1)[1]
    put("agent_config", "configmap.json", "\n".join(line[4:] for line in body.splitlines()).strip() + "\n")
    put("agent_config", "full.json", {
        "uplink": "eth0", "uplinkRate": "10gbit", "inferenceShare": 0.5, "mixedHoldSeconds": 10,
        "debounceMs": 50, "classify": "dscp", "driftRepairSeconds": 0,
        "profiles": {"inference": {"targetUs": 500, "dscp": 46},
                     "inference-strict": {"class": "inference", "targetUs": 300}}})
    put("agent_config", "empty.json", "{}")
    put("agent_config", "downlink.json", {
        "uplink": "eth0", "uplinkRate": "500mbit", "downlinkRate": "400mbit", "downlink": True,
        "trainingFloor": 0.2, "inferenceShare": 0.3})

    profiles = {
        "readme.json": {"inference-strict": {"class": "inference", "targetUs": 500}},
        "override.json": {"inference": {"targetUs": 500, "intervalUs": 50000, "limitPkts": 1000},
                          "training": {"congestionControl": ["dctcp", "cubic"], "tcpEcn": 1, "notsentLowat": 16384,
                                       "rmemMax": 6291456, "wmemMax": 4194304, "queueMs": 5}},
        "lab.json": {"training-dctcp": {"ceThresholdUs": 200}, "default": {"podQdisc": False}},
    }
    for name, obj in profiles.items():
        put("profiles", name, obj)

    for i, q in enumerate(["10M", "1G", "500Mi", "1e9", "100k", "1.5G", "1000000", "2Ti", "inference",
                           "training", "training-dctcp", "100mbit"]):
        put("annotations", f"value-{i}.txt", q)
    put("annotations", "all.json", {"ai.workload": "training", "ai.workload/profile": "training-dctcp",
                                    "kubernetes.io/ingress-bandwidth": "1G",
                                    "kubernetes.io/egress-bandwidth": "500Mi"})
    for name, req in {
        "status.json": {"op": "status"},
        "explain.json": {"op": "explain", "namespace": "ml", "name": "infer-0"},
        "pod.json": {"op": "pod", "namespace": "ml", "name": "infer-0", "uid": "0b7f5a5e-1d2c-4f6e-9a8b-7c6d5e4f3a2b"},
    }.items():
        put("proto", name, json.dumps(req, separators=(",", ":")) + "\n")


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build"))
    groups = sys.argv[2:] or ["cni", "kube", "static"]
    if os.geteuid() != 0:
        sys.exit("make-corpus.py: needs root (network namespaces)")
    for t in ("cni_stdin", "state", "proto", "annotations", "event", "watch", "kubeconfig", "agent_config",
              "profiles"):
        os.makedirs(os.path.join(CORPUS, t), exist_ok=True)
    if "cni" in groups:
        seed_cni(build)
    if "kube" in groups:
        seed_kube()
    if "static" in groups:
        seed_static()
    n = sum(len(files) for _, _, files in os.walk(CORPUS))
    print(f"make-corpus: {n} seeds in {CORPUS}")


if __name__ == "__main__":
    main()
