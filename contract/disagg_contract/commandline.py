"""The `disagg` command line's one convention, for every command of operator, worker and
tools: help shows each option's default, and a command that reads manifests takes them as
``-f FILE`` (kubectl's spelling) or positionally, the same way everywhere.

Pure: argparse only; the commands read the files.
"""

from __future__ import annotations

import argparse
from typing import Any


def shows_default(action: argparse.Action) -> bool:
    """Whether help should state ``action``'s default: a value the user would otherwise
    have to guess (not None, not an off switch, not an empty repeatable list)."""
    default: Any = action.default
    if default is None or default is argparse.SUPPRESS or action.help == argparse.SUPPRESS:
        return False
    if isinstance(default, bool) and action.nargs == 0:
        return False  # a flag: off unless given
    return not (isinstance(default, (list, tuple, dict, str)) and not default)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter with ``(default: X)`` after each option that has one, unless its
    help already says its default in its own words."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if shows_default(action) and "default" not in text:
            text += " (default: %(default)s)"
        return text


def add_manifest_arguments(parser: argparse.ArgumentParser, what: str, *, many: bool) -> None:
    """``[-f FILE] [FILE]``: the manifest, named either way, ``what`` its help; ``many``
    lets both be repeated."""
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        default=[],
        metavar="FILE",
        help=f"{what}{'; repeatable' if many else ''}",
    )
    parser.add_argument(
        "files",
        nargs="*" if many else "?",
        metavar="FILE",
        help="the same, without -f",
    )


def manifest_paths(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, many: bool
) -> list[str]:
    """The manifests named (``-f`` ones first); exits with usage when there are none, or
    more than one where ``many`` is false."""
    positional = args.files if isinstance(args.files, list) else [args.files]
    paths = [*args.filenames, *(p for p in positional if p is not None)]
    if not paths:
        parser.error("name a manifest: -f FILE (or FILE), e.g. -f examples/quickstart-cpu.yaml")
    if len(paths) > 1 and not many:
        parser.error(f"one manifest, not {len(paths)}: {' '.join(paths)}")
    return paths
