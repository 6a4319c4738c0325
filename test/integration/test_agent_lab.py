"""test_agent_lab.py — aiqos-agent on a lab node (root, network namespaces):
the node's mode follows its pods (idle -> training -> mixed -> training after
the hold -> idle with the original qdisc back), annotation changes re-tune
running pods, the plugin gets the class from the agent, a SIGKILLed agent
converges on restart without duplicates, a restart adopts without touching
the kernel, --cleanup restores the uplink, config hot reload, status/explain,
and Kubernetes Events. The kernel is read back with tc/ip/sysctl, never
through the agent. See agentlab.py for the lab."""

import ipaddress
import json
import os
import random
import signal
import subprocess
import time

import agentlab
import cni
from agentlab import wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
HOLD_S = 2
BASE_CONFIG = {"uplinkRate": "500mbit", "debounceMs": 50, "mixedHoldSeconds": HOLD_S}


def classes_by_handle(node):
    return {c["handle"]: c for c in node.classes()}


def flowids(node):
    return sorted((f["flowid"] for f in node.filters()), key=str)


def uplink_shape(node):
    """(root kind, set of class handles, number of filters) for messages."""
    r = node.root()
    return (r and r["kind"], sorted(classes_by_handle(node)), len(node.filters()))


def assert_mode(node, mode, timeout_s=5):
    st = wait_until(lambda: (lambda s: s if s and s["mode"] == mode else None)(node.status(check=False)),
                    timeout_s, f"mode {mode}")
    return st


def wait_shape(node, pred, what, timeout_s=5):
    try:
        return wait_until(lambda: pred(), timeout_s, what)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n--- agent log ---\n{node.agent_log_tail()}") from None


def htb_training(node):
    r = node.root()
    cl = classes_by_handle(node)
    return r and r["kind"] == "htb" and r["handle"] == "1:" and set(cl) == {"1:1", "1:20", "1:30"}


def htb_mixed(node):
    r = node.root()
    cl = classes_by_handle(node)
    # 1:11: the inference-bulk band (bulkThreshold, on by default)
    return r and r["kind"] == "htb" and set(cl) == {"1:1", "1:10", "1:11", "1:20", "1:30"}


def ip_key(ip):
    """How tc -j shows an IPv4 source match: the address as a number at offset 12."""
    return (int.from_bytes(ipaddress.ip_address(ip).packed, "big"), 12)


def match_key(f):
    m = f.get("match") or {}
    return (int(m["value"], 16), m["off"]) if "value" in m else None


def filters_for(node, ip):
    return [f for f in node.filters() if match_key(f) == ip_key(ip)]


