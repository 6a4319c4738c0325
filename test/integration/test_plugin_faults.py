"""test_plugin_faults.py — fault injection around the plugin:
the netns or the veth vanishing before ADD and between its plan and its
apply, the plugin SIGKILLed at each point of ADD (test failpoints) and at
random ones then DEL or GC, a read-only or full state directory under both
failure policies, a 20-pod ADD/DEL storm, the agent down at pod creation then
correcting the pod, CHECK and DEL racing an agent re-tune of the same pod,
the agent killed between a pod's apply and its record, the agent recovering
a plugin killed inside DEL or ADD, and an ADD with the state dir full whose
record the agent writes once space is back, and the agent never undoing an
ADD that committed while it waited for the lock. The kernel and the
state directory are read back independently of the plugin. (Drift — a qdisc
replaced behind our back — is in test_plugin_check.py and test_agent_lab.py.)"""

import concurrent.futures as cf
import contextlib
import json
import os
import random
import signal
import subprocess
import time

import pytest

import cni
from agentlab import wait_until

ANN = {"ai.workload": "inference"}
BW = {"egressRate": 10_000_000, "ingressRate": 10_000_000}


@pytest.fixture
def pod(lab):
    """A pod with a veth from ptp and no aiqos yet."""
    return lab.plain_pod(ANN, BW)


def _state_files(lab):
    """Everything in stateDir but the lock and the learned-capabilities file."""
    return [f for f in lab.state_dir_entries() if f.endswith(".json") or ".tmp." in f]


def _qdisc_kinds(ns, dev):
    return sorted(q["kind"] for q in cni.tc_qdiscs(ns, dev))


def assert_untouched(lab, pod, host):
    assert _state_files(lab) == [], f"state left behind: {lab.state_dir_entries()}"
    ns = pod.netns.name
    assert _qdisc_kinds(ns, "eth0") == ["noqueue"], cni.tc_summary(ns, "eth0")
    assert cni.tc_classes(ns, "eth0") == [], cni.tc_summary(ns, "eth0")
    assert _qdisc_kinds(None, host) == ["noqueue"], cni.tc_summary(None, host)
    assert cni.read_sysctls(ns) == pod.baseline_sysctls


@contextlib.contextmanager
def mounted(*argv_list):
    """Run mount commands; unmount their target (the last argument of the
    first) afterwards, also when the test fails."""
    target = argv_list[0][-1]
    try:
        for argv in argv_list:
            cni.sh(*argv)
        yield target
    finally:
        cni.sh("umount", "-l", target, check=False)


# ---------------------------------------------------------------------------
# kernel faults


def test_netns_gone_before_add_is_4_naming_cni_netns(lab, pod):
    host = pod.host_veth()
    path = pod.netns.path
    pod.netns.delete()
    for policy in ("open", "closed"):
        r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy=policy), netns=path, timeout=10)
        e = r.assert_error(4)
        assert "CNI_NETNS" in r.error_text() and path in r.error_text(), e
        assert r.elapsed_s < 2, r.describe()
        assert _state_files(lab) == [], lab.state_dir_entries()
    assert cni.wait_link_gone(None, host), f"host veth {host} outlived its netns"


@pytest.mark.parametrize("policy", ["open", "closed"])
def test_host_veth_deleted_before_add(lab, pod, policy):
    host = pod.host_veth()
    cni.sh("ip", "link", "del", host)
    assert cni.link(pod.netns.name, "eth0") is None
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy=policy), timeout=10)
    assert r.elapsed_s < 2, r.describe()
    if policy == "closed":
        e = r.assert_error()
        assert "eth0" in r.error_text(), e
        assert _state_files(lab) == [], lab.state_dir_entries()
    else:
        r.assert_ok()
        assert r.json == pod.result, f"fail-open must pass prevResult through{r.describe()}"
        s = pod.state()
        assert s is not None and s["failure"] and "eth0" in s["failure"], s
        assert "failurePolicy open" in lab.log_tail()
        # DEL of what is gone succeeds and forgets the attachment
        lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10).assert_ok(output=False)
        assert _state_files(lab) == [], lab.state_dir_entries()
    assert _qdisc_kinds(pod.netns.name, "lo") == ["noqueue"]


