"""The skip gate (tests/support/skipgate.py): an ungated skip fails the run, whether at run
time or at collection; an xfail fails it unless allow-listed; a gated skip does not."""

from __future__ import annotations

from pathlib import Path

import pytest

GATE = Path(__file__).with_name("support") / "skipgate.py"


def _load_gate(pytester: pytest.Pytester, gate: str | None = None) -> None:
    """The gate loaded as tests/conftest.py loads it: a plugin named in `pytest_plugins`, so
    its hooks also see folders whose own conftest stopped with a skip (a conftest's hooks
    would not)."""
    pytester.makepyfile(skipgate=gate or GATE.read_text())
    pytester.makeconftest('pytest_plugins = ["skipgate"]\n')


TESTS = """
import pytest

def test_passes():
    pass

@pytest.mark.gpu
def test_gated():
    pytest.skip("no CUDA device")
"""


def test_a_skip_behind_a_marker_gate_keeps_the_run_green(pytester: pytest.Pytester) -> None:
    _load_gate(pytester)
    pytester.makepyfile(TESTS)
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == 0


def test_an_ungated_skip_fails_the_run_and_names_it(pytester: pytest.Pytester) -> None:
    _load_gate(pytester)
    pytester.makepyfile(TESTS + '\ndef test_no_tool():\n    pytest.skip("kubectl not installed")\n')
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, skipped=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped or xfailed without a gate*", "*test_no_tool*kubectl*"])


def _run(pytester: pytest.Pytester, gate: str | None = None) -> pytest.RunResult:
    _load_gate(pytester, gate)
    return pytester.runpytest_subprocess()


def test_a_module_level_skip_beside_a_passing_test_fails_the_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_passing="def test_passes():\n    pass\n")
    pytester.makepyfile(
        test_gone="import pytest\npytest.skip('no tool', allow_module_level=True)\n"
        "def test_never():\n    pass\n"
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, skipped=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*test_gone.py: skipped at collection*no tool*"])


def test_a_module_level_importorskip_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\npytest.importorskip('no_such_module_here')\ndef test_never():\n    pass\n"
    )
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped at collection*no_such_module_here*"])


def test_a_conftest_that_skips_its_folder_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_passing="def test_passes():\n    pass\n")
    sub = pytester.mkpydir("sub")
    (sub / "conftest.py").write_text(
        "import pytest\npytest.skip('no cluster', allow_module_level=True)\n"
    )
    (sub / "test_sub.py").write_text("def test_never():\n    pass\n")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*skipped at collection*no cluster*"])


XFAILS = """
import pytest

def test_passes():
    pass

@pytest.mark.xfail(reason="known bug")
def test_fails_as_expected():
    assert False

@pytest.mark.xfail(reason="fixed meanwhile")
def test_passes_unexpectedly():
    pass

def test_imperative():
    pytest.xfail("not ready")
"""


def test_every_xfail_outside_the_allow_list_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x=XFAILS)
    result = _run(pytester)
    result.assert_outcomes(passed=1, xfailed=2, xpassed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*test_fails_as_expected: xfail not in XFAIL_ALLOWED*",
            "*test_passes_unexpectedly: xfail not in XFAIL_ALLOWED*",
            "*test_imperative: xfail not in XFAIL_ALLOWED*",
        ]
    )


def test_an_allow_listed_xfail_keeps_the_run_green(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_x="import pytest\n@pytest.mark.xfail(reason='known bug')\n"
        "def test_known():\n    assert False\n"
    )
    empty = "XFAIL_ALLOWED: dict[str, str] = {}"
    assert empty in GATE.read_text()
    listed = "XFAIL_ALLOWED: dict[str, str] = {'test_x.py::test_known': 'known bug'}"
    result = _run(pytester, GATE.read_text().replace(empty, listed))
    result.assert_outcomes(xfailed=1)
    assert result.ret == 0
