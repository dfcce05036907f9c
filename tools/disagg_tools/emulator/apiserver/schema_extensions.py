"""The ``x-kubernetes-*`` extensions of a CRD schema node, as kube-apiserver checks them.

Ports the extension part of ``ValidateCustomResourceDefinitionOpenAPISchema`` and
``validateMapListKeysMapSet`` (apiextensions-apiserver v0.36.3
``pkg/apis/apiextensions/validation/validation.go``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import gofmt
from disagg_tools.emulator.apiserver.fielderrors import FieldError

if TYPE_CHECKING:
    from disagg_tools.emulator.apiserver.schema_rules import Options

Schema = Mapping[str, Any]


def extension_rules(schema: Schema, path: str, opts: Options) -> list[FieldError]:
    errs: list[FieldError] = []
    typ = schema.get("type") or ""
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if preserve is not None and not preserve:
        errs.append(
            fe.invalid(
                fe.child(path, "x-kubernetes-preserve-unknown-fields"),
                False,
                "must be true or undefined",
            )
        )
    map_type = schema.get("x-kubernetes-map-type")
    if map_type is not None and typ != "object":
        errs.append(_type_error(path, typ, "must be object if x-kubernetes-map-type is specified"))
    if map_type is not None and map_type not in ("atomic", "granular"):
        errs.append(
            fe.not_supported(
                fe.child(path, "x-kubernetes-map-type"), map_type, ["atomic", "granular"]
            )
        )
    errs += _list_type_rules(schema, path, opts)
    if opts.require_map_list_keys_map_set_validation:
        errs += map_list_keys_map_set(schema, path)
    return errs


def _type_error(path: str, typ: str, detail: str) -> FieldError:
    at = fe.child(path, "type")
    return fe.required(at, detail) if not typ else fe.invalid(at, typ, detail)


def _list_type_rules(schema: Schema, path: str, opts: Options) -> list[FieldError]:
    errs: list[FieldError] = []
    typ = schema.get("type") or ""
    list_type = schema.get("x-kubernetes-list-type")
    items = schema.get("items")
    item = items if isinstance(items, Mapping) else None
    if list_type is not None and typ != "array":
        errs.append(_type_error(path, typ, "must be array if x-kubernetes-list-type is specified"))
    elif opts.require_atomic_set_type and list_type == "set" and item is not None:
        errs += _set_items_atomic(item, path)
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(
            fe.not_supported(
                fe.child(path, "x-kubernetes-list-type"), list_type, ["atomic", "set", "map"]
            )
        )
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if keys:
        lt_path = fe.child(path, "x-kubernetes-list-type")
        if list_type is None:
            errs.append(
                fe.required(lt_path, "must be map if x-kubernetes-list-map-keys is non-empty")
            )
        elif list_type != "map":
            errs.append(
                fe.invalid(
                    lt_path, list_type, "must be map if x-kubernetes-list-map-keys is non-empty"
                )
            )
    if list_type == "map":
        errs += _list_map_rules(schema, path, keys, items)
    return errs


def _set_items_atomic(item: Schema, path: str) -> list[FieldError]:
    detail = "must be atomic as item of a list with x-kubernetes-list-type=set"
    items_path = fe.child(path, "items")
    if item.get("type") == "array":
        lt = item.get("x-kubernetes-list-type")
        if lt is not None and lt != "atomic":
            return [fe.invalid(fe.child(items_path, "x-kubernetes-list-type"), lt, detail)]
    if item.get("type") == "object" and item.get("x-kubernetes-map-type") != "atomic":
        # upstream reports the items' list type here (a nil *string prints as null)
        return [
            fe.invalid(
                fe.child(items_path, "x-kubernetes-map-type"),
                item.get("x-kubernetes-list-type"),
                detail,
            )
        ]
    return []


def _list_map_rules(schema: Schema, path: str, keys: list[str], items: Any) -> list[FieldError]:
    keys_path = fe.child(path, "x-kubernetes-list-map-keys")
    items_path = fe.child(path, "items")
    errs: list[FieldError] = []
    if not keys:
        errs.append(fe.required(keys_path, "must not be empty if x-kubernetes-list-type is map"))
    if items is None:
        detail = "must have a schema if x-kubernetes-list-type is map"
        return [*errs, fe.required(items_path, detail)]
    if not isinstance(items, Mapping):
        detail = "must only have a single schema if x-kubernetes-list-type is map"
        return [*errs, fe.invalid(items_path, gofmt.items_value(items), detail)]
    item_type = items.get("type") or ""
    if item_type != "object":
        detail = "must be object if parent array's x-kubernetes-list-type is map"
        return [*errs, fe.invalid(fe.child(items_path, "type"), item_type, detail)]
    return errs + _map_keys(items, items_path, keys, keys_path)


def _map_keys(items: Schema, items_path: str, keys: list[str], keys_path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    props = items.get("properties") or {}
    for i, k in enumerate(keys):
        if k not in props:
            detail = "entries must all be names of item properties"
            errs.append(fe.invalid(keys_path, list(keys), detail))
        elif props[k].get("type") in ("array", "object"):
            # upstream reports the items' type ("object") as the bad value
            at = fe.child(fe.key(fe.child(items_path, "properties"), k), "type")
            detail = "must be a scalar type if parent array's x-kubernetes-list-type is map"
            errs.append(fe.invalid(at, items.get("type"), detail))
        if k in keys[:i]:
            errs.append(fe.invalid(keys_path, list(keys), "must not contain duplicate entries"))
    return errs


def map_list_keys_map_set(schema: Schema, path: str) -> list[FieldError]:
    """``validateMapListKeysMapSet``: set/map items and map keys are never null."""
    items = schema.get("items")
    list_type = schema.get("x-kubernetes-list-type")
    if not isinstance(items, Mapping) or list_type not in ("set", "map"):
        return []
    errs: list[FieldError] = []
    items_path = fe.child(path, "items")
    if items.get("nullable"):
        errs.append(
            fe.forbidden(
                fe.child(items_path, "nullable"),
                "cannot be nullable when x-kubernetes-list-type is " + list_type,
            )
        )
    if list_type == "map":
        required = set(items.get("required") or [])
        props = items.get("properties") or {}
        for k in schema.get("x-kubernetes-list-map-keys") or []:
            if k not in props:
                continue
            key_path = fe.key(fe.child(items_path, "properties"), k)
            if k not in required and props[k].get("default") is None:
                errs.append(
                    fe.required(
                        fe.child(key_path, "default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a "
                        "default or be a required property",
                    )
                )
            if props[k].get("nullable"):
                errs.append(
                    fe.forbidden(
                        fe.child(key_path, "nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    )
                )
    return errs
