"""What ADD learns about the kernel (missing qdisc kinds, pedit) is kept in
<stateDir>/kernel-caps for the later ADDs of the same boot: alternatives known
to be missing are skipped without asking the kernel and recorded with the errno
it gave when they were learned. A broken file, or one of another boot, is
relearned. Works on the CI kernel (fq_codel/pedit missing) and a full one."""

import json
import os
import time

import cni

INFERENCE = {"ai.workload": "inference"}
BW = {"egressRate": 10_000_000, "ingressRate": 10_000_000}
CAPS = "kernel-caps"


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _caps_path(lab):
    return os.path.join(lab.state_dir, CAPS)


def _read_caps(lab):
    p = _caps_path(lab)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return json.load(f)


def _write_caps(lab, obj):
    os.makedirs(lab.state_dir, exist_ok=True)
    with open(_caps_path(lab), "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))


def _errs(att):
    """id -> (status, chosen, err) of every item in the state."""
    return {c["id"]: (c["status"], c["chosen"], c["err"]) for c in att.state()["choices"]}


def test_learned_once_then_reused(lab):
    first = lab.add(annotations=INFERENCE, bandwidth=BW)
    e1 = _errs(first)
    missing = {i for i, (st, _, _) in e1.items() if st in ("degraded", "skipped")}
    caps = _read_caps(lab)
    if not missing:
        # a kernel with everything: nothing learned, nothing written
        assert caps is None, caps
        return
    assert caps is not None, f"nothing learned although {missing} were refused; stateDir {lab.state_dir_entries()}"
    assert caps["bootId"] == _boot_id(), caps
    assert not [f for f in lab.state_dir_entries() if ".tmp." in f], lab.state_dir_entries()
    # not an attachment record (those are the *.json of the stateDir)
    assert len(lab.state_jsons()) == 1, lab.state_dir_entries()
    before = os.stat(_caps_path(lab)).st_mtime_ns

    second = lab.add(annotations=INFERENCE, bandwidth=BW)
    e2 = _errs(second)
    # same outcome, the refusals recorded with the errno first learned —
    # except the DSCP hook: with pedit known missing no clsact is made for
    # filters that cannot work, skipped with pedit's errno
    if e1.get("dscp.v4", ("",))[0] == "skipped" and e1.get("dscp.v6", ("",))[0] == "skipped":
        assert e2.pop("dscp.clsact") == ("skipped", -1, e1["dscp.v4"][2]), e2
        e1 = {k: v for k, v in e1.items() if k != "dscp.clsact"}
    assert e2 == e1, f"first {e1}\nsecond {e2}"
    # the host leaf (its fq_codel was known missing within the first ADD
    # already) carries the kernel's errno, not a generic one
    assert e1["ingress.leaf"][2] == e1["egress.leaf"][2], e1
    # nothing new learned: the file was not rewritten
    assert os.stat(_caps_path(lab)).st_mtime_ns == before


def test_known_missing_not_tried(lab):
    # every leaf alternative marked missing (even ones this kernel has): the
    # leaf is skipped with the recorded errno, nothing is put in the kernel;
    # the same for the DSCP rewrite (pedit)
    errs = {"qdisc/fq_codel": 95, "qdisc/fq": 95, "qdisc/bfifo": 95, "qdisc/pfifo": 95}
    _write_caps(lab, {"version": 1, "bootId": _boot_id(), "learned": int(time.time()), "missing": errs,
                      "pedit": 22})
    before = os.stat(_caps_path(lab)).st_mtime_ns
    att = lab.attachment(annotations=INFERENCE, bandwidth=BW)
    att.add(check=True)
    e = _errs(att)
    assert e["egress.leaf"] == ("skipped", -1, 95), e
    assert e["ingress.leaf"] == ("skipped", -1, 95), e
    assert e["egress.root"][0] == "applied", e
    assert e["dscp.v4"] == ("skipped", -1, 22) and e["dscp.v6"] == ("skipped", -1, 22), e
    kinds = [q["kind"] for q in cni.tc_qdiscs(att.netns.name, "eth0")]
    assert "bfifo" not in kinds and "fq_codel" not in kinds, kinds
    assert os.stat(_caps_path(lab)).st_mtime_ns == before


def test_broken_or_foreign_file_relearned(lab):
    foreign = {"version": 1, "bootId": "another-boot", "learned": int(time.time()),
               "missing": {"qdisc/htb": 2, "class/htb": 2}}
    for content in ("{not json", json.dumps(foreign)):
        _write_caps(lab, content)
        att = lab.add(annotations=INFERENCE, bandwidth=BW)
        e = _errs(att)
        # htb was not believed missing: the shapers are there
        assert e["egress.root"][0] == "applied" and e["ingress.root"][0] == "applied", e
        with open(_caps_path(lab)) as f:
            text = f.read()
        if any(st != "applied" for st, _, _ in e.values()):
            # something was learned: the file is this boot's now
            caps = json.loads(text)
            assert caps["bootId"] == _boot_id(), caps
            assert "qdisc/htb" not in caps.get("missing", {}), caps
        else:
            assert text == content  # nothing learned, nothing written
