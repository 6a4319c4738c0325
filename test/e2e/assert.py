#!/usr/bin/env python3
"""test/e2e/assert.py — the assertions of the aiqos end-to-end test, shared by
both drivers: hack/kind-e2e.sh (a kind cluster, through `docker exec` on the
kind node) and the kind-less node e2e (a real kubelet + containerd on this
machine, `--node-exec ''`). What CI proves is what users run.

It installs aiqos with the unmodified manifests/ (an overlay changes only the
image reference and pull policy) or, with --helm, `helm install` of the chart
(image, pull policy and the uninstall hooks' kubectl image set), then checks,
independently of aiqos's own
reports where it can (files on the node, `nsenter` + `tc`/`/proc/sys`):
  - the DaemonSet becomes Ready; `aiqos` is in the CNI bin dir and chained
    exactly once into an owned copy of the primary conflist that sorts first;
  - a primary-CNI rewrite by atomic rename (as kindnetd does) is followed;
    a deleted owned copy is put back;
  - annotated inference and training pods start and their netns show the
    tuning (sysctls always; qdiscs as aiqos reports them applied, or the full
    set with --expect-qdiscs full); Tuned/TuneDegraded Events exist; the
    agent reports mode "mixed" in `aiqosctl status --json`, /metrics (on the
    pod IP) and `kubectl aiqos status`; `kubectl aiqos doctor` runs;
  - optional traffic check between the two pods, and with --peer-node
    between nodes: a third pod (the example image's HTTP server) on that
    node reached from the training pod, and the inference pod reached from it;
  - an annotation change re-tunes the pod; deleting the inference pod takes
    the node to "training" after the hold time, deleting the last pod to
    "idle" with the uplink's original root qdisc back;
  - uninstall: with the example pods back and the uplink shaped, the agent
    DaemonSet is deleted (the tuning stays in place), manifests/uninstall is
    applied: the chain entry is gone, the conf dir is as it was, the uplink's
    original root qdisc is back; the pods are then deleted with the config
    cached at their creation (which names aiqos).
    With --helm it is `helm uninstall` (the chart's pre-delete hooks) instead,
    and the node is checked: no chain entry, conf dir as before, no aiqos ifb,
    the uplink's root qdisc as before install, no state record left, no
    object of the release left; the plugin binary kept (uninstall.removeBinary
    auto) exactly while libcni's cache holds configs naming aiqos (the example
    pods'), which still reach each other and are deleted cleanly; then a
    second `helm install` + `helm uninstall` with no such pod left removes
    the binary too.
It ends with "N passed, N failed" and exits 1 on any failure; it removes what
it created (namespaces, overlays, the primary's test edit) even when failing.
Python 3.8+, standard library only.
"""
import argparse
import base64
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

NS_SYSTEM = "aiqos-system"
NS_TEST = "aiqos-e2e"
DS = "aiqos-agent"
DS_UNINSTALL = "aiqos-uninstall"
OWNED_PREFIX = "00-aiqos-"
MARKER_OWNED = "aiqos.dev/owned"
MARKER_SOURCE = "aiqos.dev/source"
POD_INF = "aiqos-example-inference"
POD_TRN = "aiqos-example-training"
POD_PEER = "aiqos-example-peer"
CONF_EXTS = (".conflist", ".conf", ".json")
QDISC_KINDS = ("fq_codel", "fq", "htb", "tbf", "bfifo", "pfifo", "prio", "ets", "cake", "red", "clsact",
               "ingress", "mq", "noqueue", "pfifo_fast", "sfq", "codel")
NOTSENT_LOWAT_INFERENCE = 16384
RELEASE = "aiqos"
CNI_CACHE_RESULTS = "/var/lib/cni/results"  # libcni's cache of each pod's config
AIQOS_IFBS = ("aiqos-ifb0", "aiqos-ifb1")  # shared/plan.h
# the records aiqos-agent uninstall restores from and removes (agent/node/*.h)
STATE_RECORDS = ("uplink.json", "downlink.json", "shaper.json")


class CheckFailed(Exception):
    pass


class Abort(Exception):
    """A failure after which the remaining steps cannot run."""


def log(msg):
    print(msg, flush=True)


