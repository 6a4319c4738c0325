"""DEL: idempotent, succeeds when the netns (or everything) is already gone,
removes the state file and the host-side qdiscs."""

import pytest

import cni

BW = {"egressRate": 10_000_000, "ingressRate": 10_000_000}


def _del_aiqos(att, **kw):
    runs = att.delete(only_aiqos=True, **kw)
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize("version", ["0.3.1", "0.4.0", "1.0.0", "1.1.0"])
def test_del_twice_succeeds_and_cleans(lab, version):
    att = lab.add(version=version, annotations={"ai.workload": "inference"}, bandwidth=BW)
    host = att.host_veth()
    assert cni.root_qdisc(None, host)["kind"] == "htb"
    assert att.state() is not None
    r1 = _del_aiqos(att)
    r1.assert_ok(output=False)
    assert r1.stdout.strip() == "", r1.describe()
    assert not att.state_files(), lab.state_dir_entries()
    # host side: the shaper is gone, the veth is back to its default
    assert [q["kind"] for q in cni.tc_qdiscs(None, host)] == ["noqueue"], cni.tc_summary(None, host)
    r2 = _del_aiqos(att)
    r2.assert_ok(output=False)
    assert not att.state_files(), lab.state_dir_entries()


def test_del_removes_pod_side_tc(lab):
    att = lab.add(bandwidth={"egressRate": 10_000_000})
    ns = att.netns.name
    assert cni.root_qdisc(ns, "eth0")["kind"] == "htb"
    _del_aiqos(att).assert_ok(output=False)
    assert [q["kind"] for q in cni.tc_qdiscs(ns, "eth0")] == ["noqueue"], cni.tc_summary(ns, "eth0")


def test_del_after_netns_deleted(lab):
    att = lab.add(annotations={"ai.workload": "training"}, bandwidth=BW)
    host = att.host_veth()
    att.netns.delete()
    assert not att.netns.exists()
    assert cni.wait_link_gone(None, host), f"{host} still exists after its peer's netns was deleted"
    r = _del_aiqos(att)
    r.assert_ok(output=False)
    assert not att.state_files(), lab.state_dir_entries()
    _del_aiqos(att).assert_ok(output=False)


def test_del_without_netns_env(lab):
    att = lab.add(annotations={"ai.workload": "inference"}, bandwidth=BW)
    host = att.host_veth()
    r = _del_aiqos(att, netns="")
    r.assert_ok(output=False)
    assert not att.state_files(), lab.state_dir_entries()
    # without a netns the host side is still cleaned (found from state/prevResult)
    assert [q["kind"] for q in cni.tc_qdiscs(None, host)] == ["noqueue"], cni.tc_summary(None, host)
    r = _del_aiqos(att, unset=("CNI_NETNS",))
    r.assert_ok(output=False)


def test_del_without_prevresult(lab):
    att = lab.add(annotations={"ai.workload": "inference"}, bandwidth=BW)
    host = att.host_veth()
    r = att.aiqos("DEL", prev=None)
    r.assert_ok(output=False)
    assert not att.state_files(), lab.state_dir_entries()
    assert [q["kind"] for q in cni.tc_qdiscs(None, host)] == ["noqueue"], cni.tc_summary(None, host)


def test_del_of_unknown_container(lab):
    # never added: DEL must still succeed and create nothing
    att = lab.base_only()
    att.add()
    conf = cni.build_plugin_config(lab.aiqos_conf(), "aqt-del", "1.0.0", att.result)
    r = lab.run_aiqos(att, "DEL", conf)
    r.assert_ok(output=False)
    assert lab.state_jsons() == [], lab.state_dir_entries()


def test_del_after_full_chain_del_leaves_nothing(lab):
    att = lab.add(annotations={"ai.workload": "inference"}, bandwidth=BW)
    host = att.host_veth()
    for r in att.delete():
        r.assert_ok(output=False)
    assert cni.link(None, host) is None
    assert lab.state_jsons() == [], lab.state_dir_entries()
