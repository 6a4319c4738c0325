"""test_agent_leaks.py — aiqos-agent built with ASan+UBSan+LeakSanitizer
(`make asan-build`, BUILD-asan) through a churn scenario on a lab node:
hundreds of pod events (creates, annotation flips, graceful and immediate
deletes, in bursts) through the fake API server, real CNI pods re-tuned,
watch faults (connection resets mid-event, in-stream 410, garbage and
oversized events, 5xx/429 with Retry-After, closed streams), token
rotation, config reloads (valid and invalid, file rewrites and SIGHUP),
status/explain calls and metrics scrapes; then SIGTERM. The agent must stay
up, converge on the API's pods and exit 0 with zero sanitizer reports: no
leak, no invalid access, no undefined behaviour. Bounded to about a minute.

The sanitized build is BUILD-asan next to AIQOS_BUILD (or AIQOS_ASAN_BUILD,
or AIQOS_BUILD itself when that is the sanitized build). The same scenario
(one round) also runs the regular build's agent under valgrind memcheck,
which sees what ASan does not (reads of uninitialised memory): zero errors,
no definite or indirect leak."""

import glob
import os
import shutil
import signal

import pytest

import agentlab
from agentlab import wait_until

INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
CONFIG = {"uplinkRate": "500mbit", "debounceMs": 20, "mixedHoldSeconds": 1, "driftRepairSeconds": 1}
N_API_PODS = 120  # per round: creates, 160 annotation changes, 60 deletes
ROUNDS = 2  # every fault twice: > 700 pod events in all


def asan_build():
    """The sanitized build dir, or None."""
    base = os.path.abspath(os.environ.get("AIQOS_BUILD") or os.path.join(agentlab.REPO, "build"))
    for d in (os.environ.get("AIQOS_ASAN_BUILD"), base + "-asan", base):
        if d and is_sanitized(os.path.join(d, "bin", "aiqos-agent")):
            return os.path.abspath(d)
    return None