def test_agent_modes_follow_the_pods(node):
    # an original non-default root qdisc to come back on idle
    node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "5:", "pfifo", "limit", "77")
    node.start_agent(BASE_CONFIG)
    assert node.status()["mode"] == "idle"
    assert node.root()["kind"] == "pfifo"

    # training pod -> training: HTB at 99 % of uplinkRate, default + training classes
    train = node.add_pod(TRAIN)
    assert_mode(node, "training")
    wait_shape(node, lambda: htb_training(node) and filters_for(node, train.ip()), "the training tree")
    cl = classes_by_handle(node)
    assert cl["1:1"]["rate_bps"] == 495_000_000, cl["1:1"]
    assert int(cl["1:30"]["prio"]) == 2
    f = filters_for(node, train.ip())
    assert len(f) == 1 and f[0]["flowid"] == "1:30", f

    # inference pod -> mixed at once: inference class prio 0, a src-ip filter per pod
    inf = node.add_pod(INF)
    assert_mode(node, "mixed")
    wait_shape(node, lambda: htb_mixed(node) and filters_for(node, inf.ip()), "the mixed tree")
    cl = classes_by_handle(node)
    assert [int(cl[h]["prio"]) for h in ("1:10", "1:20", "1:30")] == [0, 1, 2], cl
    assert cl["1:10"]["ceil_bps"] == 495_000_000
    assert [f["flowid"] for f in filters_for(node, inf.ip())] == ["1:10"]
    assert [f["flowid"] for f in filters_for(node, train.ip())] == ["1:30"]
    # the training filter was not touched (incremental: same handle)
    handle_train = filters_for(node, train.ip())[0]["handle"]

    # inference pod deleted -> its filter goes at once, mixed is held
    t0 = time.monotonic()
    inf.delete_api()
    wait_shape(node, lambda: not filters_for(node, inf.ip()), "the inference filter removed")
    assert node.status()["mode"] == "mixed"
    assert htb_mixed(node)
    assert_mode(node, "training", timeout_s=HOLD_S + 5)
    assert time.monotonic() - t0 >= HOLD_S - 0.3, "left mixed before the hold time"
    wait_shape(node, lambda: htb_training(node), "back to the training tree")
    assert filters_for(node, train.ip())[0]["handle"] == handle_train

    # mixed again by an annotation change, and back by another one
    inf2 = node.add_pod({})
    assert node.status()["mode"] == "training"
    inf2.annotate(INF)
    assert_mode(node, "mixed")
    wait_shape(node, lambda: htb_mixed(node) and filters_for(node, inf2.ip()), "mixed after the annotation")
    t0 = time.monotonic()
    inf2.annotate({"ai.workload": None})
    wait_shape(node, lambda: not filters_for(node, inf2.ip()), "the filter of the re-annotated pod removed")
    assert_mode(node, "training", timeout_s=HOLD_S + 5)
    assert time.monotonic() - t0 >= HOLD_S - 0.3

    # no annotated pods -> idle: the original root qdisc is back
    train.delete_api()
    assert_mode(node, "idle")
    wait_shape(node, lambda: node.root()["kind"] == "pfifo", "the original qdisc")
    r = node.root()
    assert r["handle"] == "5:" and r["options"]["limit"] == 77, r
    assert not node.classes() and not node.filters()
    assert not os.path.exists(os.path.join(node.state_dir, "uplink.json"))


def test_agent_retunes_running_pod_on_annotation_change(node, fresh_sysctls):
    node.start_agent(BASE_CONFIG)
    pod = node.add_pod(INF)
    s = pod.state()
    assert s["class"] == "inference" and s["annotationsSource"] == "agent", s
    assert cni.read_sysctl(pod.ns, "net.ipv4.tcp_notsent_lowat") == "16384"
    assert cni.read_sysctl(pod.ns, "net.ipv4.tcp_ecn") == "1"
    assert cni.root_qdisc(pod.ns, "eth0")["kind"] == "noqueue"

    # training + an egress limit: sysctls and a shaper on the pod's interface
    pod.annotate({"ai.workload": "training", "kubernetes.io/egress-bandwidth": "20M"})

    def retuned():
        st = pod.settled()
        return st and st["class"] == "training" and st["workload"]["egressBps"] == 20_000_000 and st

    st = wait_shape(node, retuned, "the record rewritten")
    r = cni.root_qdisc(pod.ns, "eth0")
    assert r and r["kind"] == "htb", cni.tc_summary(pod.ns, "eth0")
    cl = cni.tc_classes(pod.ns, "eth0")
    assert [c["rate_bps"] for c in cl] == [20_000_000], cl
    assert cni.read_sysctl(pod.ns, "net.ipv4.tcp_notsent_lowat") == fresh_sysctls["net/ipv4/tcp_notsent_lowat"]
    # the training profile leaves tcp_rmem alone; uplinkRate also shapes the
    # download tree, which bounds training's receive window (node.h DOWNLOAD):
    # 490 Mbit/s (98 %) / 8 x 150 us + 64 KiB. The bound follows the download tree in
    # force (agent_profiles_refresh): when the pod's re-tune ran in the same
    # pass as the node's switch to training, before the tree was applied, a
    # second re-tune brings it
    wait_shape(node, lambda: cni.read_sysctl(pod.ns, "net.ipv4.tcp_rmem") == "4096 74723 74723",
               "training's receive window bounded")
    assert st["annotationsSource"] == "agent" and not st["failure"]

    # an ingress limit: a shaper on the host side of the veth (in the node netns)
    host = pod.host_veth()
    assert node.root(host)["kind"] == "noqueue"
    pod.annotate({"kubernetes.io/ingress-bandwidth": "40M"})
    wait_shape(node, lambda: (st := pod.settled()) and st["workload"]["ingressBps"] == 40_000_000,
               "the ingress limit recorded")
    assert node.root(host)["kind"] == "htb", node.tc_summary(host)
    assert [c["rate_bps"] for c in node.classes(host)] == [40_000_000]

    # the limits removed: the shapers go
    pod.annotate({"kubernetes.io/egress-bandwidth": None, "kubernetes.io/ingress-bandwidth": None})
    wait_shape(node, lambda: (st := pod.settled()) and st["workload"]["egressBps"] == 0
               and st["workload"]["ingressBps"] == 0, "the limits removed from the record")
    assert cni.root_qdisc(pod.ns, "eth0")["kind"] == "noqueue", cni.tc_summary(pod.ns, "eth0")
    assert node.root(host)["kind"] == "noqueue", node.tc_summary(host)

    # the class removed: every sysctl back to what it was before aiqos
    pod.annotate({"ai.workload": None})
    wait_shape(node, lambda: (st := pod.settled()) and st["class"] == "default", "class default in the record")
    assert cni.read_sysctls(pod.ns) == fresh_sysctls

    # the plugin's DEL sees the truth and cleans up
    pod.cni_del()
    assert pod.state() is None

    # Events on the pod
    tuned = wait_until(lambda: node.events("Tuned", pod.name), 5, "Tuned events")
    assert any("class training" in e["message"] for e in tuned), tuned
    degraded = node.events("TuneDegraded", pod.name)
    assert degraded and all(e["type"] == "Warning" for e in degraded), degraded


