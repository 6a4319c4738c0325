"""plane.py — a real control plane (hack/control-plane.sh) for tests: the
binary check, start in a throwaway dir (optionally inside a network
namespace: `wrap` is an argv prefix such as ["ip", "netns", "exec", NS]),
the admin API client, control-plane.sh and kubectl calls, stop. Shared by
the k8s suite (test_manifests.py, test_admission.py) and the fault soak
(test/integration/test_soak.py through kubelab.py)."""

import os
import subprocess
import tempfile
from pathlib import Path

from kapi import Api

TOP = Path(__file__).resolve().parents[2]
CP = TOP / "hack" / "control-plane.sh"
BUILD_K8S = TOP / "hack" / "build-k8s.sh"


class Unavailable(Exception):
    """The Kubernetes binaries are not built (callers skip)."""


class StartFailed(Exception):
    pass


def bin_dir():
    """The cached binaries' dir; Unavailable if hack/build-k8s.sh has not built them."""
    r = subprocess.run([str(BUILD_K8S), "--check", "--print-bin-dir"], capture_output=True, text=True)
    if r.returncode != 0:
        raise Unavailable("Kubernetes binaries are not built: run hack/build-k8s.sh (%s)" % r.stderr.strip())
    return r.stdout.strip()


class Plane:
    def __init__(self, env, bindir, wrap=()):
        self.env = env
        self.wrap = list(wrap)
        self.dir = Path(env["AIQOS_CP_DIR"])
        v = dict(line.partition("=")[::2] for line in (self.dir / "cp.env").read_text().splitlines() if line)
        self.vars = v
        self.server, self.ca = v["AIQOS_CP_SERVER"], v["AIQOS_CP_CA"]
        self.kubeconfig = v["KUBECONFIG"]
        self.admin = Api(self.server, self.ca, cert=v["AIQOS_CP_ADMIN_CERT"], key=v["AIQOS_CP_ADMIN_KEY"])
        self.kubectl = [*self.wrap, str(Path(bindir) / "kubectl"), "--kubeconfig", self.kubeconfig]

    def cp(self, *args, timeout=120):
        r = subprocess.run([*self.wrap, str(CP), *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        assert r.returncode == 0, "control-plane.sh %s: %s %s" % (args, r.stdout, r.stderr)
        return r.stdout.strip()

    def k(self, *args, check=True, stdin=None):
        r = subprocess.run(self.kubectl + list(args), capture_output=True, text=True, timeout=120, input=stdin)
        if check:
            assert r.returncode == 0, "kubectl %s: %s %s" % (" ".join(args), r.stdout, r.stderr)
        return r

    def pids(self):
        return {f.stem: int(f.read_text().strip()) for f in (self.dir / "run").glob("*.pid")}

    def logs(self, lines=30):
        out = []
        for f in sorted((self.dir / "logs").glob("*.log")):
            tail = f.read_text(errors="replace").splitlines()[-lines:]
            out.append("--- %s\n%s" % (f.name, "\n".join(tail)))
        return "\n".join(out)

    def stop(self):
        subprocess.run([*self.wrap, str(CP), "stop"], env=self.env, capture_output=True, timeout=120)


def start(prefix="aqt-k8s-", controllers=True, wrap=(), parent=None, env=None):
    """Start etcd + kube-apiserver (+ controllers) in a new dir; returns a Plane.
    Raises Unavailable (no binaries) or StartFailed (with the script's output)."""
    bindir = bin_dir()
    d = tempfile.mkdtemp(prefix=prefix, dir=parent)
    e = dict(os.environ, AIQOS_CP_DIR=d, AIQOS_K8S_BIN=bindir, AIQOS_CP_COMPACTION_INTERVAL="0", **(env or {}))
    e.pop("KUBECONFIG", None)
    argv = [*wrap, str(CP), "start", *(["--with-controllers"] if controllers else [])]
    r = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        subprocess.run([*wrap, str(CP), "stop"], env=e, capture_output=True)
        raise StartFailed("control-plane.sh start failed (%d):\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
    return Plane(e, bindir, wrap)