def _add_stalled_before_apply(lab, pod, conf, fault):
    """ADD that stalls between its plan and its apply (failpoint); fault()
    runs in that window. Returns the ADD's PluginRun."""
    marker = "failpoint=add-before-apply"
    seen = lab.log_tail(10**7).count(marker)
    with cf.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(lab.run_aiqos, pod, "ADD", conf, timeout=10,
                        env_extra={"AIQOS_TEST_FAILPOINTS": "add-before-apply=sleep:400"})
        wait_until(lambda: lab.log_tail(10**7).count(marker) > seen, 5, "ADD stalled before its apply")
        fault()
        return fut.result()


@pytest.mark.parametrize("policy", ["open", "closed"])
def test_veth_deleted_between_plan_and_apply(lab, pod, policy):
    host = pod.host_veth()
    r = _add_stalled_before_apply(lab, pod, lab.add_conf(pod, failurePolicy=policy),
                                  lambda: cni.sh("ip", "link", "del", host))
    assert r.elapsed_s < 3, r.describe()
    if policy == "closed":
        r.assert_error(100)
        assert _state_files(lab) == [], lab.state_dir_entries()
    else:
        r.assert_ok()
        assert r.json == pod.result, r.describe()
        s = pod.state()
        assert s and not s.get("pending") and s["failure"], s
        lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10).assert_ok(output=False)
        assert _state_files(lab) == [], lab.state_dir_entries()
    assert cni.link(None, host) is None


def test_netns_deleted_between_plan_and_apply(lab, pod):
    """The netns's name goes mid-ADD: the plugin holds the netns open, so
    the ADD finishes on it; the netns (and the veth) die when it exits, and
    DEL with the path gone forgets the attachment."""
    host = pod.host_veth()
    path = pod.netns.path
    r = _add_stalled_before_apply(lab, pod, lab.add_conf(pod), pod.netns.delete)
    r.assert_ok()
    s = pod.state()
    assert s and not s.get("pending") and not s["failure"], s
    assert cni.wait_link_gone(None, host), f"host veth {host} outlived its netns"
    lab.run_aiqos(pod, "DEL", lab.add_conf(pod), netns=path, timeout=10).assert_ok(output=False)
    assert _state_files(lab) == [], lab.state_dir_entries()


# ---------------------------------------------------------------------------
# process faults


def assert_clean_after_del(lab, pod, host, what):
    """After DEL: no state file, no temp file, nothing of ours on either side."""
    assert _state_files(lab) == [], f"{what}: {lab.state_dir_entries()}"
    assert _qdisc_kinds(None, host) == ["noqueue"], f"{what}: {cni.tc_summary(None, host)}"
    assert _qdisc_kinds(pod.netns.name, "eth0") == ["noqueue"], f"{what}: {cni.tc_summary(pod.netns.name, 'eth0')}"
    assert cni.tc_classes(None, host) == [] and cni.tc_classes(pod.netns.name, "eth0") == []