def test_agent_invalid_workload_is_a_warning_event(node):
    node.start_agent(BASE_CONFIG)
    pod = node.add_pod({"ai.workload": "batch"})
    ev = wait_until(lambda: node.events("InvalidWorkload", pod.name), 5, "InvalidWorkload")
    assert ev[0]["type"] == "Warning" and "batch" in ev[0]["message"], ev
    assert pod.state()["class"] == "default"
    assert node.status()["mode"] == "idle"


def test_agent_failed_retune_backs_off(node, tmp_path):
    """A re-tune the kernel keeps refusing is retried on its backoff (2 s,
    3 s, ...), with one TuneFailed Event per try: not at every rescan of the
    state dir (the agent's own state write after the failure was one, which
    made a retry and an Event every debounce)."""
    # every sysctl the agent would write is a directory: EISDIR, a hard failure
    sysroot = tmp_path / "sys"
    for key in ("tcp_ecn", "tcp_congestion_control", "tcp_notsent_lowat", "tcp_rmem", "tcp_wmem"):
        (sysroot / "net" / "ipv4" / key).mkdir(parents=True)
    node.start_agent(BASE_CONFIG, args=("--sysctl-dir", str(sysroot)))
    pod = node.add_pod(INF)  # the plugin (real /proc/sys) tunes it at ADD
    pod.annotate(TRAIN)      # the agent's re-tune then fails
    wait_until(lambda: node.events("TuneFailed", pod.name), 5, "TuneFailed")
    time.sleep(4)
    failed = node.events("TuneFailed", pod.name)
    tries = sum(int(e.get("count") or 1) for e in failed)
    assert 1 <= tries <= 3, f"{tries} TuneFailed in ~4 s: retries ignore the backoff: {failed}"
    p = [x for x in node.status()["pods"] if x["name"] == pod.name][0]
    assert p["status"] == "failed", p


