"""Concurrency: 10 ADDs in parallel (each in its own netns) all succeed with
complete state and tuned kernels; then 10 parallel DELs leave nothing."""

import concurrent.futures as cf
import fcntl
import os
import time

import cni

N = 10
BW = {"egressRate": 10_000_000, "ingressRate": 10_000_000}


def test_parallel_add_then_parallel_del(lab):
    atts = [
        lab.attachment(annotations={"ai.workload": "inference" if i % 2 == 0 else "training"}, bandwidth=BW)
        for i in range(N)
    ]
    with cf.ThreadPoolExecutor(max_workers=N) as ex:
        runs = list(ex.map(lambda a: a.add(check=False), atts))
    for a, r in zip(atts, runs):
        r.assert_ok()
        assert r.json == cni.convert_result(a.base_result(), a.version), r.describe()

    states = lab.state_jsons()
    assert len(states) == N, lab.state_dir_entries()
    for i, a in enumerate(atts):
        s = a.state()
        assert s is not None, a.container_id
        assert s["containerId"] == a.container_id and s["ifname"] == "eth0"
        assert s["class"] == ("inference" if i % 2 == 0 else "training"), s
        assert s["choices"] and not s.get("failure"), s
        ns = a.netns.name
        assert cni.read_sysctl(ns, "net.ipv4.tcp_ecn") == "1"
        assert {c["handle"]: c for c in cni.tc_classes(ns, "eth0")}["1:10"]["rate_bps"] == 10_000_000
        host = a.host_veth()
        assert {c["handle"]: c for c in cni.tc_classes(None, host)}["1:10"]["rate_bps"] == 10_000_000

    hosts = [a.host_veth() for a in atts]
    with cf.ThreadPoolExecutor(max_workers=N) as ex:
        dels = list(ex.map(lambda a: a.delete(only_aiqos=True)[0], atts))
    for r in dels:
        r.assert_ok(output=False)
    assert lab.state_jsons() == [], lab.state_dir_entries()
    for h in hosts:
        assert [q["kind"] for q in cni.tc_qdiscs(None, h)] == ["noqueue"], cni.tc_summary(None, h)
    # and the primary plugin's DEL, also in parallel
    with cf.ThreadPoolExecutor(max_workers=N) as ex:
        base_dels = list(ex.map(lambda a: a.delete(), atts))
    for runs in base_dels:
        for r in runs:
            r.assert_ok(output=False)
    left = [h for h in hosts if cni.link(None, h) is not None]
    assert not left, left
    assert lab.state_dir_entries() == [] or all(not f.endswith(".json") for f in lab.state_dir_entries())


class _Held:
    """Hold an attachment's lock file (flock) from this process, as a stalled
    agent or a hung ADD would."""

    def __init__(self, lab, att):
        os.makedirs(lab.state_dir, exist_ok=True)
        path = os.path.join(lab.state_dir, f"{att.container_id}@{cni.encode_ifname(att.ifname)}.lock")
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self):
        os.close(self.fd)


def test_busy_attachment_lock_is_code_11_fast_and_others_never_wait(lab):
    """Locks are per attachment with a short bound: with one attachment's lock
    held, its ADD/CHECK/DEL end in code 11 (try again later) well under a
    second, writing nothing (never going on without the lock); another
    attachment's ADD does not wait at all; GC skips the busy stale entry
    without waiting and removes it once free."""
    busy = lab.attachment(annotations={"ai.workload": "inference"}, bandwidth=BW)
    other = lab.attachment(annotations={"ai.workload": "training"}, bandwidth=BW)
    held = _Held(lab, busy)
    try:
        r = busy.add(check=False)
        e = r.assert_error(11)
        assert "busy" in e["msg"], r.describe()
        assert r.elapsed_s < 0.6, f"ADD waited {r.elapsed_s:.2f} s for a busy lock"
        assert busy.state() is None, busy.state()
        host = busy.host_veth()
        assert [q["kind"] for q in cni.tc_qdiscs(None, host)] == ["noqueue"], cni.tc_summary(None, host)

        t0 = time.monotonic()
        other.add().assert_ok()
        assert time.monotonic() - t0 < 1.0
        assert other.state() is not None

        d = busy.delete(only_aiqos=True)[0]
        d.assert_error(11)
        assert d.elapsed_s < 1.0, d.describe()
    finally:
        held.release()
    # free again: the runtime's retry (DEL of the chain, ADD again) works
    for run in busy.delete():
        run.assert_ok(output=False)
    busy.add().assert_ok()
    busy.assert_tuned()

    # GC: both stale; one of them busy. No 3 s per entry: done at once, the
    # busy one kept for the next GC.
    held = _Held(lab, busy)
    try:
        g = busy.aiqos("GC", conf_update={"cniVersion": "1.1.0", "cni.dev/valid-attachments": []})
        g.assert_ok(output=False)
        assert g.elapsed_s < 0.5, g.describe()
        assert busy.state() is not None and other.state() is None, lab.state_dir_entries()
    finally:
        held.release()
    busy.aiqos("GC", conf_update={"cniVersion": "1.1.0", "cni.dev/valid-attachments": []}).assert_ok(output=False)
    assert lab.state_jsons() == [], lab.state_dir_entries()
    assert [f for f in lab.state_dir_entries() if f.endswith(".lock")] == [], lab.state_dir_entries()
