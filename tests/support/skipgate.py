"""A green run means what it says: a test may skip only behind a declared marker gate (a
suite that needs hardware or a cluster this machine lacks, selected explicitly with -m);
any other skip fails the run, so a missing dependency or tool can never turn tests into a
silent "skipped". Loaded by tests/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest

GATES = frozenset({"gpu", "cluster", "vllm", "slow"})
_UNGATED: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    gated = GATES & {m.name for m in item.iter_markers()}
    if report.skipped and not hasattr(report, "wasxfail") and not gated:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        _UNGATED.append(f"{item.nodeid}: {reason}")
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _UNGATED and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _UNGATED:
        terminalreporter.section("skipped without a marker gate (the run fails)", red=True)
        for line in _UNGATED:
            terminalreporter.line(line)
        gates = ", ".join(sorted(GATES))
        terminalreporter.line(f"install what they need, or gate them behind a marker: {gates}")