def test_agent_answers_the_plugin_and_learns_attachments(node):
    node.start_agent(BASE_CONFIG)
    # no runtime annotations: the plugin asks the agent (op pod) at ADD
    pod = node.add_pod(TRAIN)
    s = pod.state()
    assert s["class"] == "training" and s["annotationsSource"] == "agent", s
    assert cni.read_sysctl(pod.ns, "net.ipv4.tcp_ecn") == "1"
    # the agent knows the attachment (op attached / state dir)
    st = node.status()
    p = [x for x in st["pods"] if x["name"] == pod.name][0]
    assert p["class"] == "training" and p["source"] == "api" and p["ips"] == [pod.ip()], p
    assert [a["containerId"] for a in p["attachments"]] == [pod.att.container_id]
    assert p["attachments"][0]["hostIfname"] == pod.host_veth()
    assert p["status"] in ("tuned", "degraded"), p
    # a pod the API does not know (yet): class default now, runtime annotations win
    other = node.add_pod(api=False, runtime_annotations=INF)
    assert other.state()["class"] == "inference" and other.state()["annotationsSource"] == "runtime"
    # DEL: the agent forgets the attachment
    pod.cni_del()
    wait_shape(node, lambda: not [x for x in node.status()["pods"] if x["name"] == pod.name and x["attachments"]],
               "the attachment forgotten")


def test_agent_status_and_explain(node):
    node.start_agent(BASE_CONFIG)
    train = node.add_pod(TRAIN)
    inf = node.add_pod(INF)
    assert_mode(node, "mixed")
    wait_shape(node, lambda: htb_mixed(node) and filters_for(node, inf.ip()), "the mixed tree")
    st = node.status()
    assert st["node"] == node.name and st["ready"] and st["apiConnected"]
    up = st["uplink"]
    assert up["ifname"] == "up0" and up["shape"] == "htb" and up["rateBps"] == 500_000_000
    assert abs(sum(up["shares"].values()) - 1.0) < 1e-9 and up["shares"]["inference"] >= 0.3, up
    assert any("htb" in line and "root" in line for line in up["effective"]), up["effective"]
    names = {p["name"]: p for p in st["pods"]}
    assert names[train.name]["class"] == "training" and names[inf.name]["class"] == "inference"
    # the human form names the mode and the pods
    text = node.aiqosctl("status").stdout
    assert "mixed" in text and inf.name in text
    ex = json.loads(node.aiqosctl("explain", "--json", f"aqt/{inf.name}").stdout)
    assert ex["class"] == "inference"
    assert "egress" in ex["plan"]["text"] or "sysctl" in ex["plan"]["text"], ex["plan"]
    assert "tc " in ex["plan"]["tc"] or "sysctl" in ex["plan"]["tc"], ex["plan"]
    assert len(ex["uplinkItems"]) == 1 and "flowid 1:10" in ex["uplinkItems"][0], ex["uplinkItems"]
    assert any("ai.workload=inference" in w for w in ex["why"]), ex["why"]
    p = node.aiqosctl("explain", "aqt/no-such-pod", check=False)
    assert p.returncode != 0