def test_plugin_killed_mid_add_then_del_leaves_nothing(lab, pod):
    """SIGKILL at random points of ADD (then DEL, as a runtime does after a
    failed ADD): whatever the kill hit, DEL leaves nothing behind."""
    host = pod.host_veth()
    conf = json.dumps(lab.add_conf(pod)).encode()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
    env.update(CNI_COMMAND="ADD", CNI_CONTAINERID=pod.container_id, CNI_NETNS=pod.netns.path, CNI_IFNAME="eth0",
               CNI_ARGS=pod.cni_args, CNI_PATH=os.path.dirname(lab.plugin))
    rng = random.Random(7)
    outcomes = {"killed": 0, "finished": 0, "state_after_kill": 0, "pending_after_kill": 0, "tc_after_kill": 0}
    for i in range(20):
        p = subprocess.Popen([lab.plugin], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
        p.stdin.write(conf)
        p.stdin.close()
        time.sleep(rng.uniform(0, 0.002) if i < 18 else 0.0)
        p.send_signal(signal.SIGKILL)
        rc = p.wait(10)
        outcomes["killed" if rc == -signal.SIGKILL else "finished"] += 1
        s = pod.state()
        outcomes["state_after_kill"] += s is not None
        outcomes["pending_after_kill"] += bool(s and s.get("pending"))
        outcomes["tc_after_kill"] += _qdisc_kinds(None, host) != ["noqueue"]
        d = lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10)
        d.assert_ok(output=False)
        assert_clean_after_del(lab, pod, host, f"kill {i} {outcomes}{d.describe()}")
    assert outcomes["killed"] > 0, outcomes
    print("kill outcomes:", outcomes)
    # and a normal ADD afterwards works
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod), timeout=10)
    r.assert_ok()
    assert cni.root_qdisc(None, host)["kind"] == "htb", cni.tc_summary(None, host)
    lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10).assert_ok(output=False)
    assert_clean_after_del(lab, pod, host, "DEL after a normal ADD")
    # the runtime's teardown (the primary plugin's DEL) leaves nothing at all
    for r in pod.delete():
        r.assert_ok(output=False)
    assert cni.link(None, host) is None


# Every point of ADD where a crash leaves something different behind: what is
# on disk and in the kernel right after the kill (pending = an intent record).
KILL_POINTS = {
    "state-before-rename": dict(state=None, tmp=True, tc=False),  # the intent record's temp file
    "add-before-apply": dict(state="pending", tmp=False, tc=False),
    "add-after-apply": dict(state="pending", tmp=False, tc=True),
    "add-after-save": dict(state="done", tmp=False, tc=True),
}
LIBRARY_POINTS = {"state-before-rename"}  # in shared/ (failpoint_quiet): armed, never logged


@pytest.mark.parametrize("point", list(KILL_POINTS))
@pytest.mark.parametrize("cleanup", ["DEL", "GC"])
def test_plugin_killed_at_each_point_of_add(lab, pod, point, cleanup):
    want = KILL_POINTS[point]
    host = pod.host_veth()
    r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod), env_extra={"AIQOS_TEST_FAILPOINTS": f"{point}=kill"},
                      timeout=10)
    assert r.rc == -signal.SIGKILL, r.describe()
    s = pod.state()
    tmp = [f for f in lab.state_dir_entries() if ".tmp." in f]
    assert bool(tmp) == want["tmp"], lab.state_dir_entries()
    if want["state"] is None:
        assert s is None, s
    else:
        assert s is not None and bool(s.get("pending")) == (want["state"] == "pending"), s
    assert (_qdisc_kinds(None, host) != ["noqueue"]) == want["tc"], cni.tc_summary(None, host)
    if want["state"] == "pending":
        # CHECK says the ADD never finished
        c = lab.run_aiqos(pod, "CHECK", lab.add_conf(pod), timeout=10)
        e = c.assert_error(102)
        assert "did not finish" in e["msg"], c.describe()
    if cleanup == "DEL":
        d = lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10)
    else:  # the runtime forgot the attachment: GC with it not among the valid ones
        d = lab.run_aiqos(pod, "GC", lab.add_conf(pod, cniVersion="1.1.0", **{"cni.dev/valid-attachments": []}),
                          timeout=10)
    d.assert_ok(output=False)
    if cleanup == "GC":
        # GC leaves the pod side to the netns (it may be gone); the host side and the files go
        assert _state_files(lab) == [], lab.state_dir_entries()
        assert _qdisc_kinds(None, host) == ["noqueue"], cni.tc_summary(None, host)
        return
    assert_clean_after_del(lab, pod, host, f"{point} then DEL")
    tail = lab.log_tail(20000)
    if point in LIBRARY_POINTS:
        # the library never logs: the plugin said at start which points are armed
        assert "test failpoints armed" in tail and f"{point}=kill" in tail, tail[-2000:]
    else:
        assert "test failpoint reached" in tail and f"failpoint={point}" in tail, tail[-2000:]
    # the next ADD of the same attachment works normally
    lab.run_aiqos(pod, "ADD", lab.add_conf(pod), timeout=10).assert_ok()
    assert not pod.state().get("pending") and not pod.state()["failure"], pod.state()
    lab.run_aiqos(pod, "CHECK", lab.add_conf(pod), timeout=10).assert_ok(output=False)


