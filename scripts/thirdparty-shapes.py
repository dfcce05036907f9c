#!/usr/bin/env python3
"""Hold each third-party shape (operator/disagg_operator/contracts: LeaderWorkerSet, PodMonitor,
PrometheusRule, InferencePool) to the upstream CRD it names, and what render writes to
those CRDs themselves. A development check: the CRDs are read from clones of the
upstream repositories, at the tag each shape's ``$comment`` names, never copied here.

    scripts/thirdparty-shapes.py kubernetes-sigs/lws=PATH \\
        prometheus-operator/prometheus-operator=PATH \\
        kubernetes-sigs/gateway-api-inference-extension=PATH

(PATH: any clone, bare or not, that has the tag.) It fails (exit 1) where a shape's field
is not the CRD's (absent, another type, enum, pattern or bound, a required field the shape
leaves out), where a built-in marker's definition differs from what the CRD embeds there,
or where an object rendered from examples/ (as is and with the variants below) carries a
field the CRD would prune or a value its schema refuses (openapi-schema-validator).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from openapi_schema_validator import OAS30Validator

from disagg_operator.contracts import shape
from disagg_operator.render.objects import render
from disagg_operator.validation.spec import InvalidSpec
from disagg_tools.emulator.rules import builtin, thirdparty

ROOT = Path(__file__).resolve().parent.parent
RULES = ("enum", "pattern", "minimum", "maximum", "minLength", "maxLength")
RULES += ("minItems", "maxItems", "minProperties", "maxProperties")
# Required by a CEL rule of the CRD rather than its OpenAPI ``required`` (path: the rule).
CEL_REQUIRED = {"spec.endpointPickerRef.port": "required where kind is Service, its default"}
VARIANTS: list[dict[str, Any]] = [
    {},
    {"monitoring": {"enabled": True}},
    {
        "llmd": {
            "enabled": True,
            "inferencePool": {"extensionRef": {"name": "epp", "failureMode": "FailOpen"}},
        }
    },
    {"gangScheduling": {"scheduler": "Volcano", "queue": "q"}},
    {
        "gangScheduling": {"scheduler": "Kueue", "queue": "q"},
        "placement": {"group": {"topologyKey": "rack", "mode": "Preferred"}},
    },
    {"placement": {"group": {"topologyKey": "rack"}}},
]


def crd_schema(clones: dict[str, str], declared: shape.Schema, api_version: str) -> Any:
    """The openAPIV3Schema of ``api_version`` in the CRD the shape's ``$comment`` names."""
    repo, tag, path = declared["$comment"].split()
    shown = subprocess.run(
        ["git", "-C", clones[repo], "show", f"{tag}:{path}"], capture_output=True, text=True
    )
    if shown.returncode:
        sys.exit(f"{repo} {tag}:{path}: {shown.stderr.strip()}")
    version = api_version.rsplit("/", 1)[-1]
    crd = yaml.safe_load(shown.stdout)
    return next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"][
        "openAPIV3Schema"
    ]


def compare(mine: shape.Schema, theirs: dict[str, Any], where: str) -> list[str]:
    """Where the shape ``mine`` is not the CRD node ``theirs`` (every rule both ways)."""
    if shape.BUILTIN in mine:
        return embedded(theirs, thirdparty.schema(mine), where)
    out = []
    if mine.get("x-kubernetes-int-or-string") != theirs.get("x-kubernetes-int-or-string"):
        out.append(f"{where}: int-or-string differs")
    if mine.get("type") != theirs.get("type"):
        out.append(f"{where}: type {mine.get('type')}, the CRD's {theirs.get('type')}")
    for rule in RULES:
        if _norm(mine.get(rule)) != _norm(theirs.get(rule)):
            out.append(f"{where}: {rule} {mine.get(rule)}, the CRD's {theirs.get(rule)}")
    extra = set(mine.get("required", [])) - set(theirs.get("required", []))
    if missing := set(theirs.get("required", [])) - set(mine.get("required", [])):
        out.append(f"{where}: the CRD requires {sorted(missing)}")
    out += [f"{where}: {f} required" for f in extra if _join(where, f) not in CEL_REQUIRED]
    for name, node in mine.get("properties", {}).items():
        if name not in theirs.get("properties", {}):
            out.append(f"{_join(where, name)}: not in the CRD")
        else:
            out += compare(node, theirs["properties"][name], _join(where, name))
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(mine.get(key), dict):
            out += compare(mine[key], theirs.get(key) or {}, where + suffix)
    return out


