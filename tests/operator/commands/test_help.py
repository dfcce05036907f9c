"""`disagg --help` and every command's help: each option with a default says it, and the
benchmarks listed are the benchmark table's, all of them."""

from __future__ import annotations

import argparse
import importlib
import itertools
import re
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from disagg_contract import commandline
from disagg_operator import cli


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _capture(parser: argparse.ArgumentParser, *_: Any, **__: Any) -> NoReturn:
    raise _Parsed(parser)


def _parsers(
    name: str, main: Any, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser a command builds: its own, or, for a dispatcher (``{a,b}`` in its
    usage), each sub-command's."""
    try:
        main([*argv, "--help"])
    except _Parsed as parsed:
        yield " ".join([name, *argv]), parsed.parser
        return
    usage = capsys.readouterr().out
    found = re.search(r"\{([\w,-]+)\}", usage)
    assert found, f"disagg {name} {' '.join(argv)}: neither a parser nor a dispatcher:\n{usage}"
    for sub in found.group(1).split(","):
        yield from _parsers(name, main, [*argv, sub], capsys)


def _all_parsers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> list[tuple[str, argparse.ArgumentParser]]:
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", _capture)
    commands = {**cli.COMMANDS, **cli.plugins()}
    assert set(cli.TOOLS) <= set(commands)  # the tools are installed here: walk theirs too
    out = []
    for name, (module, _) in commands.items():
        out += _parsers(name, importlib.import_module(module).main, [], capsys)
    return out


def test_every_option_with_a_default_shows_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    parsers = _all_parsers(capsys, monkeypatch)
    names = {name for name, _ in parsers}
    assert {"render", "crd", "operator", "worker serve", "worker probe", "up"} <= names
    assert {f"bench {b}" for b in _benches()} <= names
    missing = []
    for name, parser in parsers:
        text = re.sub(r"\s+", "", parser.format_help())  # help wraps even inside words
        for action in parser._actions:
            if not commandline.shows_default(action) or not action.option_strings:
                continue
            own = " ".join((action.help or "").split())
            value = str(action.default)
            if not own:
                missing.append(f"disagg {name} {action.option_strings[-1]}: no help")
            elif "default" in own:  # says it in its own words: with the value in force
                if value not in own:
                    missing.append(f"disagg {name} {action.option_strings[-1]}: {own!r} ≠ {value}")
            elif re.sub(r"\s+", "", f"{own} (default: {value})") not in text:
                missing.append(f"disagg {name} {action.option_strings[-1]}: no default shown")
    assert missing == [], "\n".join(missing)


def _benches() -> dict[str, tuple[str, str]]:
    from disagg_tools.bench import cli as bench

    return bench.BENCHES


def test_disagg_help_lists_every_benchmark_from_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    after = out.split("\n  bench ", 1)[1].splitlines()[1:]
    block = "\n".join(itertools.takewhile(lambda line: line.startswith("    "), after))
    listed = re.findall(r"^    ([\w-]+)  +(.+)$", block, re.M)
    assert listed == [(name, text) for name, (_, text) in _benches().items()]
    assert len(listed) == 12