def test_agent_restart_adopts_without_touching_the_kernel(node):
    node.start_agent(BASE_CONFIG)
    pods = [node.add_api_pod(TRAIN, f"10.77.0.{i}") for i in range(1, 6)]
    pods += [node.add_api_pod(INF, f"10.77.1.{i}") for i in range(1, 4)]
    assert_mode(node, "mixed")
    wait_shape(node, lambda: htb_mixed(node) and len(node.filters()) == 8, "8 filters")
    before = (node.qdiscs(), node.classes(), node.filters())
    node.stop_agent(signal.SIGTERM)
    # SIGTERM leaves the tuning in place
    assert (node.qdiscs(), node.classes(), node.filters()) == before
    mon = subprocess.Popen(cni.in_ns(node.node.name, "tc", "monitor"), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        time.sleep(0.3)
        node.start_agent(BASE_CONFIG)
        assert node.status()["mode"] == "mixed"  # continued from the record, the hold starts anew
        time.sleep(0.5)
    finally:
        os.killpg(mon.pid, signal.SIGTERM)
        out, _ = mon.communicate(timeout=5)
    assert out.strip() == "", f"the restart changed the kernel:\n{out}\n{node.agent_log_tail()}"
    assert (node.qdiscs(), node.classes(), node.filters()) == before


def expected_uplink(node, train_ips, inf_ips):
    """Exactly the planned objects: classes, one filter per pod address, no duplicates."""
    cl = set(classes_by_handle(node))
    fs = node.filters()
    got = {}
    for f in fs:
        got.setdefault(match_key(f), []).append(f["flowid"])
    want_classes = {"1:1", "1:10", "1:11", "1:20", "1:30"} if inf_ips else {"1:1", "1:20", "1:30"}
    want = {ip_key(ip): ["1:30"] for ip in train_ips}
    want.update({ip_key(ip): ["1:10"] for ip in inf_ips})
    return cl == want_classes and got == want


def test_agent_sigkill_during_retune_converges(node):
    rnd = random.Random(int.from_bytes(os.urandom(4), "little"))
    config = dict(BASE_CONFIG, debounceMs=0, mixedHoldSeconds=0)
    slow = {"AIQOS_TEST_FAILPOINTS": "apply-item=sleep:2"}  # failpoint: ~2 ms per uplink object
    node.start_agent(config, env=slow)
    train_ips = [f"10.78.0.{i}" for i in range(1, 31)]
    node.add_api_pods([(TRAIN, ip) for ip in train_ips])
    inf = []  # (pod, ip)
    wait_shape(node, lambda: expected_uplink(node, train_ips, []), "30 training filters", timeout_s=10)
    kills_mid_apply = 0
    for it in range(10):
        # a burst of changes, and a SIGKILL at a random point while it is applied
        for _ in range(rnd.randint(0, 3) if inf else 0):
            p, _ip = inf.pop(rnd.randrange(len(inf)))
            p.delete_api()
        ips = [f"10.78.{1 + it}.{i}" for i in range(1, rnd.randint(60, 160) + 1)]
        inf += list(zip(node.add_api_pods([(INF, ip) for ip in ips]), ips))
        time.sleep(rnd.uniform(0, len(ips) * 0.002))
        node.stop_agent(signal.SIGKILL)
        inf_ips = [ip for _, ip in inf]
        if not expected_uplink(node, train_ips, inf_ips):
            kills_mid_apply += 1  # the kernel as the kill left it: half done
        node.start_agent(config, env=slow)
        try:
            wait_shape(node, lambda: expected_uplink(node, train_ips, inf_ips), f"convergence after kill {it}",
                       timeout_s=15)
        except AssertionError:
            raise AssertionError(f"iteration {it}: {uplink_shape(node)}\n{node.tc_summary()}\n"
                                 f"{node.agent_log_tail()}") from None
    # some kills must have hit an unfinished re-tune, or the test proves nothing
    assert kills_mid_apply >= 3, f"only {kills_mid_apply} of 10 kills hit a re-tune in progress"
    # and everything removed again, without orphans
    for p, _ip in inf:
        p.delete_api()
    wait_shape(node, lambda: expected_uplink(node, train_ips, []), "training only", timeout_s=10)


def test_agent_cleanup_restores_the_original_qdisc(node):
    node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "7:", "bfifo", "limit", "123456")
    node.start_agent(BASE_CONFIG)
    node.add_api_pod(INF, "10.79.0.1")
    assert_mode(node, "inference")
    wait_shape(node, lambda: node.root()["kind"] == "htb", "the inference tree")
    rec = json.load(open(os.path.join(node.state_dir, "uplink.json")))
    assert rec["kind"] == "bfifo" and rec["default"] is False, rec
    assert node.stop_agent(signal.SIGTERM) == 0
    assert node.root()["kind"] == "htb"  # left in place by a graceful stop
    p = node.cleanup_uplink()
    assert p.returncode == 0, p.stderr
    r = node.root()
    assert r["kind"] == "bfifo" and r["handle"] == "7:" and r["options"]["limit"] == 123456, r
    assert not node.classes() and not node.filters()
    assert not os.path.exists(os.path.join(node.state_dir, "uplink.json"))
    # idempotent
    assert node.cleanup_uplink().returncode == 0


