#!/usr/bin/env python3
"""The layer pictures in docs/architecture.md and docs/operator.md, generated
from the import-linter layers contracts in pyproject.toml (the contracts lint-imports
enforces), so the pictures cannot drift from what is enforced.

    scripts/layers.py            print the pictures
    scripts/layers.py --write    rewrite the marked blocks in the docs

tests/docs/test_layers.py fails with this command when a block differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run, or loaded by a test
import docblocks

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("docs/architecture.md", "docs/operator.md")
COMMAND = "scripts/layers.py --write"
# What each layer is, in a line (the contract says the order); a layer of siblings joined by
# ":" (one layer, each may import the other) is described as one.
WHAT = {
    "disagg_tools.bench": "the 12 benchmarks (`disagg bench --help`)",
    "disagg_tools.local": "`disagg up`, the local kubelet, the process and podman runtimes",
    "disagg_tools.emulator": "the Kubernetes API server stand-in (kube-apiserver's rules)",
    "disagg_operator.commands : disagg_operator.controller": "I/O: `disagg operator|render|"
    "crd`, configuration, kopf, sync, cache",
    "disagg_operator.planning": "observation → this sync's writes, rollout, autoscaling, status",
    "disagg_operator.render": "spec → child objects, KV revision, canary, CRD, docs tables",
    "disagg_operator.validation": "body → model + problems (field and fix)",
    "disagg_operator.engines": "the engine interface, one folder per engine, the settings",
    "disagg_operator.derive : disagg_operator.api": "API models (CRD source), kinds, names; "
    "engine-independent derived values",
    "disagg_operator.contracts": "what llm-d, LWS and Prometheus accept (pure tables)",
    "disagg_worker.serve": "HTTP server, P/D proxy, canary, drain",
    "disagg_worker.model": "the reference model (a seeded transformer, paged KV)",
    "disagg_worker.transfer": "NIXL agent, handshake, plans, leases, block copies",
}


def layers() -> dict[str, list[str]]:
    """Contract name → its layers, top first (each a list of sibling modules)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    return {c["name"]: c["layers"] for c in contracts if c["type"] == "layers"}


def _short(layer: str) -> str:
    """A layer's packages without their root package: ``derive : api``."""
    return " : ".join(p.strip().split(".", 1)[1] for p in layer.split(":"))


def block() -> docblocks.Block:
    """The layers block the docs hold."""
    lines = ["```"]
    for name, stack in layers().items():
        lines.append(f"{name} (top first; a layer imports only the layers below it):")
        for layer in stack:
            parts = [p.strip() for p in layer.split("|")]
            shown = " | ".join(_short(p) for p in parts)
            what = "; ".join(WHAT[p] for p in parts)
            lines.append(f"  {shown:<22} {what}")
        if any(":" in layer for layer in stack):
            lines.append(f"  {'a : b':<22} siblings in one layer: each may import the other")
        lines.append("")
    lines[-1] = "```"
    body = "\n".join(lines)
    return docblocks.block("layers", "scripts/layers.py", "pyproject.toml", body, DOCS)


def picture() -> str:
    """The layers block's text, markers included."""
    return block().text


if __name__ == "__main__":
    sys.exit(docblocks.main([block()], sys.argv[1:]))
