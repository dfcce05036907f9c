"""The core/v1 shapes the spec passes through to pods (Volume, Container, Affinity, ...),
as structural schemas from Kubernetes' own OpenAPI at one named version.

Part of :mod:`disagg_operator.api`: immutable data read once from ``corev1.json`` beside
this module (made by ``scripts/corev1-schemas.py``; a test fails when it drifts from the
definitions). The CRD embeds them, so an API server refuses a malformed volume or affinity
when the resource is applied; :mod:`disagg_operator. validation.corev1` checks the same
schemas for ``disagg render`` and ``disagg up``.
"""

from __future__ import annotations

import json
from importlib import resources
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import WithJsonSchema

_DATA = json.loads(resources.files(__package__).joinpath("corev1.json").read_text())

KUBERNETES: str = _DATA["kubernetes"]
SCHEMAS: MappingProxyType[str, Any] = MappingProxyType(_DATA["schemas"])
GROUPS: MappingProxyType[str, str] = MappingProxyType(_DATA["groups"])  # kind → core/v1, ...


def schema(kind: str) -> dict[str, Any]:
    """The structural schema of ``kind``, with a description naming it."""
    return {**SCHEMAS[kind], "description": f"{GROUPS[kind]} {kind} (Kubernetes {KUBERNETES})"}


def shape(kind: str) -> Any:
    """A pydantic type for a core/v1 object passed through as a dict: the CRD gets the
    upstream schema; :mod:`disagg_operator.validation.corev1` checks values against it
    (its table of where each shape sits in the spec)."""
    return Annotated[dict[str, Any], WithJsonSchema(schema(kind))]
