"""Error paths of ADD (and of the other verbs' input handling): the right CNI
error code on stdout, exit != 0, and nothing left behind — no state file, no
qdisc on either side, no sysctl changed."""

import json
import os
import secrets

import pytest

import cni

ANN = {"ai.workload": "inference"}
BW = {"egressRate": 10_000_000, "ingressRate": 10_000_000}


@pytest.fixture
def pod(lab):
    """A pod with a veth from ptp and no aiqos yet."""
    return lab.plain_pod(ANN, BW)


def assert_nothing_left(lab, pod, pod_qdiscs=("noqueue",)):
    # a lock file may exist; state files (or their temp files) may not
    files = [f for f in lab.state_dir_entries() if f.endswith(".json") or pod.container_id in f or "tmp" in f]
    assert files == [], f"state left behind: {lab.state_dir_entries()}"
    ns = pod.netns.name
    assert tuple(sorted(q["kind"] for q in cni.tc_qdiscs(ns, "eth0"))) == tuple(sorted(pod_qdiscs)), cni.tc_summary(ns, "eth0")
    assert cni.tc_classes(ns, "eth0") == [], cni.tc_summary(ns, "eth0")
    host = pod.host_veth()
    assert [q["kind"] for q in cni.tc_qdiscs(None, host)] == ["noqueue"], cni.tc_summary(None, host)
    assert cni.read_sysctls(ns) == pod.baseline_sysctls


def test_malformed_json_is_6(lab, pod):
    r = lab.run_aiqos(pod, "ADD", '{"cniVersion": "1.0.0",, "name": "x", "type": "aiqos"}')
    r.assert_error(6)
    assert_nothing_left(lab, pod)


def test_truncated_stdin_is_6(lab, pod):
    full = json.dumps(lab.add_conf(pod))
    r = lab.run_aiqos(pod, "ADD", full[: len(full) // 2])
    r.assert_error(6)
    assert_nothing_left(lab, pod)


def test_empty_stdin_is_6(lab, pod):
    r = lab.run_aiqos(pod, "ADD", "")
    r.assert_error(6)
    assert_nothing_left(lab, pod)


def test_trailing_garbage_is_6(lab, pod):
    r = lab.run_aiqos(pod, "ADD", json.dumps(lab.add_conf(pod)) + " }{")
    r.assert_error(6)
    assert_nothing_left(lab, pod)


def test_binary_garbage_is_6(lab, pod):
    r = lab.run_aiqos(pod, "ADD", secrets.token_bytes(512))
    r.assert_error(6)
    assert_nothing_left(lab, pod)


@pytest.mark.parametrize("doc", ["[]", '"aiqos"', "42", "null"])
def test_non_object_config(lab, pod, doc):
    r = lab.run_aiqos(pod, "ADD", doc)
    r.assert_error((6, 7))
    assert_nothing_left(lab, pod)


def test_oversized_stdin_is_refused(lab, pod):
    conf = lab.add_conf(pod)
    conf["padding"] = "x" * (4 * 1024 * 1024)
    r = lab.run_aiqos(pod, "ADD", json.dumps(conf))
    r.assert_error()
    assert_nothing_left(lab, pod)


def test_unsupported_version_is_1(lab, pod):
    conf = lab.add_conf(pod)
    conf["cniVersion"] = "9.9.9"
    r = lab.run_aiqos(pod, "ADD", conf)
    e = r.assert_error(1)
    assert "9.9.9" in r.error_text(), e
    assert_nothing_left(lab, pod)


def test_check_with_old_version_is_refused(lab, pod):
    conf = lab.add_conf(pod)
    conf["cniVersion"] = "0.3.1"
    conf["prevResult"] = cni.convert_result(pod.result, "0.3.1")
    r = lab.run_aiqos(pod, "CHECK", conf)
    r.assert_error(1)


@pytest.mark.parametrize("verb", ["GC", "STATUS"])
def test_gc_status_need_1_1_0(lab, pod, verb):
    conf = lab.add_conf(pod)
    conf.pop("prevResult")
    r = cni.run_plugin(lab.plugin, verb, conf, log_file=lab.log_file)
    r.assert_error(1)


def test_bad_failure_policy_is_7(lab, pod):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy="sometimes"))
    e = r.assert_error(7)
    assert "failurePolicy" in r.error_text() and "sometimes" in r.error_text(), e
    assert_nothing_left(lab, pod)


