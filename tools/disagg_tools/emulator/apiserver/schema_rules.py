"""What kube-apiserver refuses in a CRD's ``openAPIV3Schema``.

Ports ``validateCustomResourceDefinitionValidation`` and
``ValidateCustomResourceDefinitionOpenAPISchema`` (``specStandardValidatorV3``) of
apiextensions-apiserver v0.36.3 ``pkg/apis/apiextensions/validation/validation.go``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from disagg_tools.emulator.apiserver import cel_rules, defaults, gofmt
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.cel_rules import CelContext
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.schema_extensions import extension_rules
from disagg_tools.emulator.apiserver.structural import StructuralError, new_structural
from disagg_tools.emulator.apiserver.structural_rules import validate_structural

Schema = Mapping[str, Any]
OPENAPI_V3_TYPES = ["array", "boolean", "integer", "number", "object", "string"]
_ROOT_ALLOWED_WITH_STATUS = [
    "Description",
    "Type",
    "Format",
    "Title",
    "Maximum",
    "ExclusiveMaximum",
    "Minimum",
    "ExclusiveMinimum",
    "MaxLength",
    "MinLength",
    "Pattern",
    "MaxItems",
    "MinItems",
    "UniqueItems",
    "MultipleOf",
    "Required",
    "Items",
    "Properties",
    "ExternalDocs",
    "Example",
    "XPreserveUnknownFields",
    "XValidations",
]
_META_FIELDS = ("metadata", "kind", "apiVersion")


@dataclass(frozen=True)
class Options:
    """``validationOptions``; :func:`create_options` is what a CRD create uses."""

    allow_defaults: bool = False
    disallow_defaults_reason: str = ""
    require_recognized_conversion_review_version: bool = False
    require_open_api_schema: bool = False
    require_valid_property_type: bool = False
    require_structural_schema: bool = False
    require_pruned_defaults: bool = False
    require_atomic_set_type: bool = False
    require_map_list_keys_map_set_validation: bool = False
    suppress_per_expression_cost: bool = False
    allow_invalid_ca_bundle: bool = False


def create_options() -> Options:
    """The options of ``ValidateCustomResourceDefinition`` (a create)."""
    return Options(
        allow_defaults=True,
        require_recognized_conversion_review_version=True,
        require_open_api_schema=True,
        require_valid_property_type=True,
        require_structural_schema=True,
        require_pruned_defaults=True,
        require_atomic_set_type=True,
        require_map_list_keys_map_set_validation=True,
        allow_invalid_ca_bundle=True,
    )


@dataclass(frozen=True)
class _Spec:
    """``specStandardValidatorV3`` and the state it carries down the schema."""

    allow_defaults: bool
    disallow_defaults_reason: str
    require_valid_property_type: bool
    inside_resource_meta: bool = False
    uncorrelatable: str | None = None

    def forbid_defaults(self, reason: str) -> _Spec:
        return dataclasses.replace(self, allow_defaults=False, disallow_defaults_reason=reason)

    def forbid_old_self(self, path: str) -> _Spec:
        return (
            self
            if self.uncorrelatable is not None
            else dataclasses.replace(self, uncorrelatable=path)
        )


def validate_validation(
    validation: Schema | None,
    status_enabled: bool,
    opts: Options,
    path: str,
    costs: list[cel_rules.RuleCost] | None = None,
) -> list[FieldError]:
    """``validateCustomResourceDefinitionValidation`` (``path`` is ``...validation``);
    every rule cost estimated is appended to ``costs`` when given."""
    if validation is None or validation.get("openAPIV3Schema") is None:
        return []
    schema = validation["openAPIV3Schema"]
    root = fe.child(path, "openAPIV3Schema")
    errs = _status_root(schema, path) if status_enabled else []
    if schema.get("nullable"):
        at = fe.child(path, "openAPIV3Schema.nullable")
        errs.append(fe.forbidden(at, "nullable cannot be true at the root"))
    found, init_errs, ctx = _structural(schema, root, opts)
    spec = _Spec(
        opts.allow_defaults, opts.disallow_defaults_reason, opts.require_valid_property_type
    )
    schema_errs, cel_errs = openapi_schema(schema, root, spec, True, opts, ctx)
    errs += found + schema_errs + cel_errs
    if not errs:  # NewStructural's errors repeat the schema errors: shown only alone
        errs += init_errs
    if ctx is not None:
        errs += cel_rules.total_cost_errors(ctx, root)
        if costs is not None:
            costs.extend(ctx.total.observed)
    return errs


def _structural(
    schema: Schema, root: str, opts: Options
) -> tuple[list[FieldError], list[FieldError], CelContext | None]:
    """(structural and default errors, NewStructural's error, the CEL context): rules
    are checked only on a structural schema whose defaults are valid."""
    if not opts.require_structural_schema:
        return [], [], None
    try:
        structural = new_structural(schema)
    except StructuralError as exc:
        return [], [fe.invalid(root, "", str(exc))], None
    found = validate_structural(root, structural)
    if not found:
        found = defaults.validate_defaults(root, structural, True, opts.require_pruned_defaults)
    return found, [], None if found else CelContext.root(dict(schema))


def validate_openapi_schema(
    schema: Schema, path: str, opts: Options, ctx: CelContext | None
) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionOpenAPISchema(...).AllErrors()`` at a root."""
    spec = _Spec(
        opts.allow_defaults, opts.disallow_defaults_reason, opts.require_valid_property_type
    )
    schema_errs, cel_errs = openapi_schema(schema, path, spec, True, opts, ctx)
    return schema_errs + cel_errs


def estimate_costs(schema: Schema, path: str, opts: Options) -> list[cel_rules.RuleCost]:
    """Every rule's estimated cost, whatever else is wrong with the schema (the apiserver
    only estimates once the schema is structural and its defaults valid)."""
    ctx = CelContext.root(dict(schema))
    spec = _Spec(
        opts.allow_defaults, opts.disallow_defaults_reason, opts.require_valid_property_type
    )
    openapi_schema(schema, fe.child(path, "openAPIV3Schema"), spec, True, opts, ctx, force_cel=True)
    return list(ctx.total.observed)


def _status_root(schema: Schema, path: str) -> list[FieldError]:
    for go_name, wire in gofmt.SCHEMA_FIELDS:
        value = schema.get(wire)
        if value is None or value is False or value == "":
            continue
        if go_name == "Type":
            if value != "object":
                return [
                    fe.invalid(
                        fe.child(path, "openAPIV3Schema.type"),
                        value,
                        'only "object" is allowed as the type at the root of the schema if the '
                        "status subresource is enabled",
                    )
                ]
            continue
        if go_name not in _ROOT_ALLOWED_WITH_STATUS:
            allowed = "[" + " ".join(_ROOT_ALLOWED_WITH_STATUS) + "]"
            return [
                fe.invalid(
                    fe.child(path, "openAPIV3Schema"),
                    gofmt.schema_props(schema),
                    f"only {allowed} fields are allowed at the root of the schema if the status "
                    "subresource is enabled",
                )
            ]
    return []


def openapi_schema(
    schema: Schema | None,
    path: str,
    spec: _Spec,
    is_root: bool,
    opts: Options,
    ctx: CelContext | None,
    force_cel: bool = False,
) -> tuple[list[FieldError], list[FieldError]]:
    """``ValidateCustomResourceDefinitionOpenAPISchema``: (schema errors, CEL errors);
    ``force_cel`` compiles rules even under schema errors (for cost estimates only)."""
    if schema is None:
        return [], []
    errs = _standard(schema, path, spec) + _shape(schema, path)
    cel: list[FieldError] = []
    for sub, sub_path, sub_spec, sub_ctx in _children(schema, path, spec, is_root, ctx):
        found, found_cel = openapi_schema(sub, sub_path, sub_spec, False, opts, sub_ctx, force_cel)
        errs += found
        cel += found_cel
    errs += extension_rules(schema, path, opts)
    errs += cel_rules.rule_entry_errors(schema, path)
    # rules are compiled only where the node and everything below it is otherwise valid
    if (force_cel or not errs) and ctx is not None and schema.get("x-kubernetes-validations"):
        suppress = opts.suppress_per_expression_cost
        cel += cel_rules.rule_errors(dict(schema), path, ctx, spec.uncorrelatable, suppress)
    return errs, cel


def _shape(schema: Schema, path: str) -> list[FieldError]:
    errs = []
    if schema.get("uniqueItems"):
        detail = "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        errs.append(fe.forbidden(fe.child(path, "uniqueItems"), detail))
    additional = schema.get("additionalProperties")
    if schema.get("properties") and (additional is False or isinstance(additional, Mapping)):
        detail = "additionalProperties and properties are mutual exclusive"
        errs.append(fe.forbidden(fe.child(path, "additionalProperties"), detail))
    return errs


Child = tuple[Schema | None, str, _Spec, CelContext | None]


def _children(
    schema: Schema, path: str, spec: _Spec, is_root: bool, ctx: CelContext | None
) -> Iterator[Child]:
    """The nodes below ``schema`` in upstream's order, with what each inherits."""
    yield from _object_children(schema, path, spec, is_root, ctx)
    yield schema.get("not"), fe.child(path, "not"), spec, None
    for key in ("allOf", "oneOf", "anyOf"):
        for i, clause in enumerate(schema.get(key) or []):
            yield clause, fe.index(fe.child(path, key), i), spec, None
    for name in sorted(schema.get("definitions") or {}):
        yield schema["definitions"][name], fe.key(fe.child(path, "definitions"), name), spec, None
    yield from _items_children(schema, path, spec, ctx)
    for name in sorted(schema.get("patternProperties") or {}):
        sub_path = fe.key(fe.child(path, "patternProperties"), name)
        yield schema["patternProperties"][name], sub_path, spec, None
    if isinstance(schema.get("additionalItems"), Mapping):
        yield schema["additionalItems"], fe.child(path, "additionalItems"), spec, None
    for name in sorted(schema.get("dependencies") or {}):
        dependency = schema["dependencies"][name]
        if isinstance(dependency, Mapping):
            yield dependency, fe.key(fe.child(path, "dependencies"), name), spec, None


def _object_children(
    schema: Schema, path: str, spec: _Spec, is_root: bool, ctx: CelContext | None
) -> Iterator[Child]:
    additional = schema.get("additionalProperties")
    if additional is not None:
        sub = dict(additional) if isinstance(additional, Mapping) else None
        sub_spec = spec
        if spec.inside_resource_meta:  # pruning without a value is ambiguous there
            sub_spec = spec.forbid_defaults(
                "inside additionalProperties applying to object metadata"
            )
        sub_ctx = ctx.child(sub, ("additional", "")) if ctx else None
        yield sub, fe.child(path, "additionalProperties"), sub_spec, sub_ctx
    properties = schema.get("properties") or {}
    for name in sorted(properties):  # upstream walks a Go map, in an order that varies
        sub_spec = spec
        if schema.get("x-kubernetes-map-type") not in (None, "granular", "atomic"):
            sub_spec = sub_spec.forbid_old_self(path)
        if (is_root or schema.get("x-kubernetes-embedded-resource")) and name in _META_FIELDS:
            sub_spec = dataclasses.replace(sub_spec, inside_resource_meta=True)
            if is_root:
                sub_spec = sub_spec.forbid_defaults(f"in top-level {name}")
        sub_ctx = ctx.child(dict(properties[name]), ("property", name)) if ctx else None
        yield properties[name], fe.key(fe.child(path, "properties"), name), sub_spec, sub_ctx


def _items_children(
    schema: Schema, path: str, spec: _Spec, ctx: CelContext | None
) -> Iterator[Child]:
    items = schema.get("items")
    if items is None:
        return
    # only the items of a list-type map correlate with their old values
    sub_spec = spec if schema.get("x-kubernetes-list-type") == "map" else spec.forbid_old_self(path)
    items_path = fe.child(path, "items")
    if isinstance(items, list):
        yield None, items_path, sub_spec, ctx.child(None, ("items", "")) if ctx else None
        for i, item in enumerate(items):
            item_ctx = ctx.child(dict(item), ("items", "")) if ctx else None
            yield item, fe.index(items_path, i), sub_spec, item_ctx
    else:
        yield items, items_path, sub_spec, ctx.child(dict(items), ("items", "")) if ctx else None


def _standard(schema: Schema, path: str, spec: _Spec) -> list[FieldError]:
    """``specStandardValidatorV3.validate``."""
    errs: list[FieldError] = []
    typ = schema.get("type") or ""
    if spec.require_valid_property_type and typ and typ not in OPENAPI_V3_TYPES:
        errs.append(fe.not_supported(fe.child(path, "type"), typ, OPENAPI_V3_TYPES))
    if schema.get("default") is not None and not spec.allow_defaults:
        detail = "must not be set" + (
            " " + spec.disallow_defaults_reason if spec.disallow_defaults_reason else ""
        )
        errs.append(fe.forbidden(fe.child(path, "default"), detail))
    unsupported = [
        ("id", bool(schema.get("id")), "id is not supported"),
        (
            "additionalItems",
            schema.get("additionalItems") is not None,
            "additionalItems is not supported",
        ),
        (
            "patternProperties",
            bool(schema.get("patternProperties")),
            "patternProperties is not supported",
        ),
        ("definitions", bool(schema.get("definitions")), "definitions is not supported"),
        ("dependencies", schema.get("dependencies") is not None, "dependencies is not supported"),
        ("$ref", schema.get("$ref") is not None, "$ref is not supported"),
        ("type", typ == "null", "type cannot be set to null, use nullable as an alternative"),
        (
            "items",
            isinstance(schema.get("items"), list) and bool(schema.get("items")),
            "items must be a schema object and not an array",
        ),
        (
            "x-kubernetes-embedded-resource",
            spec.inside_resource_meta and bool(schema.get("x-kubernetes-embedded-resource")),
            "must not be used inside of resource meta",
        ),
    ]
    errs += [fe.forbidden(fe.child(path, name), detail) for name, bad, detail in unsupported if bad]
    return errs
