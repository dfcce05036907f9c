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


def test_a_command_an_image_does_not_ship_says_where_it_went(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "bench", ("disagg_operator.not_shipped.cli", "x"))
    assert cli.main(["bench", "operator"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("disagg bench: not part of this install")
    assert "pip install 'disagg[operator,worker,dev]'" in err


def test_a_benchmark_an_image_does_not_ship_says_where_it_went(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from disagg_operator.bench import cli as bench

    monkeypatch.setitem(bench.BENCHES, "operator", ("disagg_operator.not_shipped.op", "x"))
    assert bench.main(["operator"]) == 2
    assert capsys.readouterr().err.startswith("disagg bench operator: not part of this install")
