"""conftest.py — prints the "docs: N passed, N failed, N skipped" line that
test/run.sh reads (setup/teardown errors count as failures)."""


def pytest_terminal_summary(terminalreporter):
    st = terminalreporter.stats
    passed = len([r for r in st.get("passed", []) if r.when == "call"])
    failed = len(st.get("failed", [])) + len(st.get("error", []))
    skipped = len(st.get("skipped", []))
    terminalreporter.write_line(f"docs: {passed} passed, {failed} failed, {skipped} skipped")