class Env:
    def __init__(self, args):
        self.args = args
        self.kubectl = shlex.split(args.kubectl)
        self.node_exec_prefix = shlex.split(args.node_exec)
        self.work = tempfile.mkdtemp(prefix="aiqos-e2e-")
        self.primary = None          # file name
        self.primary_text = None     # original content
        self.primary_edited = False
        self.conf_names_before = None
        self.uplink = None
        self.uplink_root_before = None
        self.installed = False
        self.helm_installed = False
        self.created_ns = False
        self.agent_pod = None
        self.pod_ns = {}             # pod name -> netns path on the node

    # ---- running things ----

    def run(self, argv, input_text=None, check=True, timeout=120):
        try:
            p = subprocess.run(argv, input=input_text, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CheckFailed("timed out after %ss: %s" % (timeout, " ".join(argv)))
        except FileNotFoundError:
            raise CheckFailed("not found: %s" % argv[0])
        if check and p.returncode != 0:
            raise CheckFailed("%s: exit %d: %s" % (" ".join(argv), p.returncode,
                                                   (p.stderr or p.stdout).strip()[-800:]))
        return p

    def k(self, *a, **kw):
        return self.run(self.kubectl + list(a), **kw)

    def kjson(self, *a):
        return json.loads(self.k(*(list(a) + ["-o", "json"])).stdout)

    def node(self, argv, **kw):
        """Run argv on the node (docker exec -i NODE ..., or locally)."""
        return self.run(self.node_exec_prefix + list(argv), **kw)

    def node_read(self, path):
        return self.node(["cat", path]).stdout

    def node_write_atomic(self, path, text):
        """Replace path by rename of a temp file in the same dir, as kindnetd does."""
        tmp = path + ".aiqos-e2e.tmp"
        self.node(["sh", "-c", 'cat > "$0" && mv -f "$0" "$1"', tmp, path], input_text=text)

    def netns_exec(self, ns, argv, **kw):
        return self.node(["nsenter", "--net=" + ns] + list(argv), **kw)

    def sysctl(self, ns, key):
        return self.netns_exec(ns, ["cat", "/proc/sys/" + key.replace(".", "/")]).stdout.strip()


def wait_for(desc, fn, timeout, interval=1.0):
    """Call fn until it returns a truthy value; CheckFailed with the last
    observation (fn may return (False, why)) after timeout seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if isinstance(v, tuple):
                ok, last = v
                if ok:
                    return last
            elif v:
                return v
        except CheckFailed as e:
            last = str(e)
        if time.monotonic() >= deadline:
            raise CheckFailed("%s: not within %ss (last: %s)" % (desc, timeout, last))
        time.sleep(interval)


# ---- the node's CNI config, read the way agent/install/chain.c and libcni do ----

def conf_listing(env):
    out = env.node(["ls", "-1A", env.args.cni_conf_dir]).stdout
    return sorted(n for n in out.split() if n.endswith(CONF_EXTS) and not n.startswith("."))


def conf_load(env, name):
    text = env.node_read(os.path.join(env.args.cni_conf_dir, name))
    try:
        return json.loads(text), text
    except ValueError as e:
        raise CheckFailed("%s/%s: invalid JSON: %s" % (env.args.cni_conf_dir, name, e))


def is_owned(name, j):
    return name.startswith(OWNED_PREFIX) or (isinstance(j, dict) and j.get(MARKER_OWNED) is True)


def find_primary(env):
    for name in conf_listing(env):
        if name.startswith(OWNED_PREFIX):
            continue
        j, text = conf_load(env, name)
        if is_owned(name, j):
            continue
        return name, j, text
    return None, None, None


def plugin_types(j):
    if "plugins" in j:
        return [p.get("type") for p in j["plugins"]]
    return [j.get("type")]


def owned_name(primary):
    for ext in CONF_EXTS:
        if primary.endswith(ext):
            return OWNED_PREFIX + primary[: -len(ext)] + ".conflist"
    return OWNED_PREFIX + primary + ".conflist"


def check_chained(env, extra_key=None):
    """(ok, why): the first config file is our owned copy of the primary with
    aiqos appended exactly once."""
    names = conf_listing(env)
    want = owned_name(env.primary)
    if not names or names[0] != want:
        return False, "first config file is %r, want %r (files: %s)" % (names[0] if names else None, want, names)
    j, _ = conf_load(env, want)
    pj, _ = conf_load(env, env.primary)
    if j.get(MARKER_OWNED) is not True or j.get(MARKER_SOURCE) != env.primary:
        return False, "%s lacks the markers: %s" % (want, {k: j.get(k) for k in (MARKER_OWNED, MARKER_SOURCE)})
    if j.get("name") != pj.get("name") or j.get("cniVersion") != pj.get("cniVersion"):
        return False, "%s: name/cniVersion %s/%s differ from the primary's %s/%s" % (
            want, j.get("name"), j.get("cniVersion"), pj.get("name"), pj.get("cniVersion"))
    want_types = [t for t in plugin_types(pj) if t != "aiqos"] + ["aiqos"]
    if plugin_types(j) != want_types:
        return False, "%s: plugins %s, want %s" % (want, plugin_types(j), want_types)
    if extra_key is not None and j.get(extra_key[0]) != extra_key[1]:
        return False, "%s: %s is %r, want %r (not regenerated)" % (want, extra_key[0], j.get(extra_key[0]),
                                                                  extra_key[1])
    others = [n for n in names if n != want and n.startswith(OWNED_PREFIX)]
    if others:
        return False, "other owned files: %s" % others
    return True, "%s chains %s" % (want, ",".join(want_types))


# ---- kernel state ----

def uplink_dev(env):
    if env.args.uplink:
        return env.args.uplink
    out = env.node(["ip", "-o", "route", "show", "default"]).stdout
    m = re.search(r"\bdev (\S+)", out)
    if not m:
        raise CheckFailed("no default route on the node: %r" % out)
    return m.group(1)


def qdiscs(env, dev, ns=None):
    argv = ["tc", "-j", "qdisc", "show", "dev", dev]
    out = (env.netns_exec(ns, argv) if ns else env.node(argv)).stdout
    return json.loads(out or "[]")


def root_kind(qs):
    """The root qdisc as "kind handle" (aiqos's mq 1: is not the NIC's mq 8001:)."""
    for q in qs:
        if q.get("root"):
            return "%s %s" % (q.get("kind"), q.get("handle", ""))
    return None


def pod_netns(env, ip):
    """The netns file under /run/netns whose interfaces carry ip."""
    script = ('for n in /run/netns/* /var/run/netns/*; do [ -e "$n" ] || continue; '
              'if nsenter --net="$n" ip -o addr show 2>/dev/null | grep -q " $0/"; then echo "$n"; fi; done')
    found = sorted(set(env.node(["sh", "-c", script, ip]).stdout.split()))
    # /var/run is usually /run: the same file twice
    real = {}
    for n in found:
        real[env.node(["readlink", "-f", n]).stdout.strip()] = n
    if len(real) != 1:
        raise CheckFailed("pod IP %s: %d netns found (%s)" % (ip, len(real), found))
    return list(real.values())[0]


def host_peer(env, ns):
    """Host-side interface name of the pod's eth0 (veth peer)."""
    out = env.netns_exec(ns, ["ip", "-o", "link", "show", "eth0"]).stdout
    m = re.search(r"eth0@if(\d+)", out)
    if not m:
        raise CheckFailed("pod eth0 is not a veth with a peer: %r" % out)
    idx = m.group(1)
    for line in env.node(["ip", "-o", "link", "show"]).stdout.splitlines():
        f = line.split(":")
        if f[0].strip() == idx:
            return f[1].strip().split("@")[0]
    raise CheckFailed("no host interface with index %s" % idx)


# ---- the agent ----

def agent_pod(env):
    j = env.kjson("-n", NS_SYSTEM, "get", "pods", "-l", "app.kubernetes.io/component=agent",
                  "--field-selector", "spec.nodeName=" + env.args.node)
    pods = [p for p in j["items"] if p["metadata"].get("deletionTimestamp") is None]
    if len(pods) != 1:
        raise CheckFailed("%d agent pods on node %s" % (len(pods), env.args.node))
    return pods[0]["metadata"]["name"]


def status(env):
    out = env.k("-n", NS_SYSTEM, "exec", env.agent_pod, "-c", "agent", "--",
                "/usr/local/bin/aiqosctl", "status", "--json").stdout
    try:
        return json.loads(out)
    except ValueError:
        raise CheckFailed("aiqosctl status --json printed no JSON: %r" % out[:300])


def status_pod(st, name):
    for p in st.get("pods", []):
        if p.get("namespace") == NS_TEST and p.get("name") == name:
            return p
    return None


def wait_mode(env, mode, timeout):
    def probe():
        st = status(env)
        return st.get("mode") == mode, "mode %r" % st.get("mode")
    return wait_for("node mode %s" % mode, probe, timeout, interval=2)


def metrics(env):
    # The agent listens on its pod IP (the node's address, host network), as
    # a PodMonitor scrapes it.
    ip = env.kjson("-n", NS_SYSTEM, "get", "pod", env.agent_pod)["status"]["podIP"]
    url = "http://%s:%d/metrics" % ("[%s]" % ip if ":" in ip else ip, env.args.metrics_port)
    return env.node(["sh", "-c", 'curl -sf "$0" || wget -qO- "$0"', url]).stdout


# ---- overlays (only the image reference and pull policy change) ----

def write_overlay(env, name, base, images, pull_policy=None, ds=None, extra=None):
    d = os.path.join(env.work, name)
    os.makedirs(d, exist_ok=True)
    lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:",
             "  - " + os.path.relpath(base, d), "images:"]
    for img_name, ref in images:
        new_name, tag = split_ref(ref)
        lines += ["  - name: " + img_name, "    newName: " + new_name, '    newTag: "%s"' % tag]
    patches = []
    if pull_policy and ds:
        ops = []
        for kind in ("initContainers", "containers"):
            ops.append({"op": "add", "path": "/spec/template/spec/%s/0/imagePullPolicy" % kind,
                        "value": pull_policy})
        patches.append(({"kind": "DaemonSet", "name": ds}, ops))
    for target, ops in (extra or []):
        patches.append((target, ops))
    if patches:
        lines.append("patches:")
        for target, ops in patches:
            lines.append("  - target: " + json.dumps(target))
            lines.append("    patch: " + json.dumps(json.dumps(ops)))
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return d


