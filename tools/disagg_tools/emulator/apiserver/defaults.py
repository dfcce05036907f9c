"""A schema's defaults must be values the apiserver would accept, and already pruned.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/defaulting/validation.go``
(``ValidateDefaults``) and ``schema/objectmeta`` (``coerce.go``, ``validation.go``); pruning,
the OpenAPI check and the CEL rules are the writes' own (:mod:`.pruning`, :mod:`.cel`).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from disagg_tools.emulator.apiserver import cel, cel_compile, cel_types, names, pruning
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.schema_validation import SchemaCheck
from disagg_tools.emulator.apiserver.structural import Structural, new_structural, to_props

_META = ("apiVersion", "kind", "metadata")
_TYPE_META = {"apiVersion": "validation/v1", "kind": "Validation"}
Step = tuple[str, str]  # ("key", name) | ("index", "")


def validate_defaults(
    path: str, s: Structural | None, is_resource_root: bool, require_pruned: bool
) -> list[FieldError]:
    """``ValidateDefaults``: every default valid, and unchanged by pruning."""
    if is_resource_root:
        s = s or Structural()
        if not s.extensions.embedded_resource:
            s = _embedded(s)
    return _validate(path, s, s, [], False, require_pruned)


def validate_node(path: str, s: Structural, require_pruned: bool) -> list[FieldError]:
    """Upstream's recursive ``validate`` step from ``s`` as its own root (not embedded)."""
    return _validate(path, s, s, [], False, require_pruned)


def _embedded(s: Structural) -> Structural:
    return dataclasses.replace(
        s, extensions=dataclasses.replace(s.extensions, embedded_resource=True)
    )


def _validate(
    path: str,
    s: Structural | None,
    root: Structural | None,
    steps: list[Step],
    inside_meta: bool,
    require_pruned: bool,
) -> list[FieldError]:
    if s is None or root is None:
        return []
    if s.extensions.embedded_resource:
        inside_meta, steps, root = False, [], s
    errs: list[FieldError] = []
    if s.generic.default is not None:
        errs += _default(path, s, root, steps, inside_meta, require_pruned)
    if s.items is not None:
        errs += _validate(
            fe.child(path, "items"),
            s.items,
            root,
            [*steps, ("index", "")],
            inside_meta,
            require_pruned,
        )
    for name, prop in s.props().items():
        sub_meta = inside_meta or (s.extensions.embedded_resource and name in _META)
        errs += _validate(
            fe.key(fe.child(path, "properties"), name),
            prop,
            root,
            [*steps, ("key", name)],
            sub_meta,
            require_pruned,
        )
    return errs


def _default(
    path: str,
    s: Structural,
    root: Structural,
    steps: list[Step],
    inside_meta: bool,
    require_pruned: bool,
) -> list[FieldError]:
    at = fe.child(path, "default")
    default = s.generic.default
    if inside_meta:
        surrounding = _surround(copy.deepcopy(default), steps)
        problem, coerced = coerce("", surrounding, root, True)
        if problem is not None:
            return [fe.invalid(at, default, f"must result in valid metadata: {problem}")]
        meta_errs = validate_meta("", coerced, root, True)
        if meta_errs:
            return [
                fe.invalid(at, default, f"must result in valid metadata: {fe.aggregate(meta_errs)}")
            ]
        return _value_and_rules(at, s, default, s is root)
    errs: list[FieldError] = []
    if require_pruned and _pruned(default, s) != default:
        errs.append(fe.invalid(at, default, "must not have unknown fields"))
    problem, coerced = coerce(at, copy.deepcopy(default), s, s.extensions.embedded_resource)
    if problem is not None:
        return [*errs, problem]
    meta_errs = validate_meta(at, coerced, s, s.extensions.embedded_resource)
    if meta_errs:
        return errs + meta_errs
    return errs + _value_and_rules(at, s, coerced, s is root)


def _value_and_rules(at: str, s: Structural, value: Any, is_root: bool) -> list[FieldError]:
    schema = to_props(s)
    errs = SchemaCheck(schema, converted=False).validate(value, at)
    if errs:
        return errs
    # a rule cel-python cannot run stays unrun here: registering the CRD's writes refuses it
    rules = cel.build(schema, is_root, check=_compile_errors, strict=False)
    errs = cel.validate(rules, value, value, path=at).errors
    if not errs:  # ratcheting: the default must also pass as a create (no old value)
        errs = cel.validate(rules, value, None, path=at).errors
    return errs


def _compile_errors(
    rules: list[dict[str, Any]], schema: dict[str, Any], root: bool
) -> list[str] | None:
    """``cel.Compile`` of a node's rules against its CEL type: each one's error ("" when it
    compiles), or None when the node has no CEL type (its rules are not run)."""
    decl = cel_types.schema_decl_type(new_structural(schema), root)
    if decl is None:
        return None
    results = cel_compile.compile_rules(rules, decl)
    return [r.error.detail if r.error is not None else "" for r in results]


def _surround(value: Any, steps: list[Step]) -> dict[str, Any]:
    """The surrounding object of a default at ``steps`` below its embedded resource."""
    for kind, name in reversed(steps):
        value = {name: value} if kind == "key" else [value]
    obj = value if isinstance(value, dict) else {}
    for key, meta in _TYPE_META.items():
        obj.setdefault(key, meta)
    return obj


def _pruned(default: Any, s: Structural) -> Any:
    """``pruning.Prune`` of a copy of ``default`` (an embedded resource: its own root)."""
    pruned = copy.deepcopy(default)
    pruning.prune(pruned, to_props(s), is_resource_root=s.extensions.embedded_resource)
    return pruned