def _readonly(lab):
    os.makedirs(lab.state_dir, exist_ok=True)
    return mounted(["mount", "--bind", lab.state_dir, lab.state_dir],
                   ["mount", "-o", "remount,bind,ro", lab.state_dir])


def _fill(d):
    fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 4096)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x")
    finally:
        os.close(fd)


def _full(lab):
    os.makedirs(lab.state_dir, exist_ok=True)

    @contextlib.contextmanager
    def cm():
        with mounted(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "aqt-full", lab.state_dir]):
            _fill(lab.state_dir)
            yield
    return cm()


STATE_FAULTS = {"readonly": (_readonly, "Read-only file system"), "full": (_full, "No space left on device")}


@pytest.mark.parametrize("fault", sorted(STATE_FAULTS))
def test_state_dir_fault_fail_open(lab, pod, fault):
    make, why = STATE_FAULTS[fault]
    with make(lab):
        r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy="open"), timeout=10)
        r.assert_ok()
        assert r.json == pod.result, r.describe()
        log = lab.log_tail(20000)
        err = [l for l in log.splitlines() if "cannot save state" in l]
        assert err and lab.state_dir in err[-1] and why in err[-1], log
        # the pod is tuned all the same (fail-open keeps the tuning)
        assert cni.read_sysctl(pod.netns.name, "net.ipv4.tcp_ecn") == "1"
        assert [f for f in os.listdir(lab.state_dir) if f.endswith(".json") or ".tmp." in f] == []
    # the kernel state without a record: DEL without state is a no-op success
    lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10).assert_ok(output=False)


@pytest.mark.parametrize("fault", sorted(STATE_FAULTS))
def test_state_dir_fault_fail_closed(lab, pod, fault):
    make, why = STATE_FAULTS[fault]
    host = pod.host_veth()
    with make(lab):
        r = lab.run_aiqos(pod, "ADD", lab.add_conf(pod, failurePolicy="closed"), timeout=10)
        e = r.assert_error(102)
        assert lab.state_dir in r.error_text() and why in r.error_text(), e
        assert [f for f in os.listdir(lab.state_dir) if f.endswith(".json") or ".tmp." in f] == []
    assert_untouched(lab, pod, host)


def test_del_with_unremovable_state_succeeds(lab, pod):
    """Our bookkeeping never fails a DEL (libcni stops a chain's DEL at the
    first error: the primary's DEL would never run). The tc objects go, the
    record that could not be removed stays, logged, and GC removes it later."""
    host = pod.host_veth()
    lab.run_aiqos(pod, "ADD", lab.add_conf(pod), timeout=10).assert_ok()
    assert pod.state() is not None
    with _readonly(lab):
        d = lab.run_aiqos(pod, "DEL", lab.add_conf(pod), timeout=10)
        d.assert_ok(output=False)
        log = lab.log_tail(20000)
        kept = [l for l in log.splitlines() if "state file not removed" in l]
        assert kept and "Read-only file system" in kept[-1], log
        assert _qdisc_kinds(None, host) == ["noqueue"], cni.tc_summary(None, host)
        assert _qdisc_kinds(pod.netns.name, "eth0") == ["noqueue"], cni.tc_summary(pod.netns.name, "eth0")
    assert len([f for f in _state_files(lab) if f.endswith(".json")]) == 1, lab.state_dir_entries()
    # a second DEL (the runtime retrying) or GC finishes the bookkeeping
    g = lab.run_aiqos(pod, "GC", lab.add_conf(pod, cniVersion="1.1.0", **{"cni.dev/valid-attachments": []}),
                      timeout=10)
    g.assert_ok(output=False)
    assert_clean_after_del(lab, pod, host, "DEL on a read-only state dir, then GC")