def example_image_name(repo):
    """The image name manifests/examples/ ends up with (its own images: entry
    already renamed "aiqos-example"): what an overlay has to rename."""
    with open(os.path.join(repo, "manifests", "examples", "kustomization.yaml")) as f:
        m = re.search(r"^\s*newName:\s*(\S+)", f.read(), re.M)
    return m.group(1) if m else "aiqos-example"


def split_ref(ref):
    slash = ref.rfind("/")
    colon = ref.rfind(":")
    if colon > slash:
        return ref[:colon], ref[colon + 1:]
    return ref, "latest"


# ---- the steps ----

class Runner:
    def __init__(self, env):
        self.env = env
        self.passed = 0
        self.failed = 0
        self.aborted_by = None

    def step(self, name, fn, critical=False):
        if self.aborted_by:
            log("FAIL %s: not run (after: %s)" % (name, self.aborted_by))
            self.failed += 1
            return None
        t0 = time.monotonic()
        try:
            detail = fn()
        except (CheckFailed, Abort) as e:
            log("FAIL %s (%.1fs): %s" % (name, time.monotonic() - t0, e))
            self.failed += 1
            if critical:
                self.aborted_by = name
            return None
        log("ok   %s (%.1fs)%s" % (name, time.monotonic() - t0, ": " + str(detail) if detail else ""))
        self.passed += 1
        return detail


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--kubectl", default="kubectl", help="kubectl command (with --context/--kubeconfig)")
    ap.add_argument("--node", required=True, help="the Kubernetes node under test")
    ap.add_argument("--node-exec", default="", help="prefix running a command on that node's host "
                    "(e.g. 'docker exec -i aiqos-worker'; '' = here)")
    ap.add_argument("--image", required=True, help="the aiqos image reference the node has (e.g. aiqos:e2e)")
    ap.add_argument("--pull-policy", default=None, choices=("Never", "IfNotPresent", "Always"))
    ap.add_argument("--example-image", default=None, help="image for the example pods (default: agnhost, as "
                    "in manifests/examples); must provide agnhost's netexec and pause")
    ap.add_argument("--cni-conf-dir", default="/etc/cni/net.d")
    ap.add_argument("--cni-bin-dir", default="/opt/cni/bin")
    ap.add_argument("--state-dir", default="/var/lib/aiqos", help="the agent's state dir on the node")
    ap.add_argument("--uplink", default=None, help="uplink device (default: default-route device)")
    ap.add_argument("--metrics-port", type=int, default=9464)
    ap.add_argument("--helm", default=None, help="install and uninstall with this helm (manifests/helm/aiqos) "
                    "instead of kustomize")
    ap.add_argument("--kubeconfig", default=None, help="with --helm: the cluster's kubeconfig (default: helm's)")
    ap.add_argument("--kubectl-image", default=None, help="with --helm: uninstall.kubectlImage, the image of the "
                    "chart's uninstall hook Jobs (default: the chart's)")
    ap.add_argument("--hold-seconds", type=int, default=30, help="mixedHoldSeconds of the config")
    ap.add_argument("--timeout", type=int, default=180, help="timeout of each wait")
    ap.add_argument("--expect-qdiscs", default="auto", choices=("auto", "full"),
                    help="auto: the qdiscs aiqos reports as applied are in the kernel; full: also require "
                    "fq_codel (inference) and htb + fq (training), as on a stock kernel")
    ap.add_argument("--traffic", action="store_true", help="TCP check from the training to the inference pod")
    ap.add_argument("--peer-node", default=None, help="with --traffic: also a pod on this (other) node, "
                    "and traffic both ways between it and the pods under test (pod-to-pod across nodes)")
    ap.add_argument("--keep", action="store_true", help="leave everything installed at the end")
    args = ap.parse_args()
    args.repo = os.path.abspath(args.repo)
    env = Env(args)
    r = Runner(env)
    try:
        run_steps(env, r)
    finally:
        if not args.keep:
            try:
                cleanup(env)
            except CheckFailed as e:
                # e.g. a namespace that cannot go because the pods' CNI DEL
                # fails: counted, and the result line is still printed.
                log("FAIL cleanup: %s" % e)
                r.failed += 1
        shutil.rmtree(env.work, ignore_errors=True)
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 0 if r.failed == 0 else 1