@pytest.mark.parametrize(
    "key,value",
    [
        ("agentSocket", "relative/agent.sock"),
        ("stateDir", "relative/state"),
        ("agentRequired", "yes"),
        ("logLevel", "chatty"),
        ("runtimeConfig", {"bandwidth": "10M"}),
        ("profiles", {"inference": {"tcpEcn": 7}}),
        ("profiles", {"inference": {"nosuchKey": 1}}),
    ],
)
def test_invalid_config_values_are_7(lab, pod, key, value):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, **{key: value}))
    e = r.assert_error(7)
    assert key in r.error_text() or (isinstance(value, dict) and any(k in r.error_text() for k in value)), e
    assert_nothing_left(lab, pod)


def test_invalid_prevresult_is_7(lab, pod):
    conf = lab.add_conf(pod)
    conf["prevResult"] = {"cniVersion": pod.version, "interfaces": "eth0"}
    r = lab.run_aiqos(pod, "ADD", conf)
    r.assert_error(7)
    assert "prevResult" in r.error_text(), r.describe()
    assert_nothing_left(lab, pod)


@pytest.mark.parametrize("var", ["CNI_NETNS", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_COMMAND"])
def test_missing_env_is_4(lab, pod, var):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod), unset=(var,))
    e = r.assert_error(4)
    if var != "CNI_COMMAND":
        assert var in r.error_text(), e
    assert_nothing_left(lab, pod)


def test_unknown_command_is_4(lab, pod):
    r = lab.run_aiqos(pod, "FROB", lab.add_conf(pod))
    r.assert_error(4)
    assert_nothing_left(lab, pod)


@pytest.mark.parametrize("cid", ["../../etc/passwd", "a/b", "x" * 300, ""])
def test_bad_container_id_is_refused(lab, pod, cid):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod), containerid=cid)
    r.assert_error()
    assert_nothing_left(lab, pod)
    # nothing was written outside the state dir either
    assert not os.path.exists(os.path.join(lab.state_dir, "..", "etc"))


def test_nonexistent_netns_is_error_naming_path(lab, pod):
    missing = f"/run/netns/aqt-{cni.SESSION_TAG}-missing-{secrets.token_hex(4)}"
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod), netns=missing)
    e = r.assert_error()
    assert missing in r.error_text(), e
    assert_nothing_left(lab, pod)


def test_netns_path_not_a_netns_is_error(lab, pod):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod), netns="/proc/self/ns/mnt")
    r.assert_error()
    assert_nothing_left(lab, pod)


def test_ifname_missing_in_netns_fail_closed(lab, pod):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy="closed"), ifname="eth9")
    e = r.assert_error()
    assert "eth9" in r.error_text(), e
    assert_nothing_left(lab, pod)


def test_ifname_missing_in_netns_fail_open(lab, pod):
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy="open"), ifname="eth9")
    r.assert_ok()
    assert r.json == pod.result, f"fail-open must pass prevResult through{r.describe()}"
    path = os.path.join(lab.state_dir, f"{pod.container_id}@eth9.json")
    states = [json.load(open(f)) for f in lab.state_jsons()]
    assert states, f"fail-open ADD recorded no state: {lab.state_dir_entries()}"
    s = json.load(open(path)) if os.path.exists(path) else states[0]
    assert s.get("failure"), f"state does not record the failure: {s}"
    assert "eth9" in s["failure"], s["failure"]
    # DEL cleans it up
    conf = lab.add_conf(pod, failurePolicy="open")
    lab.run_aiqos(pod, "DEL", conf, ifname="eth9").assert_ok(output=False)
    assert lab.state_jsons() == [], lab.state_dir_entries()


def test_conflicting_ingress_qdisc_fail_closed(lab, pod):
    """A foreign ingress qdisc on the pod's eth0 makes the clsact that DSCP
    marking needs impossible (EINVAL, not a missing feature): with
    failurePolicy closed ADD fails and undoes everything it did."""
    ns = pod.netns.name
    cni.sh(*cni.in_ns(ns, "tc", "qdisc", "add", "dev", "eth0", "ingress"))
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy="closed"))
    r.assert_error(100)
    assert_nothing_left(lab, pod, pod_qdiscs=("noqueue", "ingress"))


def test_conflicting_ingress_qdisc_fail_open(lab, pod):
    ns = pod.netns.name
    cni.sh(*cni.in_ns(ns, "tc", "qdisc", "add", "dev", "eth0", "ingress"))
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod))
    r.assert_ok()
    assert r.json == pod.result, r.describe()
    s = [json.load(open(f)) for f in lab.state_jsons()]
    assert len(s) == 1 and s[0].get("failure"), f"state must record the failure: {s}"
    # the foreign qdisc is not ours to remove
    assert "ingress" in [q["kind"] for q in cni.tc_qdiscs(ns, "eth0")]