def embedded(theirs: dict[str, Any], ours: dict[str, Any], where: str) -> list[str]:
    """Where the CRD's embedded copy of a Kubernetes type differs from the definition the
    checker judges it by (field names, types, enums, required), recursively."""
    if where == "metadata" and set(theirs) <= {"type", "description"}:
        return []  # the root's ObjectMeta: the API server's own, whatever the CRD says
    out = []
    kind = [t for t in _list(ours.get("type")) if t != "null"]
    if "x-kubernetes-int-or-string" not in theirs and kind and theirs.get("type") not in kind:
        out.append(f"{where}: type {kind}, the CRD's {theirs.get('type')}")
    if _norm(theirs.get("enum")) != _norm(ours.get("enum")):
        out.append(f"{where}: enum {ours.get('enum')}, the CRD's {theirs.get('enum')}")
    if set(theirs.get("required", [])) != set(ours.get("required", [])):
        out.append(f"{where}: required {ours.get('required')}, the CRD's {theirs.get('required')}")
    mine, crd = ours.get("properties", {}), theirs.get("properties", {})
    out += [f"{_join(where, k)}: not in the CRD" for k in sorted(set(mine) - set(crd))]
    out += [f"{_join(where, k)}: only in the CRD" for k in sorted(set(crd) - set(mine))]
    for name in sorted(set(mine) & set(crd)):
        out += embedded(crd[name], mine[name], _join(where, name))
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(ours.get(key), dict) and isinstance(theirs.get(key), dict):
            out += embedded(theirs[key], ours[key], where + suffix)
    return out


def pruned(obj: Any, node: dict[str, Any], where: str) -> list[str]:
    """The fields of ``obj`` the CRD node ``node`` does not declare (what pruning drops)."""
    if node.get("x-kubernetes-preserve-unknown-fields") or where == "metadata":
        return []
    out = []
    if isinstance(obj, dict) and "properties" in node:
        for key, value in obj.items():
            if key not in node["properties"]:
                out.append(_join(where, key))
            else:
                out += pruned(value, node["properties"][key], _join(where, key))
    elif isinstance(obj, dict) and isinstance(node.get("additionalProperties"), dict):
        for key, value in obj.items():
            out += pruned(value, node["additionalProperties"], f"{where}[{key}]")
    elif isinstance(obj, list) and "items" in node:
        for i, item in enumerate(obj):
            out += pruned(item, node["items"], f"{where}[{i}]")
    return out


def rendered() -> list[dict[str, Any]]:
    """Every object of a third-party kind render makes of examples/ and the variants."""
    bodies = []
    for path in sorted(ROOT.glob("examples/**/*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "DisaggregatedDeployment":
                bodies += [_with(doc, variant) for variant in VARIANTS]
    out = []
    for body in bodies:
        try:
            objects = render(body, hmac_key="k" * 32)
        except InvalidSpec:
            continue  # a variant this example cannot take
        out += [o for o in objects if (o["apiVersion"], o["kind"]) in thirdparty.SHAPES]
    return out


def main(argv: list[str]) -> int:
    clones = dict(arg.split("=", 1) for arg in argv)
    problems: list[str] = []
    schemas = {}
    for (api_version, kind), declared in thirdparty.SHAPES.items():
        schemas[kind] = crd_schema(clones, declared, api_version)
        found = compare(declared, schemas[kind], "")
        problems += [f"{kind} shape: {p}" for p in found]
        print(f"{kind}: shape checked against {declared['$comment']}")
    counts: dict[str, int] = {}
    for obj in rendered():
        kind, name = obj["kind"], obj["metadata"]["name"]
        counts[kind] = counts.get(kind, 0) + 1
        problems += [f"{kind} {name}: {p} pruned" for p in pruned(obj, schemas[kind], "")]
        errors = OAS30Validator(schemas[kind]).iter_errors(obj)
        problems += [f"{kind} {name}: {builtin.path(e.absolute_path)}: {e.message}" for e in errors]
    print("rendered objects checked against their CRD:", counts)
    print("\n".join(problems) or "no difference")
    return 1 if problems else 0


def _with(doc: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    body = yaml.safe_load(yaml.safe_dump(doc))
    body["metadata"].setdefault("uid", "uid-example")
    body["spec"].update(variant)
    return body


def _norm(value: Any) -> Any:
    return sorted(value) if isinstance(value, list) else value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