def run_steps(env, r):
    a = env.args
    T = a.timeout
    hold = a.hold_seconds

    # -- before install --
    def preflight():
        j = env.kjson("get", "node", a.node)
        ready = [c for c in j["status"]["conditions"] if c["type"] == "Ready"]
        if not ready or ready[0]["status"] != "True":
            raise Abort("node %s is not Ready" % a.node)
        env.node(["true"])
        for tool in ("nsenter", "ip", "tc"):
            env.node(["sh", "-c", 'command -v "$0" >/dev/null', tool])
        names = conf_listing(env)
        for n in names:
            j, _ = conf_load(env, n)
            if is_owned(n, j):
                raise Abort("%s/%s exists before install: not a clean node" % (a.cni_conf_dir, n))
        env.primary, pj, env.primary_text = find_primary(env)
        if not env.primary:
            raise Abort("no primary CNI config in %s" % a.cni_conf_dir)
        if "aiqos" in plugin_types(pj):
            raise Abort("primary %s already lists aiqos" % env.primary)
        env.conf_names_before = names
        env.uplink = uplink_dev(env)
        env.uplink_root_before = root_kind(qdiscs(env, env.uplink))
        return "primary %s (%s), uplink %s root %s" % (env.primary, ",".join(plugin_types(pj)), env.uplink,
                                                     env.uplink_root_before)
    r.step("preflight", preflight, critical=True)

    def install():
        if a.helm:
            # The chart (its defaults are the kustomize manifests; test/helm
            # checks that), installed as a release: `helm uninstall` runs its
            # pre-delete hooks at the end.
            helm_install(env)
        else:
            d = write_overlay(env, "install", os.path.join(a.repo, "manifests"), [("aiqos", a.image)],
                              pull_policy=a.pull_policy, ds=DS)
            env.k("apply", "-k", d)
        env.installed = True
        env.k("-n", NS_SYSTEM, "rollout", "status", "daemonset/" + DS, "--timeout=%ds" % T, timeout=T + 30)
        env.agent_pod = wait_for("agent pod on %s" % a.node, lambda: agent_pod(env), 30)
        return "pod %s Ready" % env.agent_pod
    r.step("daemonset ready", install, critical=True)

    def plugin_installed():
        env.node(["test", "-x", os.path.join(a.cni_bin_dir, "aiqos")])
        return os.path.join(a.cni_bin_dir, "aiqos")
    r.step("plugin in CNI bin dir", plugin_installed)

    r.step("chained exactly once", lambda: wait_for("chained", lambda: check_chained(env), 30), critical=True)

    def rewrite():
        pj = json.loads(env.primary_text)
        nonce = "rewrite-%d" % time.time()
        pj["aiqosE2eRewrite"] = nonce  # ignored by libcni; shows up in the copy once regenerated
        env.primary_edited = True
        env.node_write_atomic(os.path.join(a.cni_conf_dir, env.primary), json.dumps(pj, indent=2) + "\n")
        got = wait_for("re-chained after rewrite", lambda: check_chained(env, ("aiqosE2eRewrite", nonce)), 30)
        env.node_write_atomic(os.path.join(a.cni_conf_dir, env.primary), env.primary_text)
        env.primary_edited = False
        wait_for("re-chained after restore", lambda: check_chained(env, ("aiqosE2eRewrite", None)), 30)
        return got
    r.step("primary rewritten by atomic rename: chained again", rewrite)

    def copy_deleted():
        env.node(["rm", "-f", os.path.join(a.cni_conf_dir, owned_name(env.primary))])
        return wait_for("owned copy recreated", lambda: check_chained(env), 30)
    r.step("owned copy deleted: put back", copy_deleted)

    # -- pods --
    def pods_up():
        if env.k("create", "namespace", NS_TEST, check=False).returncode == 0:
            env.created_ns = True
        images = [(example_image_name(a.repo), a.example_image)] if a.example_image else []
        pin = [({"kind": "Pod"}, [{"op": "add", "path": "/spec/nodeSelector",
                                  "value": {"kubernetes.io/hostname": a.node}}])]
        d = write_overlay(env, "examples", os.path.join(a.repo, "manifests", "examples"), images, extra=pin)
        with open(os.path.join(d, "kustomization.yaml"), "a") as f:
            f.write("namespace: %s\n" % NS_TEST)
        env.k("apply", "-k", d)
        env.k("-n", NS_TEST, "wait", "--for=condition=Ready", "pod/" + POD_INF, "pod/" + POD_TRN,
              "--timeout=%ds" % T, timeout=T + 30)
        for p in (POD_INF, POD_TRN):
            ip = env.kjson("-n", NS_TEST, "get", "pod", p)["status"]["podIP"]
            env.pod_ns[p] = pod_netns(env, ip)
        return ", ".join("%s in %s" % kv for kv in env.pod_ns.items())
    r.step("annotated pods running", pods_up, critical=True)

    def sysctls_common():
        seen = []
        for p, ns in env.pod_ns.items():
            ecn = env.sysctl(ns, "net.ipv4.tcp_ecn")
            cc = env.sysctl(ns, "net.ipv4.tcp_congestion_control")
            if ecn != "1":
                raise CheckFailed("%s: tcp_ecn %s, want 1" % (p, ecn))
            if cc not in ("bbr", "cubic"):
                raise CheckFailed("%s: congestion control %s, want bbr or cubic" % (p, cc))
            seen.append("%s ecn=1 cc=%s" % (p, cc))
        return "; ".join(seen)
    r.step("pod sysctls: ECN and congestion control", sysctls_common)

    def sysctls_inference():
        v = env.sysctl(env.pod_ns[POD_INF], "net.ipv4.tcp_notsent_lowat")
        if int(v) != NOTSENT_LOWAT_INFERENCE:
            raise CheckFailed("tcp_notsent_lowat %s, want %d" % (v, NOTSENT_LOWAT_INFERENCE))
        return "tcp_notsent_lowat=%s" % v
    r.step("inference pod: short not-sent backlog", sysctls_inference)

    def sysctls_training():
        out = []
        # the buffers stay the kernel's (the training profile raises none)
        for key in ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"):
            v = env.sysctl(env.pod_ns[POD_TRN], key).split()
            with open("/proc/sys/" + key.replace(".", "/")) as f:
                want = f.read().split()
            if v[-1] != want[-1]:
                raise CheckFailed("%s %s, want the kernel's max %s" % (key, v, want[-1]))
            out.append("%s max=%s" % (key, v[-1]))
        return ", ".join(out)
    r.step("training pod: the kernel's TCP buffers", sysctls_training)

    def qdisc_check():
        st = wait_for("both pods in aiqosctl status", lambda: _status_both(env), T, interval=2)
        details = []
        for p in (POD_INF, POD_TRN):
            sp = status_pod(st, p)
            if sp.get("status") not in ("tuned", "degraded"):
                raise CheckFailed("%s: status %r (%s)" % (p, sp.get("status"), sp))
            ns = env.pod_ns[p]
            pod_kinds = {q.get("kind") for q in qdiscs(env, "eth0", ns)}
            host = host_peer(env, ns)
            host_kinds = {q.get("kind") for q in qdiscs(env, host)}
            verified = 0
            for att in sp.get("attachments", []):
                for line in att.get("effective", []):
                    on_host, words = effective_qdisc(line, att.get("hostIfname"))
                    kinds = [w for w in words if w in QDISC_KINDS]
                    if words[:1] != ["qdisc"] or not kinds:
                        continue
                    have = host_kinds if on_host else pod_kinds
                    if kinds[0] not in have:
                        raise CheckFailed("%s: aiqos reports %r but %s has qdiscs %s" % (
                            p, line, host if on_host else "pod eth0", sorted(have)))
                    verified += 1
            if verified == 0:
                raise CheckFailed("%s: aiqos reports no qdisc it applied (effective: %s)" % (
                    p, [line for att in sp.get("attachments", []) for line in att.get("effective", [])]))
            if a.expect_qdiscs == "full":
                want = {"fq_codel"} if p == POD_INF else {"htb", "fq"}
                if not want <= pod_kinds:
                    raise CheckFailed("%s: pod eth0 qdiscs %s, want %s" % (p, sorted(pod_kinds), sorted(want)))
                if p == POD_TRN and "htb" not in host_kinds:
                    raise CheckFailed("%s: host side %s qdiscs %s, want htb (ingress limit)" % (
                        p, host, sorted(host_kinds)))
            details.append("%s %s, %d reported qdiscs found, pod=%s host %s=%s" % (
                p, sp.get("status"), verified, sorted(pod_kinds), host, sorted(host_kinds)))
        return "; ".join(details)
    r.step("pod qdiscs as aiqos reports them", qdisc_check)

    def events():
        def probe():
            got = {}
            for p in (POD_INF, POD_TRN):
                j = env.kjson("-n", NS_TEST, "get", "events", "--field-selector",
                              "involvedObject.kind=Pod,involvedObject.name=" + p)
                got[p] = sorted({e.get("reason") for e in j["items"] if e.get("reason") in
                                 ("Tuned", "TuneDegraded")})
            return all(got.values()), got
        return wait_for("Tuned/TuneDegraded events", probe, T, interval=2)
    r.step("Tuned events on the pods", events)

    r.step("agent reports mode mixed", lambda: wait_mode(env, "mixed", T))

    def kubectl_aiqos(*args):
        plugin = os.path.join(a.repo, "agent", "kubectl-aiqos")
        e = dict(os.environ, KUBECTL=a.kubectl)
        return subprocess.run([sys.executable, plugin] + list(args), capture_output=True, text=True, env=e,
                              timeout=120)

    def cluster_status():
        p = kubectl_aiqos("status", "--json")
        try:
            nodes = json.loads(p.stdout)["nodes"]
        except (ValueError, KeyError):
            raise CheckFailed("kubectl aiqos status --json: exit %d, %r %r" % (p.returncode, p.stdout[:300],
                                                                              p.stderr[:300]))
        mine = [n for n in nodes if n.get("node") == a.node]
        if len(mine) != 1 or "error" in mine[0]:
            raise CheckFailed("node %s in kubectl aiqos status: %s" % (a.node, mine or nodes))
        n = mine[0]
        if n["mode"] != "mixed" or n["pods"].get("inference", 0) < 1 or n["pods"].get("training", 0) < 1:
            raise CheckFailed("kubectl aiqos status: mode %s, pods %s, want mixed with both classes" % (
                n["mode"], n["pods"]))
        if not n["apiConnected"] or n["failed"]:
            raise CheckFailed("kubectl aiqos status: api %s, failed %s" % (n["apiConnected"], n["failed"]))
        if p.returncode != 0:
            raise CheckFailed("kubectl aiqos status: exit %d" % p.returncode)
        text = kubectl_aiqos("status")
        if text.returncode != 0 or a.node not in text.stdout or "mixed" not in text.stdout:
            raise CheckFailed("kubectl aiqos status (table): exit %d: %s" % (text.returncode, text.stdout[:300]))
        return "%s mixed, pods %s, shaped %s, %d degraded" % (a.node, n["pods"], n["uplink"]["shapedBps"],
                                                               len(n["degraded"]))
    r.step("kubectl aiqos status: every node's mode and pods", cluster_status)

    def cluster_doctor():
        p = kubectl_aiqos("doctor", "--json")
        try:
            j = json.loads(p.stdout)
        except ValueError:
            raise CheckFailed("kubectl aiqos doctor --json: exit %d, %r %r" % (p.returncode, p.stdout[:300],
                                                                              p.stderr[:300]))
        n = [x for x in j["nodes"] if x["node"] == a.node][0]
        texts = [f["text"] for f in n["findings"]]
        # aiqosctl doctor: 0 ok, 3 warnings only (this kernel lacks modules), 1 errors
        if p.returncode != j["exitCode"] or j["exitCode"] not in (0, 3):
            raise CheckFailed("doctor exit %d (json %s): %s" % (p.returncode, j["exitCode"], n))
        if not any("aiqos chained in " + OWNED_PREFIX in t for t in texts):
            raise CheckFailed("doctor does not see aiqos chained: %s" % texts)
        if not any(f["section"].startswith("profile ") and f["level"] in ("ok", "info") and
                   "applies:" in f["text"] for f in n["findings"]):
            raise CheckFailed("doctor probed no profile in the agent container: %s" % texts)
        return "exit %d, %d findings" % (j["exitCode"], len(texts))
    r.step("kubectl aiqos doctor: the preflight in the agent container", cluster_doctor)

    def metrics_mode():
        def probe():
            m = metrics(env)
            ok = re.search(r'^aiqos_node_mode\{[^}]*mode="mixed"[^}]*\} 1(\.0+)?$', m, re.M) is not None
            return ok, [l for l in m.splitlines() if l.startswith("aiqos_node_mode")]
        return wait_for("aiqos_node_mode mixed = 1", probe, 30, interval=2)
    r.step("metrics: aiqos_node_mode mixed", metrics_mode)

    if a.traffic:
        def traffic():
            ip = env.kjson("-n", NS_TEST, "get", "pod", POD_INF)["status"]["podIP"]
            host = "[%s]" % ip if ":" in ip else ip
            env.k("-n", NS_TEST, "exec", POD_TRN, "--", "/agnhost", "connect", "%s:8080" % host,
                  "--timeout=5s")
            return "training -> inference %s:8080 connected" % ip
        r.step("traffic: training pod reaches the inference pod", traffic)

    if a.traffic and a.peer_node:
        def peer_up():
            image = a.example_image or env.kjson("-n", NS_TEST, "get", "pod", POD_INF)["spec"]["containers"][0]["image"]
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": POD_PEER, "namespace": NS_TEST,
                                "labels": {"app.kubernetes.io/name": "aiqos-example"}},
                   "spec": {"nodeSelector": {"kubernetes.io/hostname": a.peer_node},
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [{"name": "server", "image": image,
                                            "args": ["netexec", "--http-port=8080"]}]}}
            env.k("apply", "-f", "-", input_text=json.dumps(pod))
            env.k("-n", NS_TEST, "wait", "--for=condition=Ready", "pod/" + POD_PEER, "--timeout=%ds" % T,
                  timeout=T + 30)
            j = env.kjson("-n", NS_TEST, "get", "pod", POD_PEER)
            if j["spec"].get("nodeName") != a.peer_node:
                raise CheckFailed("%s runs on %s, not %s" % (POD_PEER, j["spec"].get("nodeName"), a.peer_node))
            return "%s on %s, IP %s" % (POD_PEER, a.peer_node, j["status"]["podIP"])
        r.step("peer pod on the other node running", peer_up, critical=True)

        def cross(src, dst):
            ip = env.kjson("-n", NS_TEST, "get", "pod", dst)["status"]["podIP"]
            host = "[%s]" % ip if ":" in ip else ip
            env.k("-n", NS_TEST, "exec", src, "--", "/agnhost", "connect", "%s:8080" % host, "--timeout=5s")
            return "%s -> %s %s:8080 connected" % (src, dst, ip)
        r.step("traffic across nodes: training pod reaches the peer pod", lambda: cross(POD_TRN, POD_PEER))
        r.step("traffic across nodes: peer pod reaches the inference pod", lambda: cross(POD_PEER, POD_INF))

        def peer_down():
            env.k("-n", NS_TEST, "delete", "pod", POD_PEER, "--wait=true", "--timeout=%ds" % T, timeout=T + 30)
        r.step("peer pod deleted", peer_down)

    # -- changes --
    def annotate_retune():
        env.k("-n", NS_TEST, "annotate", "pod", POD_TRN, "ai.workload=inference", "--overwrite")
        ns = env.pod_ns[POD_TRN]
        wait_for("training pod re-tuned as inference", lambda: (
            int(env.sysctl(ns, "net.ipv4.tcp_notsent_lowat")) == NOTSENT_LOWAT_INFERENCE,
            "tcp_notsent_lowat %s" % env.sysctl(ns, "net.ipv4.tcp_notsent_lowat")), T)
        wait_for("class inference in status", lambda: (
            (status_pod(status(env), POD_TRN) or {}).get("class") == "inference", "status"), T, interval=2)
        wait_mode(env, "inference", hold + T)
        env.k("-n", NS_TEST, "annotate", "pod", POD_TRN, "ai.workload=training", "--overwrite")
        wait_mode(env, "mixed", T)
        return "inference while relabelled, mixed again"
    r.step("annotation change re-tunes the pod and the node", annotate_retune)

    def delete_inference():
        t0 = time.monotonic()
        env.k("-n", NS_TEST, "delete", "pod", POD_INF, "--wait=true", timeout=T)
        wait_mode(env, "training", hold + T)
        dt = time.monotonic() - t0
        return "training after %.0fs (hold %ds)" % (dt, hold)
    r.step("inference pod deleted: node back to training after the hold", delete_inference)

    def delete_training():
        env.k("-n", NS_TEST, "delete", "pod", POD_TRN, "--wait=true", timeout=T)
        wait_mode(env, "idle", hold + T)
        got = wait_for("uplink root qdisc restored", lambda: (
            root_kind(qdiscs(env, env.uplink)) == env.uplink_root_before,
            root_kind(qdiscs(env, env.uplink))), T)
        return "idle, %s root %s" % (env.uplink, got)
    r.step("last pod deleted: idle, uplink restored", delete_training)

    # -- uninstall --
    def uninstall():
        # Restoring the uplink proves something only if it is shaped when the
        # agent goes (it leaves its tuning in place when stopped): the example
        # pods again, the node "mixed", aiqos's root qdisc on the uplink.
        env.k("apply", "-k", os.path.join(env.work, "examples"))
        env.k("-n", NS_TEST, "wait", "--for=condition=Ready", "pod/" + POD_INF, "pod/" + POD_TRN,
              "--timeout=%ds" % T, timeout=T + 30)
        wait_mode(env, "mixed", T)
        if env.uplink_root_before.startswith("noqueue"):
            # a bare veth (kind's node): aiqos leaves it unshaped, there is nothing to restore
            shaped = env.uplink_root_before
        else:
            shaped = wait_for("uplink shaped", lambda: (
                root_kind(qdiscs(env, env.uplink)) != env.uplink_root_before, root_kind(qdiscs(env, env.uplink))),
                T)
        env.k("-n", NS_SYSTEM, "delete", "daemonset", DS, "--wait=true", timeout=T)
        env.k("-n", NS_SYSTEM, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/component=agent",
              "--timeout=%ds" % T, check=False, timeout=T + 30)
        rk = root_kind(qdiscs(env, env.uplink))
        if rk != shaped:
            raise CheckFailed("uplink root qdisc %s once the agent stopped, %s before: not left in place" % (
                rk, shaped))
        d = write_overlay(env, "uninstall", os.path.join(a.repo, "manifests", "uninstall"), [("aiqos", a.image)],
                          pull_policy=a.pull_policy, ds=DS_UNINSTALL)
        env.k("apply", "-k", d)
        env.k("-n", NS_SYSTEM, "rollout", "status", "daemonset/" + DS_UNINSTALL, "--timeout=%ds" % T,
              timeout=T + 30)
        names = conf_listing(env)
        if names != env.conf_names_before:
            raise CheckFailed("conf dir has %s, before install %s" % (names, env.conf_names_before))
        for n in names:
            j, _ = conf_load(env, n)
            if is_owned(n, j) or "aiqos" in plugin_types(j):
                raise CheckFailed("%s still chains aiqos" % n)
        rk = root_kind(qdiscs(env, env.uplink))
        if rk != env.uplink_root_before:
            raise CheckFailed("uplink root qdisc %s, before install %s" % (rk, env.uplink_root_before))
        # Pods created while aiqos was chained are torn down with the config
        # cached at their creation (it names aiqos; the binary stays).
        env.k("-n", NS_TEST, "delete", "pod", POD_INF, POD_TRN, "--wait=true", "--timeout=%ds" % T,
              timeout=T + 30)
        env.k("delete", "-k", d, "--wait=true", timeout=T)
        return "conf dir as before (%s), uplink root %s (was %s with the agent, kept when it stopped)" % (
            " ".join(names), rk, shaped)
    if a.helm:
        r.step("helm uninstall: chain entry, ifbs, uplink and state restored; binary kept for the live pods",
               lambda: helm_uninstall_with_pods(env))
        r.step("after helm uninstall: a pod created under aiqos still reached, then both deleted",
               lambda: pods_after_uninstall(env))
        r.step("helm install + uninstall with no pod left: the plugin binary removed too",
               lambda: helm_cycle_without_pods(env))
    else:
        r.step("uninstall: chain entry removed, uplink restored", uninstall)