def test_add_del_storm_of_20(lab):
    n = 20
    atts = [lab.attachment(annotations={"ai.workload": ("inference", "training", "default")[i % 3]}, bandwidth=BW)
            for i in range(n)]
    # the primary plugin first (host-local serialises on its own lock)
    with cf.ThreadPoolExecutor(max_workers=n) as ex:
        list(ex.map(lambda a: a.add(check=False), atts))
    runs = [a.aiqos_add_run for a in atts]
    for a, r in zip(atts, runs):
        assert r is not None, a.container_id
        r.assert_ok()
    states = lab.state_jsons()
    assert len(states) == n, lab.state_dir_entries()
    assert [f for f in lab.state_dir_entries() if ".tmp." in f] == []
    for i, a in enumerate(atts):
        with open(a.state_path()) as f:
            s = json.load(f)  # complete JSON, not a torn write
        assert s["containerId"] == a.container_id and s["ifname"] == "eth0", s
        assert s["class"] == ("inference", "training", "default")[i % 3], s
        assert s["choices"] and not s.get("failure"), s
        assert {c["handle"]: c for c in cni.tc_classes(None, a.host_veth())}["1:10"]["rate_bps"] == 10_000_000
    hosts = [a.host_veth() for a in atts]
    with cf.ThreadPoolExecutor(max_workers=n) as ex:
        dels = list(ex.map(lambda a: a.delete(only_aiqos=True)[0], atts))
    for r in dels:
        r.assert_ok(output=False)
    assert _state_files(lab) == [], lab.state_dir_entries()
    for a, h in zip(atts, hosts):
        assert _qdisc_kinds(None, h) == ["noqueue"], cni.tc_summary(None, h)
        assert _qdisc_kinds(a.netns.name, "eth0") == ["noqueue"], cni.tc_summary(a.netns.name, "eth0")


# ---------------------------------------------------------------------------
# the agent down at pod creation


def test_agent_down_at_add_then_corrects_the_pod(node, fresh_sysctls):
    assert not os.path.exists(node.socket)
    pod = node.add_pod(ANN)  # in the API as inference; no runtime annotations
    run = pod.att.aiqos_add_run
    assert run.elapsed_s < 1.0, run.describe()
    s = pod.state()
    assert s["class"] == "default", s
    assert cni.read_sysctls(pod.ns) == fresh_sysctls
    t0 = time.monotonic()
    node.start_agent({"uplinkRate": "500mbit", "debounceMs": 50, "mixedHoldSeconds": 2})

    def corrected():
        st = pod.state()
        return (st["class"] == "inference" and cni.read_sysctl(pod.ns, "net.ipv4.tcp_ecn") == "1"
                and cni.read_sysctl(pod.ns, "net.ipv4.tcp_notsent_lowat") == "16384" and st)

    st = wait_until(corrected, 10, "the agent to re-tune the pod as inference")
    assert time.monotonic() - t0 < 10
    assert st["annotationsSource"] == "agent" and not st["failure"], st
    assert cni.root_qdisc(pod.ns, "eth0")["kind"] == "noqueue"
    pod.cni_del()
    assert pod.state() is None


# ---------------------------------------------------------------------------
# the plugin and the agent on the same interface