def is_sanitized(binary):
    try:
        with open(binary, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


@pytest.fixture
def node(lab, monkeypatch):
    build = asan_build()
    if build is None:
        pytest.fail("no ASan build of aiqos-agent (BUILD-asan/bin/aiqos-agent): run `make asan-build`")
    # the lab's plugin and agent both come from the sanitized build
    monkeypatch.setenv("AIQOS_BUILD", build)
    lab.plugin = os.path.join(build, "bin", "aiqos")
    with agentlab.started(lab) as n:
        yield n


def sanitizer_env(node):
    """Reports into files (one per process) that the test reads; exitcode
    66 for a leak found at exit (SIGTERM: the agent's normal exit path)."""
    prefix = os.path.join(node.dir, "sanitizer")
    return prefix, {
        "ASAN_OPTIONS": f"detect_leaks=1:exitcode=66:halt_on_error=1:log_path={prefix}:"
                        "detect_stack_use_after_return=1:strict_string_checks=1",
        "UBSAN_OPTIONS": f"print_stacktrace=1:halt_on_error=1:log_path={prefix}",
        "LSAN_OPTIONS": "report_objects=1",
    }


def reports(prefix):
    out = []
    for path in sorted(glob.glob(prefix + "*")):
        with open(path, errors="replace") as f:
            out.append(f"--- {path}\n{f.read()[-8000:]}")
    return out


def api_pod_names(node):
    return {p["metadata"]["name"] for p in node.api("GET", "/pods")["items"]
            if p["spec"].get("nodeName") == node.name}


def agent_pod_names(node):
    st = node.status(check=False)
    return {p["name"] for p in st["pods"]} if st else None


def alive(node):
    assert node.agent.poll() is None, f"agent exited {node.agent.returncode}:\n{node.agent_log_tail()}"


def churn(node, port, rounds):
    """The scenario: real pods, API pod bursts through watch faults, config
    reloads, token rotation, socket and metrics calls; then convergence and
    the real pods' CNI DEL. The agent must be up at the end."""
    # real pods through the CNI chain: the plugin asks the agent, the agent re-tunes them
    real = [node.add_pod(TRAIN), node.add_pod(INF), node.add_pod({"ai.workload": "inference",
                                                                  "kubernetes.io/egress-bandwidth": "30M"})]

    faults = [
        {"type": "reset", "after_events": 3, "how": "rst", "in_chunk": True},
        {"type": "garbage", "after_events": 2},
        {"type": "oversized", "bytes": 3 * 1024 * 1024, "after_events": 1},
        {"type": "gone", "mode": "event", "after_events": 4},
        {"type": "status", "code": 500, "count": 2, "retry_after": None},
        {"type": "status", "code": 429, "retry_after": 1, "match": "watch"},
        {"type": "reset", "after_events": 1, "how": "fin"},
        {"type": "slow", "mode": "pattern", "chunk_sizes": [1, 7, 300, 13]},
    ]
    pods = []
    batch = N_API_PODS // len(faults)
    for i, fault in enumerate(faults * rounds):
        # a burst of creates, an annotation flip of each, then half of them deleted
        specs = [((TRAIN if (i + j) % 2 else INF), f"10.90.{i}.{j + 1}") for j in range(batch)]
        # the fault applies to the next request: end the stream, wait until
        # the agent's reconnect took it, then send the burst through it
        fid = node.api("POST", "/faults", fault, ok=(201,))["id"]
        node.api("POST", "/watches/close", {"how": "end"})
        wait_until(lambda: fid not in {f["id"] for f in node.api("GET", "/faults")["faults"]}, 20,
                   f"the agent to reconnect through fault {fault}")
        created = node.add_api_pods(specs)
        pods += created
        for j, p in enumerate(created):
            p.annotate(INF if (i + j) % 2 else TRAIN)
        for p in created[::3]:
            p.annotate({"ai.workload": "training", "ai.workload/profile": "training-dctcp",
                        "kubernetes.io/egress-bandwidth": "bogus"})
        for j, p in enumerate(created[: batch // 2]):
            node.api("DELETE", f"/pods/{p.namespace}/{p.name}" + ("?graceful=1" if j % 2 else ""))
            pods.remove(p)
        if i % 2:
            node.api("POST", "/watches/close", {"how": "rst" if i % 4 == 1 else "fin"})
        if i % len(faults) == 3:
            node.api("POST", "/token/rotate", {"keep_old": False})
        if i % len(faults) == 4:
            node.api("POST", "/compact", {})
        # config reloads: valid, invalid (kept out), by rewrite and by SIGHUP
        if i % 3 == 0:
            node.write_config(dict(CONFIG, inferenceShare=0.2 + 0.1 * (i % 5),
                                   classify="dscp" if i % 2 else "src-ip"))
        elif i % 3 == 1:
            node.write_config(dict(CONFIG, inferenceShare=7))
        else:
            node.write_config(dict(CONFIG, uplinkRate=f"{300 + 10 * i}mbit"))
            os.kill(node.agent.pid, signal.SIGHUP)
        # the socket server and the metrics endpoint under the same churn
        node.aiqosctl("status", "--json", check=False)
        node.aiqosctl("explain", "--json", f"aqt/{real[i % len(real)].name}", check=False)
        node.aiqosctl("explain", "--json", "aqt/no-such-pod", check=False)
        assert node.http_get("/metrics", port)[0] == 200
        alive(node)

    node.api("DELETE", "/faults")
    node.write_config(CONFIG)
    # annotation changes of the real pods while everything settles
    real[0].annotate(INF)
    real[1].annotate(TRAIN)

    # converged: the agent's pods are the API's pods
    want = api_pod_names(node)
    assert len(want) > rounds * N_API_PODS // 2, len(want)
    wait_until(lambda: agent_pod_names(node) == want, 60, "the agent's pod cache to match the API")
    # the last (valid) config is in force and the watch is up again
    wait_until(lambda: (lambda st: st["apiConnected"] and st["config"]["error"] == "")(node.status()), 30,
               "the last config in force and the API connected")
    stats = node.api("GET", "/stats")["counts"]
    assert stats["watch"] >= rounds * len(faults), stats  # it reconnected through every fault

    # the real pods go away through CNI DEL (the plugin notifies the agent)
    for p in real:
        p.cni_del()
        p.delete_api()
    alive(node)



def test_agent_churn_asan(node, monkeypatch):
    prefix, env = sanitizer_env(node)
    # the plugin runs and aiqosctl (sanitized builds too) report into the same files
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    node.start_agent(CONFIG, env=env, wait_ready=False)
    node.wait_ready(timeout_s=30)
    churn(node, node.metrics_port(), ROUNDS)
    rc = node.stop_agent(signal.SIGTERM, timeout_s=30)
    found = reports(prefix)
    assert rc == 0 and not found, (f"agent exit {rc}; sanitizer reports (agent, plugin, aiqosctl):\n"
                                   + "\n".join(found) + f"\nagent log:\n{node.agent_log_tail(3000)}")


@pytest.fixture
def vg_node(lab, monkeypatch):
    """The regular build's agent under valgrind memcheck (what ASan cannot
    see: reads of uninitialised memory): a wrapper in BUILD/bin's place."""
    if shutil.which("valgrind") is None:
        pytest.fail("valgrind not installed (make deps)")
    build = os.path.abspath(os.environ.get("AIQOS_BUILD") or os.path.join(agentlab.REPO, "build"))
    agent = os.path.join(build, "bin", "aiqos-agent")
    if is_sanitized(agent):
        pytest.skip("AIQOS_BUILD is the sanitized build: valgrind runs against the regular one")
    wrap = os.path.join(lab.tmp, "vg")
    os.makedirs(os.path.join(wrap, "bin"))
    prefix = os.path.join(lab.tmp, "valgrind")
    with open(os.path.join(wrap, "bin", "aiqos-agent"), "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect "
                "--errors-for-leak-kinds=definite,indirect --error-exitcode=97 --num-callers=30 "
                f"--suppressions={os.path.join(os.path.dirname(os.path.abspath(__file__)), 'valgrind-bpf.supp')} "
                f"--log-file={prefix}.%p {agent} \"$@\"\n")
    os.chmod(os.path.join(wrap, "bin", "aiqos-agent"), 0o755)
    os.symlink(os.path.join(build, "bin", "aiqosctl"), os.path.join(wrap, "bin", "aiqosctl"))
    monkeypatch.setenv("AIQOS_BUILD", wrap)
    n = agentlab.NodeLab(lab)
    n.valgrind_prefix = prefix
    try:
        n.start_api()
        yield n
    finally:
        n.cleanup()


def test_agent_churn_valgrind(vg_node):
    node = vg_node
    node.start_agent(CONFIG, wait_ready=False)
    node.wait_ready(timeout_s=60)
    churn(node, node.metrics_port(), 1)
    rc = node.stop_agent(signal.SIGTERM, timeout_s=60)
    logs = glob.glob(node.valgrind_prefix + ".*")
    text = "".join(open(p, errors="replace").read() for p in logs)
    assert rc == 0 and logs and "ERROR SUMMARY: 0 errors" in text, (
        f"agent exit {rc} under valgrind:\n{text[-12000:]}\nagent log:\n{node.agent_log_tail(3000)}")
