"""standin.py — the Cilium stand-in (test/coexist/cilium_standin.c, built by
`make standin` into $AIQOS_BUILD/test/cilium-standin) for tests and
benchmarks: tcx programs at the tail of both hooks of a device returning
TC_ACT_OK and counting packets (or, calico=True, programs named like
Calico's eBPF dataplane's that hand on), and Cilium's one-shot deletion of every
legacy tc filter on the device (removeTCFilters). Root; a kernel with tcx
(>= 6.6)."""
import os
import subprocess
import tempfile

BUILD = os.environ.get("AIQOS_BUILD") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
TOOL = os.path.join(BUILD, "test", "cilium-standin")


class Standin:
    """The stand-in's programs on dev in netns ns, pinned in a bpffs of its own."""

    def __init__(self, ns, dev, calico=False):
        self.ns, self.dev, self.calico = ns, dev, calico
        self.pins = tempfile.mkdtemp(prefix="aiqos-standin-")
        subprocess.run(["mount", "-t", "bpf", "bpf", self.pins], check=True)
        try:
            self._run("attach", dev, self.pins, *(["calico"] if calico else []))
        except Exception:
            self.close()
            raise

    def _run(self, *args):
        p = subprocess.run(["ip", "netns", "exec", self.ns, TOOL, *args], capture_output=True, text=True,
                           timeout=30)
        if p.returncode != 0:
            raise RuntimeError(f"cilium-standin {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
        return p.stdout

    def counts(self):
        """{"ingress": packets, "egress": packets} the programs saw."""
        c = {k: int(v) for k, v in (line.split() for line in self._run("count", self.pins).splitlines())}
        return {"ingress": c["calico-ingress"], "egress": c["calico-egress"]} if self.calico else \
            {"ingress": c["ingress"], "egress": c["egress"]}

    def peer(self, ip, dev):
        """Packets for ip go straight into the pod behind host-side veth dev
        (bpf_redirect_peer, as Cilium's BPF host routing does)."""
        self._run("peer", self.pins, ip, dev)

    def flush_legacy(self):
        """Delete every legacy tc filter on the device, both hooks, once; how many."""
        return int(self._run("flush-legacy", self.dev).strip())

    def attached(self):
        """Both programs still attached, each last on its tcx hook."""
        names = ("cali_tc_ingress", "cali_tc_egress") if self.calico else ("cil_from_netdev", "cil_to_netdev")
        t = self.tcx()
        return t["ingress"][-1:] == [names[0]] and t["egress"][-1:] == [names[1]]

    def tcx(self):
        """{"ingress": [program names in run order], "egress": [...]} of the device's tcx hooks."""
        out = {"ingress": [], "egress": []}
        for line in self._run("query", self.dev).splitlines():
            hook, _, name = line.partition(" ")
            out[hook].append(name)
        return out

    def close(self):
        """Detach the programs (idempotent)."""
        if not os.path.isdir(self.pins):
            return
        subprocess.run(["ip", "netns", "exec", self.ns, TOOL, "detach", self.pins], capture_output=True, timeout=30)
        subprocess.run(["umount", self.pins], capture_output=True, timeout=30)
        os.rmdir(self.pins)


def attach(ns, dev, calico=False):
    """The stand-in on dev in netns ns (close() removes it); calico: Calico's
    eBPF dataplane's stand-in instead (cali_tc_*, handing on: TCX_NEXT)."""
    return Standin(ns, dev, calico)
