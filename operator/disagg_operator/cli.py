"""The one `disagg` command: a dispatcher over lazily imported subcommand modules.

Each subcommand lives in its own module exposing ``main(argv: list[str]) -> int`` and is
imported only when invoked, so `disagg --help` and `disagg --version` need nothing beyond
the base install, and the operator image never imports torch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

# name → (module, one-line help). Modules own their own argument parsing.
COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("disagg_operator.local.up", "run a DisaggregatedDeployment on this machine (local P/D)"),
    "render": ("disagg_operator.commands.render", "print the objects a manifest renders to"),
    "crd": ("disagg_operator.commands.crd", "print the generated CustomResourceDefinition"),
    "operator": ("disagg_operator.controller.run", "run the operator (kopf) against a cluster"),
    "worker": ("disagg_worker.cli", "in-pod worker: serve a prefill/decode role, probe"),
    "proxy": ("disagg_worker.serve.proxy.app", "P/D proxy: prefill then decode for each request"),
    "bench": ("disagg_operator.bench.cli", "benchmarks: transfer, e2e, operator, faults"),
    "model": ("disagg_worker.vllm.checkpoint", "write a local checkpoint (tiny-llama) for vLLM"),
}

# An image ships only what its pods run (pyproject.toml's [tool.disagg.images]).
NOT_SHIPPED = (
    "not part of this install: the images ship what their pods run (the operator image: "
    "operator, render, crd; the worker image: worker, proxy, bench transfer and e2e). "
    "`disagg up` and every benchmark come with the `disagg` distribution: pip install "
    "'disagg[operator,worker,dev]' (CPU torch first: README)"
)
EXTRA_HINT = {
    "disagg_worker": "pip install 'disagg[worker]' (install torch first, see README)",
    "disagg_operator": "pip install 'disagg[operator]'",
}


def _usage() -> str:
    from disagg_operator import __version__

    width = max(len(n) for n in COMMANDS)
    lines = [
        f"disagg {__version__} — heterogeneous prefill/decode serving on Kubernetes",
        "",
        "usage: disagg <command> [options]   (disagg <command> --help for details)",
        "",
        "commands:",
    ]
    lines += [f"  {name.ljust(width)}  {text}" for name, (_, text) in COMMANDS.items()]
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
    entry = COMMANDS.get(args[0])
    if entry is None:
        print(f"disagg: unknown command {args[0]!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _ = entry
    try:
        module = import_command(args[0], module_name)
    except ModuleNotFoundError as e:
        hint = EXTRA_HINT.get(module_name.split(".")[0], "")
        print(
            f"disagg {args[0]}: missing dependency {e.name!r}; {hint}",
            file=sys.stderr,
        )
        return 2
    if module is None:
        return 2
    result: int = module.main(args[1:])
    return result


def import_command(command: str, module_name: str) -> ModuleType | None:
    """The module of ``disagg COMMAND``, or None after saying that this install does not
    ship it (an image ships only what its pods run). A missing third-party module is
    raised."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in ("disagg_operator", "disagg_worker"):
            raise
        print(f"disagg {command}: {NOT_SHIPPED} (no {e.name})", file=sys.stderr)
        return None


if __name__ == "__main__":
    sys.exit(main())
