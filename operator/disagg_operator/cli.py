"""The one `disagg` command: a dispatcher over lazily imported subcommand modules.

Each subcommand lives in its own module exposing ``main(argv: list[str]) -> int`` and is
imported only when invoked, so `disagg --help` and `disagg --version` need nothing beyond
the base install, and the operator image never imports torch. The product's commands are
listed here; the tools' (``disagg up``, ``disagg bench``, ...) come from the
``disagg-tools`` distribution through the ``disagg.commands`` entry points, and are
named with how to get them where it is not installed (no image installs it). A tool's
sub-commands (the benchmarks) are listed from its own table (``disagg.subcommands``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType

# name → (module, one-line help). Modules own their own argument parsing.
COMMANDS: dict[str, tuple[str, str]] = {
    "render": ("disagg_operator.commands.render", "print the objects a manifest renders to"),
    "crd": ("disagg_operator.commands.crd", "print the generated CustomResourceDefinition"),
    "operator": ("disagg_operator.controller.run", "run the operator (kopf) against a cluster"),
    "worker": ("disagg_worker.cli", "in-pod worker: serve a prefill/decode role, probe"),
    "proxy": ("disagg_worker.serve.proxy.app", "P/D proxy: prefill then decode for each request"),
}
GROUP = "disagg.commands"  # the tools' commands: entry points naming a module
SUBGROUP = "disagg.subcommands"  # a command's table: sub-command → (module, one-line help)
TOOLS = ("up", "bench", "model")  # what the disagg-tools distribution adds
TOOLS_HINT = (
    "a tool of the disagg-tools distribution, which no image installs: `make up` (or "
    "pip install -e tools) in a checkout"
)
EXTRA_HINT = {
    "disagg_worker": "pip install 'disagg[worker]' (install torch first, see README)",
    "disagg_operator": "pip install 'disagg[operator]'",
}


def plugins() -> dict[str, tuple[str, str]]:
    """The installed tools' commands: name → (module, one-line help)."""
    found = {}
    for entry in metadata.entry_points(group=GROUP):
        found[entry.name] = (entry.value, _summary(entry))
    return found


def _summary(entry: metadata.EntryPoint) -> str:
    dist = entry.dist.name if entry.dist is not None else "a plug-in"
    return f"({dist}) see disagg {entry.name} --help"


def subcommands() -> dict[str, dict[str, str]]:
    """The installed tools' sub-commands: command → {sub-command: one-line help}, read
    from each tool's own table (a light module: help imports it)."""
    found = {}
    for entry in metadata.entry_points(group=SUBGROUP):
        table: dict[str, tuple[str, str]] = entry.load()
        found[entry.name] = {name: text for name, (_, text) in table.items()}
    return found


def _usage() -> str:
    from disagg_operator import __version__

    tools, subs = plugins(), subcommands()
    width = max(len(n) for n in (*COMMANDS, *tools, *TOOLS))
    lines = [
        f"disagg {__version__} — heterogeneous prefill/decode serving on Kubernetes",
        "",
        "usage: disagg <command> [options]   (disagg <command> --help for details)",
        "",
        "commands:",
    ]
    lines += [f"  {name.ljust(width)}  {text}" for name, (_, text) in COMMANDS.items()]
    for name, (_, text) in sorted(tools.items()):
        lines.append(f"  {name.ljust(width)}  {text}")
        inner = max((len(n) for n in subs.get(name, {})), default=0)
        lines += [f"    {n.ljust(inner)}  {t}" for n, t in subs.get(name, {}).items()]
    missing = [n for n in TOOLS if n not in tools]
    if missing:
        lines += ["", f"not installed: {', '.join(missing)} ({TOOLS_HINT})"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if args[0] in {"-V", "--version", "version"}:
        from disagg_operator import __version__

        print(f"disagg {__version__}")
        return 0
    entry = COMMANDS.get(args[0]) or plugins().get(args[0])
    if entry is None:
        if args[0] in TOOLS:
            print(f"disagg {args[0]}: {TOOLS_HINT}", file=sys.stderr)
        else:
            print(f"disagg: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _ = entry
    try:
        module = import_command(module_name)
    except ModuleNotFoundError as e:
        hint = EXTRA_HINT.get(module_name.split(".")[0], "")
        print(f"disagg {args[0]}: missing dependency {e.name!r}; {hint}", file=sys.stderr)
        return 2
    result: int = module.main(args[1:])
    return result


def import_command(module_name: str) -> ModuleType:
    """The module of a command (a missing third-party module is raised to the caller)."""
    return importlib.import_module(module_name)


if __name__ == "__main__":
    sys.exit(main())