def test_plugin_and_agent_never_interleave_on_one_pod(node):
    """The agent re-tunes a pod (an ingress limit: a shaper on its host veth)
    and stalls between applying and recording it (failpoint); CHECK and DEL
    of the same pod arrive in that window. They wait for its attachment lock
    (at most 800 ms, longer than the stall):
    CHECK sees the kernel and the record agree, DEL removes what the agent
    applied and its record stays removed (no EBUSY/EEXIST, no record
    resurrected by the agent's late write)."""
    stall_ms = 450
    node.start_agent({"uplinkRate": "500mbit", "debounceMs": 0, "mixedHoldSeconds": 0},
                     env={"AIQOS_TEST_FAILPOINTS": f"agent-retune-applied=sleep:{stall_ms}"})
    pod = node.add_pod(ANN)
    host = pod.host_veth()
    assert node_kinds(node, host) == ["noqueue"]

    def stalled(n):
        # the reached line ("failpoint=<name>"), not the one saying it is armed
        return node.agent_log_tail(200000).count("failpoint=agent-retune-applied") >= n

    # CHECK in the window: the shaper is in the kernel, not yet in the record
    pod.annotate({"kubernetes.io/ingress-bandwidth": "40M"})
    wait_until(lambda: stalled(1), 10, "the agent stalled after applying")
    assert "htb" in node_kinds(node, host), node.tc_summary(host)
    c = pod.att.check()
    c.assert_ok(output=False)
    assert c.elapsed_s > 0.1, f"CHECK did not wait for the agent's re-tune{c.describe()}"
    assert pod.state()["workload"]["ingressBps"] == 40_000_000, pod.state()

    # DEL in the window of the next re-tune
    pod.annotate({"kubernetes.io/ingress-bandwidth": "80M"})
    wait_until(lambda: stalled(2), 10, "the agent stalled after applying again")
    d = pod.att.delete(only_aiqos=True)[0]
    d.assert_ok(output=False)
    assert d.elapsed_s > 0.1, f"DEL did not wait for the agent's re-tune{d.describe()}"
    time.sleep(stall_ms / 1000 + 0.5)
    assert pod.state() is None, f"the record came back after DEL: {pod.state()}"
    assert node_kinds(node, host) == ["noqueue"], node.tc_summary(host)
    assert _qdisc_kinds(pod.ns, "eth0") == ["noqueue"], cni.tc_summary(pod.ns, "eth0")
    log = node.agent_log_tail(200000) + node.lab.log_tail(200000)
    for bad in ("File exists", "Device or resource busy", "EBUSY", "EEXIST"):
        assert bad not in log, log
    # the agent forgot the pod's attachment
    wait_until(lambda: not any(p["name"] == pod.name and p.get("attachments")
                               for p in (node.status()["pods"] or [])), 10, "the agent to forget the attachment")


def test_agent_killed_between_pod_apply_and_record_converges(node):
    """The agent dies (failpoint) after it put a pod's new shaper in the
    kernel and before it recorded it; restarted, it re-tunes the pod from the
    record and the pod's wish: one shaper, the record right, CHECK passes."""
    config = {"uplinkRate": "500mbit", "debounceMs": 0, "mixedHoldSeconds": 0}
    node.start_agent(config, env={"AIQOS_TEST_FAILPOINTS": "agent-retune-applied=kill"})
    pod = node.add_pod(ANN)
    host = pod.host_veth()
    pod.annotate({"kubernetes.io/ingress-bandwidth": "40M"})
    wait_until(lambda: node.agent.poll() is not None, 10, "the agent killed at its failpoint")
    assert node.agent.returncode == -signal.SIGKILL, node.agent_log_tail()
    assert "htb" in node_kinds(node, host), node.tc_summary(host)
    assert pod.state()["workload"]["ingressBps"] == 0, pod.state()
    node.start_agent(config)
    wait_until(lambda: (st := pod.settled()) and st["workload"]["ingressBps"] == 40_000_000, 10, "the re-tune recorded")
    assert node_kinds(node, host) == ["bfifo", "htb"], node.tc_summary(host)
    assert [c["rate_bps"] for c in node.classes(host)] == [40_000_000], node.tc_summary(host)
    assert not pod.state()["failure"], pod.state()
    pod.att.check().assert_ok(output=False)
    pod.cni_del()
    assert pod.state() is None, pod.state()
    assert [f for f in node.lab.state_dir_entries() if "@" in f] == [], node.lab.state_dir_entries()


