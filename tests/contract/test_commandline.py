"""The command line's convention: ``-f FILE`` or ``FILE`` for a manifest, defaults in help."""

from __future__ import annotations

import argparse

import pytest

from disagg_contract import commandline


def _parser(many: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t", formatter_class=commandline.HelpFormatter)
    commandline.add_manifest_arguments(parser, "manifest", many=many)
    return parser


@pytest.mark.parametrize(
    ("argv", "many", "paths"),
    [
        (["-f", "a.yaml"], False, ["a.yaml"]),
        (["a.yaml"], False, ["a.yaml"]),
        (["--filename", "a.yaml"], False, ["a.yaml"]),
        (["-f", "a.yaml", "-f", "b.yaml", "c.yaml"], True, ["a.yaml", "b.yaml", "c.yaml"]),
        (["c.yaml", "-f", "a.yaml"], True, ["a.yaml", "c.yaml"]),
        (["-"], True, ["-"]),
    ],
)
def test_a_manifest_is_named_with_or_without_f(argv: list[str], many: bool, paths: list[str]):
    parser = _parser(many)
    assert commandline.manifest_paths(parser, parser.parse_args(argv), many=many) == paths


@pytest.mark.parametrize(
    ("argv", "many", "says"),
    [
        ([], False, "name a manifest: -f FILE (or FILE)"),
        ([], True, "name a manifest: -f FILE (or FILE)"),
        (["-f", "a.yaml", "b.yaml"], False, "one manifest, not 2: a.yaml b.yaml"),
    ],
)
def test_no_manifest_or_too_many_is_a_usage_error(
    argv: list[str], many: bool, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = _parser(many)
    with pytest.raises(SystemExit) as exited:
        commandline.manifest_paths(parser, parser.parse_args(argv), many=many)
    assert exited.value.code == 2 and says in capsys.readouterr().err


def test_help_states_defaults_unless_it_already_does() -> None:
    parser = argparse.ArgumentParser(prog="t", formatter_class=commandline.HelpFormatter)
    parser.add_argument("--port", type=int, default=8080, help="proxy port")
    parser.add_argument("--blocks", type=int, default=4, help="blocks to read (default 4)")
    parser.add_argument("--zero", type=int, default=0, help="a zero")
    parser.add_argument("--flag", action="store_true", help="a switch")
    parser.add_argument("--name", help="a name")
    parser.add_argument("--many", action="append", default=[], help="repeatable")
    text = " ".join(parser.format_help().split())
    assert "proxy port (default: 8080)" in text
    assert "blocks to read (default 4) " in text and "(default: 4)" not in text
    assert "a zero (default: 0)" in text
    for plain in ("a switch", "a name", "repeatable"):
        assert f"{plain} (default" not in text, plain