# ---- helm install / uninstall (--helm) ----

def helm_run(env, args, timeout):
    a = env.args
    e = dict(os.environ)
    for k in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
        e[k] = os.path.join(env.work, "helm", k.lower())
    if a.kubeconfig:
        e["KUBECONFIG"] = a.kubeconfig
    argv = [a.helm] + args + ["--namespace", NS_SYSTEM]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired:
        raise CheckFailed("timed out after %ss: %s" % (timeout, " ".join(argv)))
    if p.returncode != 0:
        raise CheckFailed("%s: exit %d: %s" % (" ".join(argv), p.returncode, (p.stderr or p.stdout).strip()[-800:]))
    return p


def helm_install(env):
    a = env.args
    repo, tag = split_ref(a.image)
    cmd = ["install", RELEASE, os.path.join(a.repo, "manifests", "helm", "aiqos"), "--create-namespace",
           "--set", "image.repository=" + repo, "--set", "image.tag=" + tag]
    if a.pull_policy:
        cmd += ["--set", "image.pullPolicy=" + a.pull_policy]
    if a.kubectl_image:
        cmd += ["--set", "uninstall.kubectlImage=" + a.kubectl_image]
    helm_run(env, cmd, 120)
    env.helm_installed = True


def helm_uninstall(env):
    """`helm uninstall` (its hooks: agent deleted, aiqos-agent uninstall on
    the node, waited for); then the release's objects gone."""
    T = env.args.timeout
    t0 = time.monotonic()
    helm_run(env, ["uninstall", RELEASE, "--wait", "--timeout", "%ds" % (2 * T)], 2 * T + 30)
    env.helm_installed = False
    env.installed = False
    dt = time.monotonic() - t0
    # Helm deletes the hook Jobs in the background: their pods go with them.
    env.k("-n", NS_SYSTEM, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=aiqos",
          "--timeout=%ds" % T, check=False, timeout=T + 30)
    left = env.k("-n", NS_SYSTEM, "get", "daemonsets,jobs,pods,serviceaccounts,roles,rolebindings,configmaps",
                 "-l", "app.kubernetes.io/name=aiqos", "-o", "name").stdout.split()
    if left:
        raise CheckFailed("after helm uninstall, objects of the release left: %s" % left)
    return dt


