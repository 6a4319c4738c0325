"""conftest.py — the k8s suite (a real control plane from hack/control-plane.sh):
makes kapi importable and prints the "kubernetes: N passed, N failed, N skipped" line
that test/run.sh reads (setup/teardown errors count as failures)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    passed = len(st.get("passed", []))
    failed = len(st.get("failed", [])) + len(st.get("error", []))
    skipped = len(st.get("skipped", []))
    terminalreporter.write_line(f"kubernetes: {passed} passed, {failed} failed, {skipped} skipped")
