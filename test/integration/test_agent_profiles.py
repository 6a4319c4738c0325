"""test_agent_profiles.py — the profiles of the agent's config
reach pods. On a lab node (agentlab.py, the real plugin chained after ptp +
host-local, the agent against the API stand-in):
  - a pod the plugin tuned with the built-in profile is re-tuned to the
    config's profile of the same name (content compared, not names);
  - a hot reload of the config re-tunes running pods whose plan changed;
  - the chain the agent writes carries the config's profiles, so the
    plugin's ADD applies them itself (agent stopped: no re-tune involved),
    and a reload rewrites the chain;
  - drift repair never skips silently: a record whose choices are not in
    today's plan (a record of an older writer, config changed) is re-tuned.
Profile content is observed through the pod's sysctls (the CI kernel lacks
fq_codel, so qdisc parameters cannot show it here)."""

import glob
import json
import os

import agentlab
import cni
from agentlab import wait_until

INF = {"ai.workload": "inference"}
BASE = {"debounceMs": 50, "driftRepairSeconds": 0}
LOWAT = "net.ipv4.tcp_notsent_lowat"


def lowat(pod):
    return cni.read_sysctl(pod.ns, LOWAT)


def wait_lowat(node, pod, want, timeout_s=5):
    try:
        return wait_until(lambda: lowat(pod) == want, timeout_s, f"{LOWAT} = {want}")
    except AssertionError as e:
        raise AssertionError(f"{e} (now {lowat(pod)})\n--- agent log ---\n{node.agent_log_tail()}") from None


def pod_status(node, pod):
    for p in node.status()["pods"]:
        if p["name"] == pod.name:
            return p
    return None


def test_config_profile_retunes_a_pod_the_plugin_tuned_with_the_builtin(node):
    node.start_agent(dict(BASE, profiles={"inference": {"notsentLowat": 12345}}))
    # the plugin's conf carries no profiles: ADD applies the built-in 16 KiB
    pod = node.add_pod(INF)
    assert pod.state()["profile"] == "inference"
    # same profile name, other content: the agent re-tunes it
    wait_lowat(node, pod, "12345")
    st = wait_until(lambda: (st := pod.settled()) and st["annotationsSource"] == "agent" and st, 5, "record rewritten")
    assert st["profileSpec"]["notsentLowat"] == 12345, st
    assert pod_status(node, pod)["status"] in ("tuned", "degraded"), node.status()


def test_hot_reload_retunes_running_pods(node):
    node.start_agent(dict(BASE))
    pod = node.add_pod(INF)
    other = node.add_pod({"ai.workload": "training"})
    wait_lowat(node, pod, "16384")
    before = other.state()
    node.write_config(dict(BASE, profiles={"inference": {"notsentLowat": 12345}}))
    wait_lowat(node, pod, "12345")
    node.write_config(dict(BASE, profiles={"inference": {"notsentLowat": 9999}}))
    wait_lowat(node, pod, "9999")
    # back to the built-in: the pod follows
    node.write_config(dict(BASE))
    wait_lowat(node, pod, "16384")
    # a pod whose plan did not change is left alone (its record not rewritten)
    assert other.state()["updated"] == before["updated"] and other.state()["choices"] == before["choices"]


def test_the_chain_carries_the_config_profiles(node, lab):
    conf_dir = os.path.join(node.dir, "net.d")
    bin_dir = os.path.join(node.dir, "opt-cni-bin")
    os.makedirs(conf_dir)
    os.makedirs(bin_dir)
    primary = lab.conflist()
    primary["plugins"] = primary["plugins"][:1]  # ptp + host-local only
    primary["name"] = "aqt-primary"
    with open(os.path.join(conf_dir, "10-primary.conflist"), "w") as f:
        json.dump(primary, f)
    entry = lab.aiqos_conf(agentSocket=node.socket, agentTimeoutMs=1000)
    args = ("--cni-conf-dir", conf_dir, "--cni-bin-dir", bin_dir, "--plugin-src", lab.plugin,
            "--plugin-conf", json.dumps(entry))
    profiles = {"inference": {"notsentLowat": 12345}}
    node.start_agent(dict(BASE, profiles=profiles), args=args)

    def chained():
        files = [p for p in glob.glob(os.path.join(conf_dir, "*aiqos*")) if not os.path.basename(p).startswith(".")]
        if len(files) != 1:
            return None
        with open(files[0]) as f:
            c = json.load(f)
        mine = [p for p in c["plugins"] if p.get("type") == "aiqos"]
        return (c, mine[0]) if mine else None

    c, mine = wait_until(chained, 5, "the chained conflist")
    # every profile of the agent, whole (the built-ins too)
    assert mine["profiles"]["inference"]["notsentLowat"] == 12345, mine
    assert mine["profiles"]["inference"]["class"] == "inference", mine
    assert set(mine["profiles"]) >= {"inference", "inference-strict", "training", "training-dctcp", "default"}
    assert mine["agentSocket"] == node.socket, mine

    # the agent down: the plugin alone applies the config's profile at ADD
    node.stop_agent()
    att = agentlab.NodeAttachment(node, lab, lab.netns(), c, "c" * 64, "eth0",
                                  {"io.kubernetes.cri.pod-annotations": INF},
                                  "IgnoreUnknown=1;K8S_POD_NAMESPACE=aqt;K8S_POD_NAME=chained;"
                                  f"K8S_POD_INFRA_CONTAINER_ID={'c' * 64};K8S_POD_UID=uid-chained")
    att.add(check=True).assert_ok()
    assert cni.read_sysctl(att.netns.name, LOWAT) == "12345"
    st = att.state()
    assert st["annotationsSource"] == "runtime" and st["profileSpec"]["notsentLowat"] == 12345, st

    # a reload rewrites the chain with the new profiles
    node.start_agent(args=args)
    node.write_config(dict(BASE, profiles={"inference": {"notsentLowat": 7777}}))
    wait_until(lambda: (chained() or (None, {}))[1].get("profiles", {}).get("inference", {}).get("notsentLowat")
               == 7777, 5, "the chain rewritten after the reload")
    att.delete()


def test_drift_repair_rebuilds_a_record_whose_choices_left_the_plan(node):
    node.start_agent(dict(BASE))
    pod = node.add_pod(INF)
    wait_lowat(node, pod, "16384")
    node.stop_agent()
    # a record of an older writer (no profileSpec), and a config whose
    # inference profile has no DSCP items any more: its choices (dscp.*) are
    # not in today's plan
    path = os.path.join(node.state_dir, f"{pod.att.container_id}@eth0.json")
    with open(path) as f:
        rec = json.load(f)
    rec.pop("profileSpec", None)
    assert any(c["id"].startswith("dscp.") for c in rec["choices"]), rec["choices"]
    with open(path, "w") as f:
        json.dump(rec, f)
    node.start_agent(dict(BASE, driftRepairSeconds=1,
                          profiles={"inference": {"dscp": None, "notsentLowat": 12345}}))
    wait_lowat(node, pod, "12345", timeout_s=8)
    st = pod.state()
    assert not any(c["id"].startswith("dscp.") for c in st["choices"]), st["choices"]
    assert st["profileSpec"]["dscp"] == -1, st
    assert "cannot be rebuilt" in node.agent_log_tail(200000)
