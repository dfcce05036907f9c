"""A CRD's spec as kube-apiserver checks it: group, scope, versions, names, schema options.

Ports ``validateCustomResourceDefinitionSpec`` and its helpers (apiextensions-apiserver
v0.36.3 ``pkg/apis/apiextensions/validation/validation.go``) over the internal form
(:mod:`.crd`), errors in upstream's order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.apiserver import cel_rules, gofmt, names, schema_rules
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.crd_conversion import validate_conversion
from disagg_tools.emulator.apiserver.crd_subresources import (
    selectable,
    top_selectable,
    validate_column,
    validate_subresources,
)
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.schema_rules import Options

Spec = Mapping[str, Any]
Costs = list[cel_rules.RuleCost]


def validate_spec(spec: Spec, opts: Options, path: str, costs: Costs) -> list[FieldError]:
    """``validateCustomResourceDefinitionSpec``; estimated rule costs go to ``costs``."""
    errs = _group(str(spec.get("group") or ""), fe.child(path, "group"))
    errs += _scope(str(spec.get("scope") or ""), fe.child(path, "scope"))
    opts, found = _schema_options(spec, opts, path)
    errs += found
    errs += _versions(spec, opts, path, costs)
    names_ = spec.get("names") or {}
    errs += [
        fe.required(fe.child(path, "names", key), "")
        for key in _REQUIRED_NAMES
        if not names_.get(key)
    ]
    errs += validate_names(names_, fe.child(path, "names"))
    errs += schema_rules.validate_validation(
        spec.get("validation"), _any_status(spec), opts, fe.child(path, "validation"), costs
    )
    errs += _served(spec, path)
    if spec.get("selectableFields"):
        errs += top_selectable(spec, path)
    errs += _conversion(spec, opts, path)
    return errs


_REQUIRED_NAMES = ("plural", "singular", "kind", "listKind")


def _group(group: str, path: str) -> list[FieldError]:
    if not group:
        return [fe.required(path, "")]
    problems = names.is_dns1123_subdomain(group)
    if problems:
        return [fe.invalid(path, group, ",".join(problems))]
    if len(group.split(".")) < 2:
        return [fe.invalid(path, group, "should be a domain with at least one dot")]
    return []


def _scope(scope: str, path: str) -> list[FieldError]:
    if not scope:
        return [fe.required(path, "")]
    if scope not in ("Cluster", "Namespaced"):
        return [fe.not_supported(path, scope, ["Cluster", "Namespaced"])]
    return []


def _schema_options(spec: Spec, opts: Options, path: str) -> tuple[Options, list[FieldError]]:
    """Schemas must be structural with pruning, defaults or Kubernetes extensions."""
    preserve = spec.get("preserveUnknownFields")
    if not preserve:
        opts = dataclasses.replace(opts, require_structural_schema=True)
    errs = _schemas_present(spec, list(spec.get("versions") or []), opts, path, preserve)
    if opts.allow_defaults and _any_schema(spec, _has_default):
        opts = dataclasses.replace(opts, require_structural_schema=True)
        if preserve is None or preserve:
            detail = "must be false in order to use defaults in the schema"
            errs.append(fe.invalid(fe.child(path, "preserveUnknownFields"), True, detail))
    if _any_schema(spec, _has_kubernetes_extension):
        opts = dataclasses.replace(opts, require_structural_schema=True)
    return opts, errs


def _served(holder: Mapping[str, Any], path: str) -> list[FieldError]:
    """Subresources and printer columns, top-level or of one version."""
    errs = validate_subresources(holder.get("subresources"), fe.child(path, "subresources"))
    for i, column in enumerate(holder.get("additionalPrinterColumns") or []):
        errs += validate_column(column, fe.index(fe.child(path, "additionalPrinterColumns"), i))
    return errs


def _conversion(spec: Spec, opts: Options, path: str) -> list[FieldError]:
    conversion = spec.get("conversion")
    preserve = spec.get("preserveUnknownFields")
    errs: list[FieldError] = []
    if conversion is not None and conversion.get("strategy") != "None" and preserve is not False:
        strategy = conversion.get("strategy") or ""
        detail = "must be None if spec.preserveUnknownFields is true"
        errs.append(fe.invalid(fe.child(path, "conversion", "strategy"), strategy, detail))
    required = opts.require_recognized_conversion_review_version
    return errs + validate_conversion(conversion, required, fe.child(path, "conversion"))


def _schema_of(holder: Mapping[str, Any] | None) -> Any:
    return (holder or {}).get("openAPIV3Schema")


def _schemas_present(
    spec: Spec, versions: list[Any], opts: Options, path: str, preserve: Any
) -> list[FieldError]:
    if _schema_of(spec.get("validation")) is not None:
        return []
    errs: list[FieldError] = []
    for i, v in enumerate(versions):
        at = fe.child(fe.index(fe.child(path, "versions"), i), "schema", "openAPIV3Schema")
        if _schema_of(v.get("schema")) is not None:
            continue
        if opts.require_open_api_schema:
            errs.append(fe.required(at, ""))
        elif not preserve and v.get("served"):
            errs.append(fe.required(at, "because otherwise all fields are pruned"))
    return errs


def _all_schemas(spec: Spec) -> list[Any]:
    found = [_schema_of(spec.get("validation"))]
    found += [_schema_of(v.get("schema")) for v in spec.get("versions") or []]
    return [s for s in found if s is not None]


def _any_schema(spec: Spec, predicate: Any) -> bool:
    return any(_schema_has(s, predicate) for s in _all_schemas(spec))


def _schema_has(s: Any, predicate: Any) -> bool:
    """``SchemaHas``: ``predicate`` holds at some node of ``s``."""
    if not isinstance(s, Mapping):
        return False
    if predicate(s):
        return True
    subs: list[Any] = []
    items = s.get("items")
    subs += items if isinstance(items, list) else [items]
    for key in ("allOf", "anyOf", "oneOf"):
        subs += s.get(key) or []
    subs.append(s.get("not"))
    for key in ("properties", "patternProperties", "definitions", "dependencies"):
        subs += list((s.get(key) or {}).values())
    subs += [s.get("additionalProperties"), s.get("additionalItems")]
    return any(_schema_has(sub, predicate) for sub in subs)


def _has_default(s: Mapping[str, Any]) -> bool:
    return s.get("default") is not None


def _has_kubernetes_extension(s: Mapping[str, Any]) -> bool:
    return bool(
        s.get("x-kubernetes-embedded-resource")
        or s.get("x-kubernetes-preserve-unknown-fields") is not None
        or s.get("x-kubernetes-int-or-string")
        or s.get("x-kubernetes-list-map-keys")
        or s.get("x-kubernetes-list-type") is not None
        or s.get("x-kubernetes-validations")
    )


def _any_status(spec: Spec) -> bool:
    holders = [spec.get("subresources")] + [
        v.get("subresources") for v in spec.get("versions") or []
    ]
    return any(h is not None and h.get("status") is not None for h in holders)


def _versions(spec: Spec, opts: Options, path: str, costs: Costs) -> list[FieldError]:
    versions = list(spec.get("versions") or [])
    at = fe.child(path, "versions")
    per_version = any(v.get("subresources") is not None for v in versions)
    errs: list[FieldError] = []
    for i, v in enumerate(versions):
        name = str(v.get("name") or "")
        problems = names.is_dns1035_label(name)
        if problems:
            errs.append(fe.invalid(fe.child(fe.index(at, i), "name"), name, ",".join(problems)))
        subresources = v.get("subresources") if per_version else spec.get("subresources")
        status = subresources is not None and subresources.get("status") is not None
        errs += _version(v, fe.index(at, i), status, opts, costs)
    errs += _exclusive(spec, versions, path)
    shown = gofmt.versions(versions)
    if len({str(v.get("name") or "") for v in versions}) != len(versions):
        errs.append(fe.invalid(at, shown, "must contain unique version names"))
    if sum(1 for v in versions if v.get("storage")) != 1:
        errs.append(
            fe.invalid(at, shown, "must have exactly one version marked as storage version")
        )
    return errs + _version_name(str(spec.get("version") or ""), versions, path)


def _version_name(version: str, versions: list[Any], path: str) -> list[FieldError]:
    if not version:
        return []
    at = fe.child(path, "version")
    errs = [fe.invalid(at, version, ",".join(p)) for p in [names.is_dns1035_label(version)] if p]
    if versions and versions[0].get("name") != version:
        errs.append(fe.invalid(at, version, "must match the first version in spec.versions"))
    return errs


def _version(
    v: Mapping[str, Any], path: str, status: bool, opts: Options, costs: Costs
) -> list[FieldError]:
    warning = v.get("deprecationWarning")
    errs = [
        fe.invalid(fe.child(path, "deprecationWarning"), warning, problem)
        for problem in deprecation_warning(bool(v.get("deprecated")), warning)
    ]
    errs += schema_rules.validate_validation(
        v.get("schema"), status, opts, fe.child(path, "schema"), costs
    )
    errs += _served(v, path)
    if v.get("selectableFields"):
        at = fe.child(path, "selectableFields")
        schema = _schema_of(v.get("schema"))
        if schema is None:
            detail = "may only be set when `version.schema.openAPIV3Schema` is not included"
            errs.append(fe.invalid(at, "", detail))
        else:
            errs += selectable(v["selectableFields"], schema, at)
    return errs


def deprecation_warning(deprecated: bool, warning: str | None) -> list[str]:
    """``validateDeprecationWarning``."""
    if not deprecated and warning is not None:
        return ["can only be set for deprecated versions"]
    if warning is None:
        return []
    problems = []
    if len(warning.encode()) > 256:
        problems.append("must be <= 256 characters long")
    if not warning:
        problems.append("must not be an empty string")
    offset = 0
    for ch in warning:
        if not (ch.isprintable() or ch == " "):
            problems.append(
                "must only contain printable UTF-8 characters; non-printable character "
                f"found at index {offset}"
            )
            break
        offset += len(ch.encode())
    return problems


_PER_VERSION = (
    ("validation", "schema", "schemas", "validation"),
    ("subresources", "subresources", "subresources", "subresources"),
    (
        "additionalPrinterColumns",
        "additionalPrinterColumns",
        "additionalPrinterColumns",
        "additionalPrinterColumns",
    ),
)


def _set(holder: Mapping[str, Any], key: str) -> bool:
    value = holder.get(key)
    return bool(value) if key == "additionalPrinterColumns" else value is not None


def _exclusive(spec: Spec, versions: list[Any], path: str) -> list[FieldError]:
    """Top-level and per-version fields exclude each other; identical per-version values
    belong at the top."""
    errs: list[FieldError] = []
    for top, per, label, _ in _PER_VERSION:
        if _set(spec, top) and any(_set(v, per) for v in versions):
            errs.append(
                fe.forbidden(
                    fe.child(path, top), f"top-level and per-version {label} are mutually exclusive"
                )
            )
    for _, per, label, top in _PER_VERSION:
        if versions and all(_set(v, per) and v.get(per) == versions[0].get(per) for v in versions):
            detail = (
                f"per-version {label} may not all be set to identical values "
                f"(top-level {top} should be used instead)"
            )
            errs.append(fe.invalid(fe.child(path, "versions"), gofmt.versions(versions), detail))
    return errs


def validate_names(n: Mapping[str, Any], path: str) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionNames``."""
    errs: list[FieldError] = []
    for key in ("plural", "singular"):
        value = str(n.get(key) or "")
        problems = names.is_dns1035_label(value)
        if value and problems:
            errs.append(fe.invalid(fe.child(path, key), value, ",".join(problems)))
    for key in ("kind", "listKind"):
        value = str(n.get(key) or "")
        problems = names.is_dns1035_label(value.lower())
        if value and problems:
            errs.append(
                fe.invalid(
                    fe.child(path, key),
                    value,
                    "may have mixed case, but should otherwise match: " + ",".join(problems),
                )
            )
    for key in ("shortNames",):
        for i, short in enumerate(n.get(key) or []):
            problems = names.is_dns1035_label(short)
            if problems:
                errs.append(fe.invalid(fe.index(fe.child(path, key), i), short, ",".join(problems)))
    kind = str(n.get("kind") or "")
    if kind and kind == n.get("listKind"):
        errs.append(
            fe.invalid(fe.child(path, "listKind"), kind, "kind and listKind may not be the same")
        )
    for i, category in enumerate(n.get("categories") or []):
        problems = names.is_dns1035_label(category)
        if problems:
            errs.append(
                fe.invalid(fe.index(fe.child(path, "categories"), i), category, ",".join(problems))
            )
    return errs
