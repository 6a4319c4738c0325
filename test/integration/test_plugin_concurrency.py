"""Concurrency: 10 ADDs in parallel (each in its own netns) all succeed with
complete state and tuned kernels; then 10 parallel DELs leave nothing."""

import concurrent.futures as cf

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
