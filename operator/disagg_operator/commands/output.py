"""``-o yaml|json`` for the commands that print objects (`disagg render`, `disagg crd`):
kubectl's spelling and shapes (YAML documents, or JSON: the object, or a ``v1`` List of
several), so the output pipes into ``kubectl apply -f -`` or ``jq`` alike.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

FORMATS = ("yaml", "json")


class _NoAliases(yaml.SafeDumper):
    """YAML without anchors: shared dicts (labels) printed in full at each place."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default="yaml", help="how to print the objects"
    )


def dumps(objects: list[dict[str, Any]], fmt: str) -> str:
    """``objects`` as ``fmt``: YAML documents (``---`` before each), or JSON."""
    if fmt == "json":
        one = (
            objects[0]
            if len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        return json.dumps(one, indent=2) + "\n"
    return yaml.dump_all(objects, Dumper=_NoAliases, sort_keys=False, explicit_start=True)