def cached_configs_naming(env, plugin):
    """The entries of libcni's cache whose config chains plugin (pods created
    while it was chained and not deleted since)."""
    script = 'for f in "$0"/*; do [ -f "$f" ] && { printf "%s\\n" "${f##*/}"; cat "$f"; echo; }; done; true'
    out = env.node(["sh", "-c", script, CNI_CACHE_RESULTS]).stdout.splitlines()
    naming = []
    for name, text in zip(out[0::2], out[1::2]):
        try:
            conf = json.loads(base64.b64decode(json.loads(text)["config"]))
        except (ValueError, KeyError, TypeError):
            continue
        if plugin in plugin_types(conf):
            naming.append(name)
    return naming


def node_as_before_install(env):
    """No chain entry (conf dir as before install), no aiqos ifb, the uplink's
    root qdisc as before install, no state record: what helm uninstall leaves."""
    a = env.args
    problems = []
    names = conf_listing(env)
    if names != env.conf_names_before:
        problems.append("conf dir has %s, before install %s" % (names, env.conf_names_before))
    for n in names:
        j, _ = conf_load(env, n)
        if is_owned(n, j) or "aiqos" in plugin_types(j):
            problems.append("%s still chains aiqos" % n)
    links = env.node(["ip", "-o", "link", "show"]).stdout
    ifbs = [i for i in AIQOS_IFBS if re.search(r"^\d+: %s[:@]" % re.escape(i), links, re.M)]
    if ifbs:
        problems.append("ifb devices left: %s" % ifbs)
    rk = root_kind(qdiscs(env, env.uplink))
    if rk != env.uplink_root_before:
        problems.append("uplink root qdisc %s, before install %s" % (rk, env.uplink_root_before))
    state = [f for f in STATE_RECORDS
             if env.node(["test", "-e", os.path.join(a.state_dir, f)], check=False).returncode == 0]
    if state:
        problems.append("state records left in %s: %s" % (a.state_dir, state))
    if problems:
        raise CheckFailed("; ".join(problems))
    return "conf dir %s, uplink %s root %s, no aiqos ifb, no record in %s" % (
        " ".join(names), env.uplink, rk, a.state_dir)