def node_kinds(node, dev):
    return sorted(q["kind"] for q in node.qdiscs(dev))


def test_add_with_state_dir_full_gets_its_record_from_the_agent(node):
    """ADD while the stateDir is full: the pod keeps its network and its
    tuning (fail-open), the record goes to the agent with the "attached"
    notification (status and a gauge show it waiting); once space is back
    the agent writes it, and from then on the pod is an attachment like any
    other: an annotation flip re-tunes it, CHECK passes, DEL cleans up."""
    config = {"uplinkRate": "500mbit", "debounceMs": 0, "mixedHoldSeconds": 0}
    lab = node.lab
    os.makedirs(lab.state_dir, exist_ok=True)
    # the agent runs in a mount namespace of its own (ip netns exec): the
    # small tmpfs is there before it starts, filled once it is ready
    with mounted(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "aqt-full", lab.state_dir]):
        node.start_agent(config)
        _fill(lab.state_dir)
        pod = node.add_pod(ANN)  # asserts ADD succeeded
        run = pod.att.aiqos_add_run
        assert run.json == pod.att.result, run.describe()
        assert cni.read_sysctl(pod.ns, "net.ipv4.tcp_notsent_lowat") == "16384"  # tuned as inference all the same
        assert pod.state() is None and "No space left on device" in lab.log_tail(20000)

        def waiting():
            st = node.status()
            return [r for r in st.get("unsavedRecords") or [] if r["containerId"] == pod.att.container_id]

        w = wait_until(waiting, 10, "the agent to hold the unsaved record")
        assert w[0]["name"] == pod.name and "No space left on device" in w[0]["error"], w
        assert "aiqos_records_unsaved 1" in node.metrics()
        # space is back: the agent writes the record
        os.unlink(os.path.join(lab.state_dir, "filler"))
        s = wait_until(pod.state, 40, "the agent to write the record")
        assert s["class"] == "inference" and not s.get("pending") and s["containerId"] == pod.att.container_id, s
        # the plugin's record, choices and the values before aiqos included
        assert {c["id"]: c for c in s["choices"]}["sysctl.notsent_lowat"]["prev"] not in ("", "16384"), s
        wait_until(lambda: not waiting(), 10, "status to drop the written record")
        assert "aiqos_records_unsaved 0" in node.metrics()
        assert "aiqos_records_written_total 1" in node.metrics()
        # an annotation flip re-tunes the pod from that record
        pod.annotate({"ai.workload": "training"})
        wait_until(lambda: (st := pod.settled()) and st["class"] == "training" and
                   cni.read_sysctl(pod.ns, "net.ipv4.tcp_notsent_lowat") != "16384", 15, "the re-tune to training")
        pod.att.check().assert_ok(output=False)
        host = pod.host_veth()
        pod.att.delete(only_aiqos=True)[0].assert_ok(output=False)
        assert pod.state() is None
        assert [f for f in lab.state_dir_entries() if "@" in f] == [], lab.state_dir_entries()
        assert node_kinds(node, host) == ["noqueue"], node.tc_summary(host)
        assert _qdisc_kinds(pod.ns, "eth0") == ["noqueue"], cni.tc_summary(pod.ns, "eth0")
        wait_until(lambda: not waiting(), 10, "nothing waiting after DEL")


