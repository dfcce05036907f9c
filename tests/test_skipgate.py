"""The skip gate (tests/support/skipgate.py): an ungated skip fails the run, a gated one
does not."""

from __future__ import annotations

from pathlib import Path

import pytest

GATE = Path(__file__).with_name("support") / "skipgate.py"
TESTS = """
import pytest

def test_passes():
    pass

@pytest.mark.gpu
def test_gated():
    pytest.skip("no CUDA device")
"""


def test_a_skip_behind_a_marker_gate_keeps_the_run_green(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(GATE.read_text())
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 0


def test_an_ungated_skip_fails_the_run_and_names_it(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(GATE.read_text())
    pytester.makepyfile(TESTS + '\ndef test_no_tool():\n    pytest.skip("kubectl not installed")\n')
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped without a marker gate*", "*test_no_tool*kubectl*"])