def plugin_path(env):
    return os.path.join(env.args.cni_bin_dir, "aiqos")


def plugin_present(env):
    return env.node(["test", "-e", plugin_path(env)], check=False).returncode == 0


def helm_uninstall_with_pods(env):
    a = env.args
    T = a.timeout
    # The uplink shaped (the example pods again, the node "mixed") and the
    # download ifb up when uninstall starts: otherwise restoring them proves nothing.
    env.k("apply", "-k", os.path.join(env.work, "examples"))
    env.k("-n", NS_TEST, "wait", "--for=condition=Ready", "pod/" + POD_INF, "pod/" + POD_TRN,
          "--timeout=%ds" % T, timeout=T + 30)
    for p in (POD_INF, POD_TRN):
        env.pod_ns[p] = pod_netns(env, env.kjson("-n", NS_TEST, "get", "pod", p)["status"]["podIP"])
    wait_mode(env, "mixed", T)
    if env.uplink_root_before.startswith("noqueue"):
        shaped = env.uplink_root_before  # a bare veth (kind's node): left unshaped
    else:
        shaped = wait_for("uplink shaped", lambda: (
            root_kind(qdiscs(env, env.uplink)) != env.uplink_root_before, root_kind(qdiscs(env, env.uplink))), T)
    cached = cached_configs_naming(env, "aiqos")
    if len(cached) < 2:
        raise CheckFailed("libcni's cache names aiqos in %s, want the two example pods'" % cached)
    dt = helm_uninstall(env)
    done = node_as_before_install(env)
    if not plugin_present(env):
        raise CheckFailed("%s removed while %d cached configs name it (%s): their pods' teardown may need it" % (
            plugin_path(env), len(cached), cached))
    return "%.0fs; %s (was %s with the agent); %s kept for %d cached configs" % (
        dt, done, shaped, plugin_path(env), len(cached))