def test_agent_config_hot_reload(node):
    node.start_agent(BASE_CONFIG)
    node.add_api_pod(TRAIN, "10.80.0.1")
    wait_shape(node, lambda: htb_training(node), "the training tree")
    assert classes_by_handle(node)["1:1"]["rate_bps"] == 495_000_000
    # a valid change: the rate follows
    node.write_config(dict(BASE_CONFIG, uplinkRate="200mbit"))
    wait_shape(node, lambda: classes_by_handle(node)["1:1"]["rate_bps"] == 198_000_000, "the new rate")
    # an invalid one: the old config stays, status says why
    node.write_config(dict(BASE_CONFIG, inferenceShare=1.5))
    st = wait_until(lambda: (lambda s: s if s["config"]["error"] else None)(node.status()), 5, "config error")
    assert "inferenceShare" in st["config"]["error"], st["config"]
    assert classes_by_handle(node)["1:1"]["rate_bps"] == 198_000_000
    assert node.agent.poll() is None
    # SIGHUP reloads too
    node.write_config(dict(BASE_CONFIG, uplinkRate="300mbit"))
    os.killpg(node.agent.pid, signal.SIGHUP)
    wait_shape(node, lambda: classes_by_handle(node)["1:1"]["rate_bps"] == 297_000_000, "the rate after SIGHUP")
    assert node.status()["config"]["error"] == ""


def test_agent_bad_config_at_start_exits(node):
    node.write_config('{"uplinkRate": "fast"}')
    node.start_agent(wait_ready=False)
    assert node.agent.wait(10) == 1
    assert "uplinkRate" in node.agent_log_tail(), node.agent_log_tail()


def test_agent_unreachable_netns_is_an_event_and_a_metric(node):
    """A running pod whose netns path the agent cannot open (cri-dockerd's
    /proc/<pid>/ns/net, an agent without hostPID) is not silently stale: a
    NetnsUnreachable Event naming the path and the way out, the gauge
    aiqos_pods_netns_unreachable, retries; once reachable it is tuned."""
    node.start_agent(BASE_CONFIG)
    pod = node.add_pod(INF)
    path = pod.att.state_path()
    with open(path) as f:
        rec = json.load(f)
    good = rec["netns"]
    gone = "/proc/4194305/ns/net"  # above any pid_max: no process has it here

    def write_netns(ns_path):
        rec["netns"] = ns_path
        with open(path + ".t", "w") as f:
            json.dump(rec, f)
        os.rename(path + ".t", path)

    write_netns(gone)
    pod.annotate(TRAIN)
    ev = wait_until(lambda: node.events("NetnsUnreachable", pod.name), 10, "a NetnsUnreachable Event")
    assert ev[0]["type"] == "Warning" and gone in ev[0]["message"] and "hostPID" in ev[0]["message"], ev
    assert "aiqos_pods_netns_unreachable 1" in node.metrics()
    p = [x for x in node.status()["pods"] if x["name"] == pod.name][0]
    assert p["status"] == "failed", p
    # reachable again (the agent retries on its backoff): tuned, the gauge back to 0
    write_netns(good)
    wait_until(lambda: (st := pod.settled()) and st["class"] == "training", 15, "the re-tune after the netns came back")
    wait_until(lambda: "aiqos_pods_netns_unreachable 0" in node.metrics(), 10, "the gauge back to 0")


def test_agent_metrics_and_health(node):
    node.start_agent(BASE_CONFIG)
    node.add_api_pod(INF, "10.81.0.1")
    assert_mode(node, "inference")

    def get(path):
        status, body = node.http_get(path)
        return status, body.decode()

    assert get("/healthz")[0] == 200
    assert get("/readyz")[0] == 200
    status, text = get("/metrics")
    assert status == 200
    assert 'aiqos_node_mode{mode="inference"} 1' in text, text[:2000]
    assert 'aiqos_pods{class="inference"} 1' in text
    assert "aiqos_retunes_total" in text and "aiqos_uplink_queue_backlog_bytes" in text