# --- ObjectMeta of embedded resources ---------------------------------------------------------

_META_STRINGS = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion")
_META_INTS = ("generation", "deletionGracePeriodSeconds")
_META_MAPS = ("labels", "annotations")
_META_LISTS = ("finalizers", "ownerReferences", "managedFields")


def _typed_meta(meta: Any) -> tuple[dict[str, Any] | None, str | None]:
    """ObjectMeta decoded as Go's ``json.Unmarshal`` would: known fields typed, the rest
    dropped; a wrongly typed known field is an error."""
    if not isinstance(meta, dict):
        return (
            None,
            f"json: cannot unmarshal {_json_kind(meta)} into Go value of type v1.ObjectMeta",
        )
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if value is None:
            continue
        expected = (
            "string"
            if key in _META_STRINGS or key in ("creationTimestamp", "deletionTimestamp")
            else "int64"
            if key in _META_INTS
            else "map[string]string"
            if key in _META_MAPS
            else "[]"
            if key in _META_LISTS
            else None
        )
        if expected is None:
            continue
        if not _fits(value, expected):
            return None, (
                f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                f"ObjectMeta.{key} of type {expected if expected != '[]' else '[]string'}"
            )
        if value not in ("", {}, []):
            out[key] = value
    return out, None


def _fits(value: Any, expected: str) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "int64":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "map[string]string":
        return isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
    return isinstance(value, list)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def coerce(
    path: str, x: Any, s: Structural | None, is_resource_root: bool
) -> tuple[FieldError | None, Any]:
    """``objectmeta.Coerce`` (not dropping): (the first problem, the coerced value)."""
    if is_resource_root:
        s = s or Structural()
        if not s.extensions.embedded_resource:
            s = _embedded(s)
    return _coerce(path, x, s)


def _coerce(path: str, x: Any, s: Structural | None) -> tuple[FieldError | None, Any]:
    if s is None:
        return None, x
    if isinstance(x, list):
        for i, v in enumerate(x):
            problem, x[i] = _coerce(fe.index(path, i), v, s.items)
            if problem is not None:
                return problem, x
    if not isinstance(x, dict):
        return None, x
    for k in sorted(x):
        problem = _coerce_meta(path, x, k) if s.extensions.embedded_resource else None
        if problem is None and k in s.props():
            problem, x[k] = _coerce(fe.child(path, k), x[k], s.props()[k])
        elif problem is None and s.additional_properties is not None:
            problem, x[k] = _coerce(fe.key(path, k), x[k], s.additional_properties.structural)
        if problem is not None:
            return problem, x
    return None, x


def _coerce_meta(path: str, x: dict[str, Any], k: str) -> FieldError | None:
    """An embedded resource's apiVersion and kind are strings, its metadata an ObjectMeta
    (decoded as Go would, unknown fields dropped)."""
    v = x[k]
    if k in ("apiVersion", "kind") and not isinstance(v, str):
        return fe.invalid(fe.child(path, k), v, "must be a string")
    if k == "metadata":
        meta, problem = _typed_meta(v)
        if problem is not None:
            return fe.invalid(fe.child(path, "metadata"), v, problem)
        x[k] = meta
    return None


def validate_meta(
    path: str, x: Any, s: Structural | None, is_resource_root: bool
) -> list[FieldError]:
    """``objectmeta.Validate``: apiVersion, kind and metadata of every embedded resource."""
    if is_resource_root:
        s = s or Structural()
        if not s.extensions.embedded_resource:
            s = _embedded(s)
    return _validate_meta(path, x, s)


def _validate_meta(path: str, x: Any, s: Structural | None) -> list[FieldError]:
    if s is None:
        return []
    errs: list[FieldError] = []
    if isinstance(x, dict):
        if s.extensions.embedded_resource:
            errs += _embedded_resource(path, x)
        for k in sorted(x):
            if k in s.props():
                errs += _validate_meta(fe.child(path, k), x[k], s.props()[k])
            elif s.additional_properties is not None:
                errs += _validate_meta(fe.key(path, k), x[k], s.additional_properties.structural)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            errs += _validate_meta(fe.index(path, i), v, s.items)
    return errs


def _embedded_resource(path: str, x: dict[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in ("apiVersion", "kind"):
        if key not in x:
            errs.append(fe.required(fe.child(path, key), ""))
    for key in sorted(x):
        v = x[key]
        at = fe.child(path, key)
        if key in ("apiVersion", "kind"):
            if not isinstance(v, str):
                errs.append(fe.invalid(at, v, "must be a string"))
            elif not v:
                errs.append(fe.invalid(at, v, "must not be empty"))
            elif key == "apiVersion" and v.count("/") > 1:
                errs.append(fe.invalid(at, v, f"unexpected GroupVersion string: {v}"))
            elif key == "kind" and names.is_dns1035_label(v.lower()):
                detail = "may have mixed case, but should otherwise match: " + ",".join(
                    names.is_dns1035_label(v.lower())
                )
                errs.append(fe.invalid(at, v, detail))
        elif key == "metadata":
            meta, problem = _typed_meta(v)
            if problem is not None or meta is None:
                errs.append(fe.invalid(at, v, problem or "invalid metadata"))
                continue
            meta = dict(meta)
            meta.setdefault("name", "fakename")
            errs += names.validate_object_meta(
                meta, bool(meta.get("namespace")), names.path_segment_name, at
            )
    return errs
