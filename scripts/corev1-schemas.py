#!/usr/bin/env python3
"""Write operator/disagg_operator/api/corev1.json: the core/v1 shapes the spec passes
through to pods (and networking/v1's NetworkPolicyPeer),
as structural schemas, from Kubernetes' own OpenAPI definitions at one named version.

The definitions come from kubernetes-validate's offline copy (a dev dependency): the
"strict" JSON Schema form of the API server's OpenAPI, one file of ``$defs``. Each listed
type is inlined (a structural schema has no ``$ref``) and reduced to what a CRD may carry
and what an API server checks at admission: type, properties, items, maps, required,
enum, formats, int-or-string. Descriptions, patch strategies, list and map types, unions
and the JSON Schema ``null`` alternatives are dropped (pruning already refuses unknown
fields; list types would need defaults the definitions lack).

    scripts/corev1-schemas.py           # write the file
    scripts/corev1-schemas.py --check   # exit 1 when the file differs
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

KUBERNETES = "1.36.0"  # the newest release whose apiextensions-apiserver rules the emulator ports
# Kubernetes' own definitions' names: core/v1 unless another group is named.
OTHER_GROUPS = {"NetworkPolicyPeer": "io.k8s.api.networking.v1."}
TYPES = (
    "Affinity",
    "Container",
    "EnvVarSource",
    "LocalObjectReference",
    "NetworkPolicyPeer",
    "PodResourceClaim",
    "PodSecurityContext",
    "ResourceRequirements",
    "SecurityContext",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "VolumeMount",
)
OUT = Path(__file__).resolve().parent.parent / "operator/disagg_operator/api/corev1.json"
_PREFIX = "io.k8s.api.core.v1."
_KEEP = {"type", "properties", "items", "additionalProperties", "required", "enum", "format"}
_FORMATS = {"int32", "int64", "double", "byte", "date-time"}


def definitions() -> dict[str, Any]:
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = root / f"v{KUBERNETES}-local-strict" / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


def structural(node: Any, defs: dict[str, Any]) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return structural(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if "oneOf" in node:  # IntOrString, Quantity: a string or a number
        return {"x-kubernetes-int-or-string": True}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEEP:
            continue
        if key == "type":
            kinds = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
            out["type"] = kinds[0]
        elif key == "properties":
            out[key] = {k: structural(v, defs) for k, v in sorted(value.items())}
        elif key in ("items", "additionalProperties"):
            if isinstance(value, dict):
                out[key] = structural(value, defs)
        elif key == "format":
            if value in _FORMATS:
                out[key] = value
        else:
            out[key] = value
    return out


def build() -> dict[str, Any]:
    defs = definitions()
    full = {name: OTHER_GROUPS.get(name, _PREFIX) + name for name in TYPES}
    schemas = {name: structural(defs[full[name]], defs) for name in TYPES}
    groups = {name: full[name].split(".")[-3] + "/" + full[name].split(".")[-2] for name in TYPES}
    return {"kubernetes": KUBERNETES, "schemas": schemas, "groups": groups}


def text() -> str:
    return json.dumps(build(), sort_keys=True, separators=(",", ":")) + "\n"


def main(argv: list[str]) -> int:
    if "--check" in argv:
        if OUT.read_text() != text():
            print(f"{OUT} is stale: run scripts/corev1-schemas.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text())
    print(f"wrote {OUT} (Kubernetes {KUBERNETES}: {', '.join(TYPES)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
