"""A green run means what it says: a test may skip only behind a declared marker gate (a
suite that needs hardware or a cluster this machine lacks, selected explicitly with -m);
any other skip fails the run, so a missing dependency or tool can never turn tests into a
silent "skipped". Three ways a test can vanish are caught:

- a skip while a test runs (``pytest.skip``, ``skip``/``skipif`` markers) outside a gate;
- a skip while collecting (``pytest.skip(allow_module_level=True)``, a module-level
  ``pytest.importorskip``, a conftest that skips): a whole module gone, never allowed,
  since its gate markers are unknown once its import stopped (gate it with ``pytestmark``
  and a ``skipif`` marker instead);
- an expected failure (``xfail`` marker or ``pytest.xfail``), failed or passed: allowed only
  for the node ids listed in XFAIL_ALLOWED, each with the reason it is expected to fail.

Loaded by tests/conftest.py."""

from __future__ import annotations

from typing import Any

import pytest

GATES = frozenset({"gpu", "cluster", "vllm", "slow"})

# node id -> why it is expected to fail (and what would make it pass). Empty: nothing is.
XFAIL_ALLOWED: dict[str, str] = {}

_UNGATED: list[str] = []


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    return str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if hasattr(report, "wasxfail"):
        if item.nodeid not in XFAIL_ALLOWED:
            _UNGATED.append(f"{item.nodeid}: xfail not in XFAIL_ALLOWED ({report.wasxfail})")
    elif report.skipped and not GATES & {m.name for m in item.iter_markers()}:
        _UNGATED.append(f"{item.nodeid}: {_reason(report)}")
    return report


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _UNGATED.append(
            f"{report.nodeid or '<conftest>'}: skipped at collection: {_reason(report)}"
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _UNGATED and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _UNGATED:
        terminalreporter.section("skipped or xfailed without a gate (the run fails)", red=True)
        for line in _UNGATED:
            terminalreporter.line(line)
        gates = ", ".join(sorted(GATES))
        terminalreporter.line(
            f"install what they need, or gate them behind a marker: {gates}; "
            "an expected failure needs its node id and reason in XFAIL_ALLOWED "
            "(tests/support/skipgate.py)"
        )