def test_agent_drift_repair(node):
    node.start_agent(dict(BASE_CONFIG, driftRepairSeconds=1))
    node.add_api_pods([(TRAIN, "10.82.0.1"), (TRAIN, "10.82.0.2"), (INF, "10.82.0.3")])
    pod = node.add_pod({"ai.workload": "inference", "kubernetes.io/egress-bandwidth": "30M"})
    assert_mode(node, "mixed")
    wait_shape(node, lambda: len(node.filters()) == 4 and htb_mixed(node), "the mixed tree")
    wait_shape(node, lambda: cni.root_qdisc(pod.ns, "eth0")["kind"] == "htb", "the pod's shaper")
    before = sorted((f["handle"], f["flowid"]) for f in node.filters())
    # someone deletes a filter, changes a class and adds a filter at aiqos's prio
    victim = filters_for(node, "10.82.0.1")[0]
    node.sh("tc", "filter", "del", "dev", "up0", "parent", "1:", "prio", "10", "handle", victim["handle"], "u32")
    node.sh("tc", "class", "change", "dev", "up0", "parent", "1:1", "classid", "1:10", "htb", "rate", "1mbit",
            "ceil", "2mbit")
    node.sh("tc", "filter", "add", "dev", "up0", "parent", "1:", "prio", "10", "protocol", "ip", "u32", "match",
            "ip", "src", "10.82.9.9/32", "flowid", "1:10")
    # and the pod's shaper is deleted in its netns
    cni.sh(*cni.in_ns(pod.ns, "tc", "qdisc", "del", "dev", "eth0", "root"))
    wait_shape(node, lambda: sorted((f["handle"], f["flowid"]) for f in node.filters()) == before,
               "the filters repaired", timeout_s=6)
    wait_shape(node, lambda: classes_by_handle(node)["1:10"]["ceil_bps"] == 495_000_000, "the class repaired")
    wait_shape(node, lambda: cni.root_qdisc(pod.ns, "eth0")["kind"] == "htb", "the pod's shaper repaired")
    assert [c["rate_bps"] for c in cni.tc_classes(pod.ns, "eth0")] == [30_000_000]


def test_agent_follows_the_default_route_to_another_uplink(node):
    # a second uplink into the fabric
    a, b = f"aqu{os.urandom(4).hex()}", f"aqf{os.urandom(4).hex()}"
    cni.sh("ip", "link", "add", a, "numtxqueues", "1", "numrxqueues", "1", "type", "veth", "peer", "name", b,
           "numtxqueues", "1", "numrxqueues", "1")  # one queue, as up0: HTB at the root
    cni.sh("ip", "link", "set", a, "netns", node.node.name)
    cni.sh("ip", "link", "set", b, "netns", node.fabric.name)
    node.sh("ip", "link", "set", a, "name", "up1")
    cni.sh("ip", "-n", node.fabric.name, "link", "set", b, "name", "fab1")
    node.sh("ip", "addr", "add", "10.83.0.2/24", "dev", "up1")
    node.sh("ip", "link", "set", "up1", "up")
    cni.sh("ip", "-n", node.fabric.name, "addr", "add", "10.83.0.1/24", "dev", "fab1")
    cni.sh("ip", "-n", node.fabric.name, "link", "set", "fab1", "up")
    node.start_agent(BASE_CONFIG)
    node.add_api_pod(TRAIN, "10.83.1.1")
    wait_shape(node, lambda: htb_training(node), "the tree on up0")
    node.sh("ip", "route", "replace", "default", "via", "10.83.0.1", "dev", "up1")
    wait_shape(node, lambda: (node.root("up1") or {}).get("kind") == "htb", "the tree on up1")
    assert node.root("up0")["kind"] == "noqueue", node.tc_summary("up0")
    st = node.status()
    assert st["uplink"]["ifname"] == "up1" and st["mode"] == "training", st["uplink"]
    rec = json.load(open(os.path.join(node.state_dir, "uplink.json")))
    assert rec["ifname"] == "up1", rec
    # the uplink vanishes with the only default route: nothing to tune, no crash
    node.sh("ip", "link", "del", "up1")
    wait_shape(node, lambda: node.status()["uplink"]["ifname"] == "", "no uplink")
    assert node.agent.poll() is None
    # a default route again: tuned again, the original recorded anew
    node.sh("ip", "route", "add", "default", "via", f"{node.uplink_net}.1", "dev", "up0")
    wait_shape(node, lambda: node.status()["uplink"]["ifname"] == "up0" and htb_training(node), "up0 again")
    assert json.load(open(os.path.join(node.state_dir, "uplink.json")))["ifname"] == "up0"


