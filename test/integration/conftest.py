"""conftest.py — fixtures for the aiqos plugin integration tests: root check,
the plugin binary ($AIQOS_BUILD/bin/aiqos, default <repo>/build), the
reference plugins (/usr/lib/cni), a per-test Lab that removes every netns,
link, bridge and temp dir it made even when the test fails, a lab node
(`node`: agentlab.NodeLab with its API server), and the
"integration: N passed, N failed, N skipped" line test/run.sh reads."""

import contextlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import agentlab  # noqa: E402
import cni  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(os.environ.get("AIQOS_BUILD") or os.path.join(REPO, "build"))
PLUGIN = os.path.join(BUILD, "bin", "aiqos")
REF_PLUGINS = ("ptp", "bridge", "host-local")


@pytest.fixture(scope="session")
def plugin():
    if os.geteuid() != 0:
        pytest.skip("needs root: creates network namespaces, veths and qdiscs")
    if not os.access(PLUGIN, os.X_OK):
        pytest.fail(f"plugin not built: {PLUGIN} missing (run `make`, or set AIQOS_BUILD)")
    missing = [p for p in REF_PLUGINS if not os.access(os.path.join(cni.REF_PLUGIN_DIR, p), os.X_OK)]
    if missing:
        pytest.fail(
            f"reference CNI plugins missing in {cni.REF_PLUGIN_DIR}: {', '.join(missing)} "
            "(Debian package containernetworking-plugins; `make deps`)"
        )
    return PLUGIN


@pytest.fixture(scope="session", autouse=True)
def _session_guard():
    """Restore host sysctls the reference plugins flip (ptp/bridge enable
    forwarding) or aiqos extends (the congestion controls pods may choose),
    and remove any netns of this session that a crash left."""
    saved = {}
    if os.geteuid() == 0:
        for key in ("net/ipv4/ip_forward", "net/ipv4/tcp_allowed_congestion_control"):
            try:
                with open(f"/proc/sys/{key}") as f:
                    saved[key] = f.read().strip()
            except OSError:
                pass
    yield
    for name in cni.leftover_netns():
        cni.sh("ip", "netns", "del", name, check=False)
    for key, val in saved.items():
        try:
            with open(f"/proc/sys/{key}") as f:
                now = f.read().strip()
            if now != val:
                with open(f"/proc/sys/{key}", "w") as f:
                    f.write(val)
        except OSError:
            pass


@contextlib.contextmanager
def make_lab(plugin, tag):
    """A cni.Lab removed whole afterwards; anything its cleanup could not
    remove fails the test (it would poison the next tests)."""
    lab = cni.Lab(plugin, tag)
    try:
        yield lab
    finally:
        problems = lab.cleanup()
        left = [ns.name for ns in lab.netnses if ns.exists()]
        left += [n for n in sorted(lab.host_links) + lab.bridges if cni.link(None, n) is not None]
        if left:
            pytest.fail(f"cleanup left behind: {left}; {problems}")


@pytest.fixture
def lab(plugin, request):
    tag = "".join(ch for ch in request.node.name.replace("test_", "") if ch.isalnum())[:6] or "t"
    with make_lab(plugin, tag) as lab:
        yield lab


@pytest.fixture
def node(lab):
    """A lab node (agentlab.NodeLab) with its fake API server started."""
    with agentlab.started(lab) as n:
        yield n


@pytest.fixture
def mqnode(lab):
    """A lab node whose uplink has several tx queues (agentlab.MqNodeLab)."""
    with agentlab.started(lab, agentlab.MqNodeLab) as n:
        yield n


@pytest.fixture
def fresh_sysctls(lab):
    """The tuned sysctls of a netns nobody touched (the kernel defaults)."""
    ns = lab.netns()
    return cni.read_sysctls(ns.name)


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    passed = len(st.get("passed", []))
    # errors (setup/teardown) are failures too
    failed = len(st.get("failed", [])) + len(st.get("error", []))
    skipped = len(st.get("skipped", []))
    terminalreporter.write_line(f"integration: {passed} passed, {failed} failed, {skipped} skipped")
