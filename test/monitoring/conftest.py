"""conftest.py — the monitoring suite: the alert rules and the dashboard of
manifests/monitoring/ checked with promtool and against a real Prometheus
(Debian package `prometheus`) scraping a real aiqos-agent on an agentlab
node. Reuses the integration suite's fixtures (plugin, lab, session guard)
and prints the "monitoring: N passed, N failed, N skipped" line that
test/run.sh reads."""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(HERE, "..", "integration")
sys.path.insert(0, INTEGRATION)

_spec = importlib.util.spec_from_file_location("aiqos_integration_conftest", os.path.join(INTEGRATION, "conftest.py"))
_ic = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ic)

plugin = _ic.plugin
lab = _ic.lab
_session_guard = _ic._session_guard


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    passed = len(st.get("passed", []))
    failed = len(st.get("failed", [])) + len(st.get("error", []))
    skipped = len(st.get("skipped", []))
    terminalreporter.write_line(f"monitoring: {passed} passed, {failed} failed, {skipped} skipped")