def test_agent_sd_notify_ready_status_watchdog(node):
    import socket
    path = os.path.join(node.dir, "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    msgs = []

    def drain():
        while True:
            try:
                msgs.append(s.recv(4096).decode())
            except socket.timeout:
                return
    try:
        node.start_agent(BASE_CONFIG, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
        node.add_api_pod(TRAIN, "10.84.0.1")
        assert_mode(node, "training")
        time.sleep(0.6)
        drain()
        text = "\n".join(msgs)
        assert "READY=1" in text, msgs
        assert "STATUS=mode training on up0" in text, msgs
        assert "WATCHDOG=1" in text, msgs
        msgs.clear()
        node.stop_agent(signal.SIGTERM)
        drain()
        assert any("STOPPING=1" in m for m in msgs), msgs
    finally:
        s.close()


def test_agent_once_exits_after_the_first_reconcile(node):
    node.add_api_pod(INF, "10.85.0.1")
    node.start_agent(BASE_CONFIG, args=("--once",), wait_ready=False)
    assert node.agent.wait(15) == 0, node.agent_log_tail()
    assert node.root()["kind"] == "htb"  # tuned, and left in place
    assert node.cleanup_uplink().returncode == 0
    assert node.root()["kind"] == "noqueue"


KINDNET = {"cniVersion": "0.3.1", "name": "kindnet", "plugins": [
    {"type": "ptp", "ipMasq": False, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": True}}]}


def conflist_types(path):
    with open(path) as f:
        return [p["type"] for p in json.load(f)["plugins"]]


def test_agent_install_uninstall_and_rechain(node):
    conf, bindir = os.path.join(node.dir, "net.d"), os.path.join(node.dir, "bin")
    os.makedirs(conf)
    os.makedirs(bindir)
    primary = os.path.join(conf, "10-kindnet.conflist")
    with open(primary, "w") as f:
        json.dump(KINDNET, f)
    agent = os.path.join(agentlab.cni_build(), "bin", "aiqos-agent")
    plugin = os.path.join(agentlab.cni_build(), "bin", "aiqos")
    p = cni.sh(agent, "install", "--cni-conf-dir", conf, "--cni-bin-dir", bindir, "--plugin-src", plugin)
    owned = os.path.join(conf, "00-aiqos-10-kindnet.conflist")
    assert conflist_types(owned) == ["ptp", "portmap", "aiqos"], p.stderr
    assert open(os.path.join(bindir, "aiqos"), "rb").read() == open(plugin, "rb").read()
    # the agent keeps it chained when the primary CNI rewrites its file (atomic rename, like kindnetd)
    node.start_agent(BASE_CONFIG, args=("--cni-conf-dir", conf, "--cni-bin-dir", bindir, "--plugin-src", plugin))
    changed = dict(KINDNET, plugins=KINDNET["plugins"][:1] + [{"type": "bandwidth", "capabilities":
                                                                  {"bandwidth": True}}])
    with open(primary + ".new", "w") as f:
        json.dump(changed, f)
    os.rename(primary + ".new", primary)
    wait_shape(node, lambda: conflist_types(owned) == ["ptp", "bandwidth", "aiqos"], "the owned copy re-chained")
    node.stop_agent(signal.SIGTERM)
    # uninstall: the owned copy goes, the primary stays, the binary on request
    p = cni.sh("ip", "netns", "exec", node.node.name, agent, "uninstall", "--cni-conf-dir", conf, "--cni-bin-dir",
               bindir, "--remove-binary", "--state-dir", node.state_dir)
    assert sorted(os.listdir(conf)) == ["10-kindnet.conflist"], p.stderr
    assert not os.path.exists(os.path.join(bindir, "aiqos"))
    # usage errors
    p = cni.sh(agent, "install", check=False)
    assert p.returncode == 2 and "--cni-conf-dir" in p.stderr
    p = cni.sh(agent, "--bogus", check=False)
    assert p.returncode == 2
    p = cni.sh(agent, check=False, timeout=10) if not os.environ.get("NODE_NAME") else None
    assert p is None or (p.returncode == 2 and "node name" in p.stderr)
    assert cni.sh(agent, "--version").stdout.startswith("aiqos-agent ")