def pods_after_uninstall(env):
    T = env.args.timeout
    # the inference pod is the server (netexec on 8080)
    ip = env.kjson("-n", NS_TEST, "get", "pod", POD_INF)["status"]["podIP"]
    host = "[%s]" % ip if ":" in ip else ip
    env.k("-n", NS_TEST, "exec", POD_TRN, "--", "/agnhost", "connect", "%s:8080" % host, "--timeout=5s")
    # deleted with the config cached at their creation (it names aiqos)
    env.k("-n", NS_TEST, "delete", "pod", POD_INF, POD_TRN, "--wait=true", "--timeout=%ds" % T, timeout=T + 30)
    left = cached_configs_naming(env, "aiqos")
    if left:
        raise CheckFailed("pods deleted, libcni's cache still names aiqos: %s" % left)
    return "training -> inference %s:8080 connected after uninstall; deleted, no cached config names aiqos" % ip


def helm_cycle_without_pods(env):
    a = env.args
    T = a.timeout
    helm_install(env)
    env.installed = True
    env.k("-n", NS_SYSTEM, "rollout", "status", "daemonset/" + DS, "--timeout=%ds" % T, timeout=T + 30)
    wait_for("chained", lambda: check_chained(env), 30)
    if not plugin_present(env):
        raise CheckFailed("%s missing after helm install" % plugin_path(env))
    dt = helm_uninstall(env)
    done = node_as_before_install(env)
    if plugin_present(env):
        raise CheckFailed("%s left by helm uninstall with no cached config naming it" % plugin_path(env))
    return "%.0fs; %s; %s removed" % (dt, done, plugin_path(env))


def effective_qdisc(line, host_if):
    """(on_host, words of the tc command) of one "effective" line of aiqosctl
    status: "ID [pod|host] STATUS: tc qdisc replace dev X KIND ..." (only
    applied and degraded items are in the kernel), or a bare command."""
    m = re.match(r"^\S+ \[(pod|host|uplink)\] (\w+): (.*)$", line)
    if m:
        if m.group(2) not in ("applied", "degraded"):
            return False, []
        words = m.group(3).split()
        on_host = m.group(1) == "host"
    else:
        words = line.split()
        on_host = bool(host_if) and ("dev " + host_if) in line
    if words[:1] == ["tc"]:
        words = words[1:]
    return on_host, words


def _status_both(env):
    s = status(env)
    ok = all(status_pod(s, p) for p in (POD_INF, POD_TRN))
    return (ok, s) if ok else (False, "pods %s" % [(x.get("namespace"), x.get("name")) for x in s.get("pods", [])])


def cleanup(env):
    a = env.args
    if env.primary_edited and env.primary_text is not None:
        try:
            env.node_write_atomic(os.path.join(a.cni_conf_dir, env.primary), env.primary_text)
        except CheckFailed as e:
            log("cleanup: restoring %s: %s" % (env.primary, e))
    if env.created_ns:
        env.k("delete", "namespace", NS_TEST, "--ignore-not-found", "--wait=true", check=False, timeout=a.timeout)
    if env.helm_installed:
        try:
            helm_run(env, ["uninstall", RELEASE, "--wait", "--timeout", "%ds" % (2 * a.timeout)], 2 * a.timeout + 30)
        except CheckFailed as e:
            log("cleanup: %s" % e)
    if env.installed:
        for name in ("uninstall", "install"):
            d = os.path.join(env.work, name)
            if os.path.isdir(d):
                env.k("delete", "-k", d, "--ignore-not-found", "--wait=true", check=False, timeout=a.timeout)


if __name__ == "__main__":
    sys.exit(main())
