"""Test-side access to the API emulator: fixtures' building blocks, reusable by any suite.

The emulator itself lives in :mod:`disagg_operator.emulator.server` (the benchmark needs it too);
this module re-exports it and adds the project-specific setup: serving the
DisaggregatedDeployment CRD from ``crds/`` and writing a kubeconfig for kubectl, Helm and the
``kubernetes`` client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from disagg_operator.api import SHORT_NAMES
from disagg_operator.emulator.rules.ops import WRITE_VERBS
from disagg_operator.emulator.server import ApiCall, Emulator, api_calls, kubeconfig

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
DD_KEY = "disagg.dev/v1alpha1/disaggregateddeployments"
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


def serve_project_crds(emulator: Emulator, crds_dir: Path = ROOT / "crds") -> None:
    """Serve every CRD in ``crds/``; fall back to a bare DisaggregatedDeployment resource."""
    served = False
    for path in sorted(crds_dir.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                emulator.put_object(CRDS, doc)  # stored, as kubectl looks CRDs up; and served
                served = True
    if not served:
        emulator.register(
            DD_KEY,
            "DisaggregatedDeployment",
            subresources=("status",),
            shortnames=tuple(SHORT_NAMES),
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
