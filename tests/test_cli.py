"""The `disagg` dispatcher: help and version with the base install, clear unknown-command errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from disagg_operator import cli


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert f"  {name}" in out


def test_version_matches_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"disagg {version('disagg')}"


def test_unknown_command_exits_2_and_names_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_every_subcommand_module_exists_and_has_main() -> None:
    import importlib

    for name, (module_name, _) in cli.COMMANDS.items():
        module = importlib.import_module(module_name)
        assert callable(getattr(module, "main", None)), f"{name}: {module_name}.main missing"


def test_help_and_version_import_no_heavy_dependencies() -> None:
    # The base install has only pydantic and pyyaml: help/version must not import more.
    code = (
        "import sys; from disagg_operator import cli; cli.main(['--help']); cli.main(['-V']);"
        "heavy = {'torch', 'kopf', 'kubernetes', 'zmq', 'nixl_cu12', 'aiohttp'} & set(sys.modules);"
        "print(sorted(heavy)); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tools_commands_come_from_their_distribution(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`disagg up`, `disagg bench`, `disagg model` are the disagg-tools distribution's
    (entry points): listed in help where it is installed, as here."""
    found = cli.plugins()
    assert set(cli.TOOLS) <= set(found)
    assert found["bench"][0] == "disagg_tools.bench.cli"
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name}" in out for name in cli.TOOLS) and "not installed" not in out


def test_without_the_tools_their_commands_say_how_to_get_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image installs the product alone."""
    monkeypatch.setattr(cli, "plugins", dict)
    assert cli.main(["up", "examples/quickstart-cpu.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("disagg up: a tool of the disagg-tools distribution") and "make up" in err
    assert cli.main(["--help"]) == 0
    assert "not installed: up, bench, model" in capsys.readouterr().out


def test_a_missing_dependency_names_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "operator", ("disagg_operator.not_there.run", "x"))
    assert cli.main(["operator"]) == 2
    err = capsys.readouterr().err
    assert "missing dependency 'disagg_operator.not_there'" in err
    assert "pip install 'disagg[operator]'" in err


def test_an_unknown_benchmark_names_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    from disagg_tools.bench import cli as bench

    assert bench.main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'nope'" in err and all(b in err for b in bench.BENCHES)
