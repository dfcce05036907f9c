"""Test-side access to the API emulator: fixtures' building blocks, reusable by any suite.

The emulator itself lives in :mod:`disagg_tools.emulator.server` (the benchmark needs it too);
this module re-exports it and adds the project-specific setup: serving the
DisaggregatedDeployment CRD from ``crds/`` and writing a kubeconfig for kubectl, Helm and the
``kubernetes`` client.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import yaml

from disagg_tools.emulator.rules.ops import WRITE_VERBS
from disagg_tools.emulator.server import ApiCall, Emulator, api_calls, kubeconfig

__all__ = [
    "WRITE_VERBS",
    "ApiCall",
    "Emulator",
    "api_calls",
    "kubeconfig",
    "serve_project_crds",
    "write_kubeconfig",
]

ROOT = Path(__file__).resolve().parents[2]
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


def serve_project_crds(emulator: Emulator, crds_dir: Path = ROOT / "crds") -> None:
    """Create every CRD in ``crds/`` as ``kubectl apply -f crds/`` would, through the API
    server's CRD admission (kube-apiserver's rules, ported): one it would refuse stops the
    test with its message. The create is not left among the recorded calls, which are the
    code under test's."""
    crds = _crds(crds_dir)
    assert crds, f"no CustomResourceDefinition in {crds_dir}"
    for text in crds:
        emulator.put_object(CRDS, json.loads(text))


@functools.cache
def _crds(crds_dir: Path) -> tuple[str, ...]:
    """The CRDs of ``crds_dir`` as JSON texts, read once per test session (the YAML is
    long; every emulator fixture needs it)."""
    return tuple(
        json.dumps(doc)
        for path in sorted(crds_dir.glob("*.yaml"))
        for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader)
        if doc and doc.get("kind") == "CustomResourceDefinition"
    )


def write_kubeconfig(emulator: Emulator, path: Path) -> Path:
    """Write a kubeconfig for the running emulator to ``path`` and return it."""
    path.write_text(yaml.safe_dump(kubeconfig(str(emulator.url).rstrip("/"))))
    return path


def writes(emulator: Emulator, since: int = 0) -> list[ApiCall]:
    """Write calls (create/update/patch/delete) served after call number ``since``."""
    return [c for c in emulator.calls[since:] if c.verb in WRITE_VERBS]


def objects(emulator: Emulator, key: str, namespace: str | None = None) -> dict[str, Any]:
    """Live objects of a resource by name."""
    return {o["metadata"]["name"]: o for o in emulator.objects_of(key, namespace)}
