"""GC (CNI 1.1.0): state and host-side tc objects of attachments not listed
in cni.dev/valid-attachments are removed; listed ones are kept."""

import cni

BW = {"ingressRate": 10_000_000, "egressRate": 10_000_000}


def _gc(lab, valid, **extra):
    # the same network name as the attachments (libcni runs GC per network)
    conf = cni.build_plugin_config(lab.aiqos_conf(**extra), f"aqt-{lab.tag}", "1.1.0")
    conf["cni.dev/valid-attachments"] = valid
    return cni.run_plugin(lab.plugin, "GC", conf, log_file=lab.log_file)


def _host_kinds(att):
    return [q["kind"] for q in cni.tc_qdiscs(None, att.host_veth())]


def test_gc_removes_unlisted_keeps_listed(lab):
    keep = lab.add(version="1.1.0", annotations={"ai.workload": "inference"}, bandwidth=BW)
    drop = lab.add(version="1.1.0", annotations={"ai.workload": "training"}, bandwidth=BW)
    assert keep.state() is not None and drop.state() is not None
    assert "htb" in _host_kinds(drop)

    r = _gc(lab, [{"containerID": keep.container_id, "ifname": keep.ifname}])
    r.assert_ok(output=False)
    assert r.stdout.strip() == "", r.describe()

    assert keep.state() is not None, f"GC removed a listed attachment: {lab.state_dir_entries()}"
    assert not drop.state_files(), f"GC kept an unlisted attachment: {lab.state_dir_entries()}"
    assert "htb" in _host_kinds(keep), cni.tc_summary(None, keep.host_veth())
    assert _host_kinds(drop) == ["noqueue"], cni.tc_summary(None, drop.host_veth())
    # the listed one still passes CHECK
    keep.check().assert_ok(output=False)


def test_gc_same_container_other_ifname_is_unlisted(lab):
    a = lab.add(version="1.1.0", annotations={"ai.workload": "inference"})
    r = _gc(lab, [{"containerID": a.container_id, "ifname": "net1"}])
    r.assert_ok(output=False)
    assert not a.state_files(), lab.state_dir_entries()


def test_gc_empty_list_removes_all(lab):
    atts = [lab.add(version="1.1.0", annotations={"ai.workload": "inference"}) for _ in range(3)]
    assert len(lab.state_jsons()) == 3
    _gc(lab, []).assert_ok(output=False)
    assert lab.state_jsons() == [], lab.state_dir_entries()
    # DEL after GC still succeeds (nothing left to do)
    for a in atts:
        a.delete(only_aiqos=True)[0].assert_ok(output=False)


def test_gc_of_attachment_whose_netns_is_gone(lab):
    a = lab.add(version="1.1.0", annotations={"ai.workload": "training"}, bandwidth=BW)
    host = a.host_veth()
    a.netns.delete()
    assert cni.wait_link_gone(None, host)
    _gc(lab, []).assert_ok(output=False)
    assert not a.state_files(), lab.state_dir_entries()


def test_gc_on_empty_state_dir(lab):
    _gc(lab, []).assert_ok(output=False)


def test_gc_malformed_valid_attachments(lab):
    a = lab.add(version="1.1.0", annotations={"ai.workload": "inference"})
    r = _gc(lab, "not-a-list")
    r.assert_error()
    # a bad GC request must not delete anything
    assert a.state() is not None, lab.state_dir_entries()
