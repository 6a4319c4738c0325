"""test_bench_xarm.py — the bench's exploration arm `aiqos_x`
(test/bench/outcome.py): BENCH_X_SYSCTLS reach every training pod's netns
(the real sysctl in a real netns, read back) and nothing else; unset, the arm
changes nothing; BENCH_X_POD_CMDS run in them too. Root (network namespaces)."""

import os
import subprocess
import sys
import uuid

import pytest

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "test", "bench"))

import outcome as O  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")


class FakePod:  # only the attribute _train_sysctls reads: the pod's netns name
    def __init__(self, netns):
        self.netns = netns


@pytest.fixture
def netns():
    names = [f"aqdl-x-{uuid.uuid4().hex[:6]}" for _ in range(2)]
    for n in names:
        subprocess.run(["ip", "netns", "add", n], check=True)
    yield names
    for n in names:
        subprocess.run(["ip", "netns", "del", n], check=False)


def rmem(ns):
    return subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_rmem"], check=True,
                          capture_output=True, text=True).stdout.split()


def test_x_sysctls_reach_every_training_pod(netns, monkeypatch):
    monkeypatch.setenv("BENCH_X_SYSCTLS", "net.ipv4.tcp_rmem=4096 65536 131072")
    inst = {}
    O._train_sysctls(None, O.ARMS["aiqos_x"], [FakePod(n) for n in netns], inst)
    assert [rmem(n) for n in netns] == [["4096", "65536", "131072"]] * 2
    assert inst["train_sysctls"] == {"net.ipv4.tcp_rmem": "4096 65536 131072"}


def test_other_arms_and_unset_env_change_nothing(netns, monkeypatch):
    before = [rmem(n) for n in netns]
    monkeypatch.setenv("BENCH_X_SYSCTLS", "net.ipv4.tcp_rmem=4096 65536 131072")
    inst = {}
    O._train_sysctls(None, O.ARMS["aiqos"], [FakePod(n) for n in netns], inst)
    monkeypatch.delenv("BENCH_X_SYSCTLS")
    O._train_sysctls(None, O.ARMS["aiqos_x"], [FakePod(n) for n in netns], inst)
    assert [rmem(n) for n in netns] == before
    assert "train_sysctls" not in inst


def test_x_pod_cmds_run_in_every_training_pod_and_only_for_the_x_arm(netns, monkeypatch):
    monkeypatch.setenv("BENCH_X_POD_CMDS", "sysctl -q -w net.ipv4.tcp_rmem='4096 32768 32768'")
    inst = {}
    O._train_sysctls(None, O.ARMS["aiqos"], [FakePod(n) for n in netns], inst)
    assert "train_pod_cmds" not in inst and [rmem(n)[2] for n in netns] != ["32768"] * 2
    O._train_sysctls(None, O.ARMS["aiqos_x"], [FakePod(n) for n in netns], inst)
    assert [rmem(n) for n in netns] == [["4096", "32768", "32768"]] * 2
    assert inst["train_pod_cmds"] == ["sysctl -q -w net.ipv4.tcp_rmem='4096 32768 32768'"]
