"""Printer columns of the API emulator: ``kubectl get`` tables and the JSONPath they read.

Under :mod:`disagg_tools.emulator.server` (a dev/bench tool): a ``meta.k8s.io/v1`` Table
built from a CRD's ``additionalPrinterColumns``, with the JSONPath subset printer columns
(and a scale subresource's paths) use.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any

_JSONPATH_TOKEN = re.compile(
    r"\.([\w-]+)|\[\?\(@\.([\w-]+)\s*==\s*[\"']([^\"']*)[\"']\)\]|\[(\d+)\]"
)


def jsonpath(obj: Any, path: str) -> list[Any]:
    """The values at a printer-column JSONPath: ``.a.b``, ``[0]``, ``[?(@.k=="v")]``."""
    values = [obj]
    for match in _JSONPATH_TOKEN.finditer(path):
        key, fkey, fvalue, index = match.groups()
        found: list[Any] = []
        for value in values:
            if key is not None and isinstance(value, Mapping) and key in value:
                found.append(value[key])
            elif fkey is not None and isinstance(value, list):
                found += [v for v in value if isinstance(v, Mapping) and v.get(fkey) == fvalue]
            elif index is not None and isinstance(value, list) and int(index) < len(value):
                found.append(value[int(index)])
        values = found
    return values


def _age(timestamp: str) -> str:
    """How API servers print a date column: 42s, 5m, 3h, 2d."""
    then = datetime.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")
    now = datetime.datetime.now(tz=datetime.timezone.utc).replace(tzinfo=None)
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size, limit in (("s", 1, 120), ("m", 60, 7200), ("h", 3600, 172800)):
        if seconds < limit:
            return f"{seconds // size}{unit}"
    return f"{seconds // 86400}d"


def table(items: list[dict[str, Any]], columns: list[dict[str, Any]], rv: str) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table, as API servers answer ``kubectl get`` for printer columns."""
    defs = [{"name": "Name", "type": "string", "format": "name", "priority": 0}]
    defs += [
        {
            "name": c["name"],
            "type": c.get("type", "string"),
            "format": "",
            "description": c.get("description", ""),
            "priority": c.get("priority", 0),
        }
        for c in columns
    ]
    rows = []
    for item in items:
        cells: list[Any] = [item["metadata"]["name"]]
        for column in columns:
            found = jsonpath(item, column["jsonPath"])
            if found and column.get("type") == "date":
                found = [_age(str(found[0]))]
            cells.append(",".join(str(v) for v in found) if found else None)
        partial = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": item["metadata"],
        }
        rows.append({"cells": cells, "object": partial})
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": defs,
        "rows": rows,
    }