def test_agent_never_recovers_an_add_that_committed_meanwhile(node):
    """The agent reads a pod's record while its ADD is in flight (the intent,
    pending, on disk: the ADD stalls before its apply) and is slow to try
    the attachment lock (failpoint); meanwhile the ADD applies, commits and
    releases the lock. The agent, finding the lock free, must judge the
    record it finds under the lock — committed — not the pending one it read
    before: no "crashed" ADD is undone, the record and the tuning stay, CHECK
    passes. (The soak's late pod that failed CHECK with "no aiqos state".)"""
    stall_ms = 1500
    config = {"uplinkRate": "500mbit", "debounceMs": 0, "mixedHoldSeconds": 0}
    node.start_agent(config, env={"AIQOS_TEST_FAILPOINTS": f"agent-recover-before-lock=sleep:{stall_ms}"})
    pod = node.add_pod(ANN, aiqos_env={"AIQOS_TEST_FAILPOINTS": "add-before-apply=sleep:500"})
    assert "agent-recover-before-lock" in node.agent_log_tail(200000), \
        f"the agent did not read the pending record during the ADD\n{node.agent_log_tail()}"
    s = pod.state()
    assert s and not s.get("pending") and s["class"] == "inference", s
    time.sleep(stall_ms / 1000 + 0.5)  # the agent has tried the lock and moved on
    s = pod.state()
    assert s and not s.get("pending") and s["class"] == "inference", \
        f"the agent undid a committed ADD: {s}\n{node.agent_log_tail()}"
    assert "crashed attachment" not in node.agent_log_tail(200000), node.agent_log_tail()
    assert cni.read_sysctl(pod.ns, "net.ipv4.tcp_notsent_lowat") == "16384"
    pod.att.check().assert_ok(output=False)
    pod.cni_del()
    assert pod.state() is None


@pytest.mark.parametrize("point", ["teardown-before-remove", "add-after-apply"])
def test_agent_restart_recovers_a_killed_plugin(node, point):
    """The plugin dies inside DEL (between its intent and its kernel step)
    or inside ADD (after its apply), leaving a pending record; the agent,
    restarted, finds it with the lock free (its writer is gone) and
    recovers by the one protocol: the teardown finished, the ADD undone —
    nothing of ours left on either side, no record, the agent forgets it."""
    config = {"uplinkRate": "500mbit", "debounceMs": 0, "mixedHoldSeconds": 0}
    node.start_agent(config)
    pod = node.add_pod(ANN)
    host = pod.host_veth()
    pod.annotate({"kubernetes.io/ingress-bandwidth": "40M"})
    wait_until(lambda: (st := pod.settled()) and st["workload"]["ingressBps"] == 40_000_000, 10, "the re-tune to 40M")
    assert "htb" in node_kinds(node, host), node.tc_summary(host)
    node.stop_agent()
    kill = {"AIQOS_TEST_FAILPOINTS": f"{point}=kill"}
    if point.startswith("teardown"):
        r = pod.att.delete(only_aiqos=True, env_extra=kill)[0]
        assert pod.state()["pending"] and pod.state()["intent"]["op"] == "teardown", pod.state()
    else:
        pod.att.delete(only_aiqos=True)[0].assert_ok(output=False)
        r = pod.att.aiqos("ADD", prev="base", env_extra=kill)
        assert pod.state()["pending"] and pod.state()["intent"]["op"] == "add", pod.state()
    assert r.rc == -signal.SIGKILL, r.describe()
    node.start_agent(config)
    wait_until(lambda: pod.state() is None, 10, "the agent to recover the crashed attachment")
    assert node_kinds(node, host) == ["noqueue"], node.tc_summary(host)
    assert _qdisc_kinds(pod.ns, "eth0") == ["noqueue"], cni.tc_summary(pod.ns, "eth0")
    assert [f for f in node.lab.state_dir_entries() if "@" in f] == [], node.lab.state_dir_entries()
    wait_until(lambda: not any(p["name"] == pod.name and p.get("attachments")
                               for p in (node.status()["pods"] or [])), 10, "the agent to forget the attachment")
    # the runtime's DEL afterwards has nothing left to do
    pod.att.delete(only_aiqos=True)[0].assert_ok(output=False)
