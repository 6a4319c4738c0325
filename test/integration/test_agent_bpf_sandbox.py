"""test_agent_bpf_sandbox.py — the agent under the shipped systemd unit's
sandbox (its syscall filter and capability bounding set, applied by
unit_sandbox.py as systemd applies them) loads its BPF programs: mixed mode
on a multi-queue uplink keeps mq with the classifier attached. Under the
unit as it was before it allowed bpf(2), the refusal is a configuration
error said in status and the log, and the uplink is left exactly as it was
(never the single-lock root prio that planning without BPF would give).
Root, network namespaces, the CI kernel."""
import os

import agentlab
from agentlab import wait_until

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
UNIT = os.path.join(REPO, "agent", "aiqos-agent.service")
SANDBOX = ["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit_sandbox.py")]
INF = {"ai.workload": "inference"}
TRAIN = {"ai.workload": "training"}
CONFIG = {"debounceMs": 50, "mixedHoldSeconds": 1}


def egress(node):
    return node.sh("tc", "filter", "show", "dev", "up0", "egress").stdout


def mq_root(node):
    node.sh("tc", "qdisc", "replace", "dev", "up0", "root", "handle", "1:", "mq")
    return node.sh("tc", "qdisc", "show", "dev", "up0").stdout


def test_agent_under_the_units_sandbox_loads_its_programs(mqnode):
    node = mqnode
    mq_root(node)
    node.start_agent(CONFIG, wrap=[*SANDBOX, UNIT, "--"])
    node.add_api_pod(INF, "10.79.6.1")
    node.add_api_pod(TRAIN, "10.79.6.2")

    def classified():
        s = node.status(check=False)
        r = node.root()
        return (s and s["mode"] == "mixed" and r and r["kind"] == "mq" and node.classifier_hooked()
                and not s["uplink"].get("failure"))
    try:
        wait_until(classified, 10, "mixed, mq kept, the classifier attached")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None


def test_bpf_refused_is_a_configuration_error_and_changes_nothing(mqnode):
    node = mqnode
    before = mq_root(node)
    node.start_agent(CONFIG, wrap=[*SANDBOX, "--without", "bpf", UNIT, "--"])
    node.add_api_pod(INF, "10.79.6.3")
    node.add_api_pod(TRAIN, "10.79.6.4")

    def refused():
        s = node.status(check=False)
        return s if s and "BPF not permitted" in (s["uplink"].get("failure") or "") else None
    try:
        st = wait_until(refused, 10, "the refusal in status")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{node.tc_summary()}\n{node.agent_log_tail()}") from None
    assert "configuration error" in st["uplink"]["failure"], st["uplink"]
    assert "not a missing kernel feature" in st["uplink"]["failure"], st["uplink"]
    assert node.sh("tc", "qdisc", "show", "dev", "up0").stdout == before, node.tc_summary()
    assert "aiqos" not in egress(node), egress(node)
    log = node.agent_log_tail()
    assert "planning without it" not in log, log
