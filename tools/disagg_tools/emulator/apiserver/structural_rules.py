"""What makes a schema structural: kube-apiserver's ``ValidateStructural``.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/validation.go`` and
``complete.go``. The trap: with ``x-kubernetes-int-or-string`` the only ``anyOf`` allowed is
exactly ``[{type: integer}, {type: string}]``; a ``minimum`` inside it gets a CRD refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import goregex
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.structural import (
    Extensions,
    Generic,
    NestedValueValidation,
    Structural,
    ValueValidation,
)


class Level(Enum):
    ROOT = 0
    ITEM = 1
    FIELD = 2


@dataclass(frozen=True)
class Options:
    """``ValidationOptions``; CRD validation uses the defaults (all off)."""

    allow_nested_additional_properties: bool = False
    allow_nested_x_validations: bool = False
    allow_validation_properties_with_additional_properties: bool = False


_INT_OR_STRING = [
    NestedValueValidation(forbidden_generics=Generic(type="integer")),
    NestedValueValidation(forbidden_generics=Generic(type="string")),
]


def validate_structural(
    path: str, schema: Structural | None, opts: Options = Options()
) -> list[FieldError]:
    """``ValidateStructuralWithOptions``: invariants and completeness, sorted by text."""
    errors = invariants(schema, Level.ROOT, path, opts)
    errors += completeness(schema, path, opts)
    return sorted(errors, key=str)


def invariants(s: Structural | None, lvl: Level, path: str, opts: Options) -> list[FieldError]:
    """``validateStructuralInvariants``."""
    if s is None:
        return []
    errs: list[FieldError] = []
    if s.type == "array" and s.items is None:
        errs.append(fe.required(fe.child(path, "items"), "must be specified"))
    errs += invariants(s.items, Level.ITEM, fe.child(path, "items"), opts)
    for name, prop in s.props().items():
        errs += invariants(prop, Level.FIELD, _prop(path, name), opts)
    if s.additional_properties is not None:
        if lvl is Level.ROOT:
            errs.append(
                fe.forbidden(fe.child(path, "additionalProperties"), "must not be used at the root")
            )
        if s.additional_properties.structural is not None:
            sub = fe.child(path, "additionalProperties")
            errs += invariants(s.additional_properties.structural, Level.FIELD, sub, opts)
    errs += _extensions(s.extensions, path)
    skip_any_of = _is_int_or_string_any_of(s)
    skip_first_all_of = _is_int_or_string_all_of(s)
    errs += _value_validation(s.value_validation, skip_any_of, skip_first_all_of, lvl, path, opts)
    errs += _type_rules(s, lvl, path)
    return errs


def _prop(path: str, name: str) -> str:
    return fe.key(fe.child(path, "properties"), name)


def _type_rules(s: Structural, lvl: Level, path: str) -> list[FieldError]:
    x = s.extensions
    type_path = fe.child(path, "type")
    errs: list[FieldError] = []
    if x.embedded_resource and s.type != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        error = fe.invalid(type_path, s.type, detail) if s.type else fe.required(type_path, detail)
        errs.append(error)
    elif not s.type and not x.int_or_string and not x.preserve_unknown_fields:
        errs.append(fe.required(type_path, f"must not be empty {_WHERE[lvl]}"))
    if x.embedded_resource and s.additional_properties is not None:
        detail = "must not be used if x-kubernetes-embedded-resource is set"
        errs.append(fe.forbidden(fe.child(path, "additionalProperties"), detail))
    if lvl is Level.ROOT and s.type and s.type != "object":
        errs.append(fe.invalid(type_path, s.type, "must be object at the root"))
    errs += _resource_meta(s, lvl, path)
    if x.embedded_resource and not x.preserve_unknown_fields and not s.props():
        detail = (
            "must not be empty if x-kubernetes-embedded-resource is true without "
            "x-kubernetes-preserve-unknown-fields"
        )
        errs.append(fe.required(fe.child(path, "properties"), detail))
    return errs


_WHERE = {
    Level.ROOT: "at the root",
    Level.ITEM: "for specified array items",
    Level.FIELD: "for specified object fields",
}


def _resource_meta(s: Structural, lvl: Level, path: str) -> list[FieldError]:
    """kind, apiVersion and metadata of a resource root (the root or an embedded one)."""
    check = lvl is Level.ROOT or s.extensions.embedded_resource
    props = s.props()
    errs = [
        fe.invalid(fe.child(_prop(path, name), "type"), props[name].type, "must be string")
        for name in ("kind", "apiVersion")
        if name in props and check and props[name].type != "string"
    ]
    if "metadata" in props:
        errs += _metadata(props["metadata"], check, lvl, _prop(path, "metadata"))
    return errs


def _metadata(s: Structural, check: bool, lvl: Level, path: str) -> list[FieldError]:
    """``validateStructuralMetadataInvariants``: at the root only name and generateName."""
    errs: list[FieldError] = []
    if check and s.type != "object":
        errs.append(fe.invalid(fe.child(path, "type"), s.type, "must be object"))
    if lvl is Level.ROOT:
        props = s.props()
        names = {"name", "generateName"} & set(props)
        trimmed = dataclasses.replace(
            s,
            properties=None if names and len(props) == len(names) else s.properties,
            generic=dataclasses.replace(s.generic, type="", default=None),
            value_validation=s.value_validation or ValueValidation(),
        )
        if trimmed != Structural(value_validation=ValueValidation()):
            errs.append(
                fe.forbidden(
                    path,
                    "must not specify anything other than name and generateName, but "
                    "metadata is implicitly specified",
                )
            )
    return errs


def _is_int_or_string_any_of(s: Structural) -> bool:
    v = s.value_validation
    return v is not None and v.any_of == _INT_OR_STRING


def _is_int_or_string_all_of(s: Structural) -> bool:
    v = s.value_validation
    first = v.all_of[0] if v is not None and v.all_of else None
    return first is not None and first.value_validation.any_of == _INT_OR_STRING


def _extensions(x: Extensions, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if x.int_or_string and x.preserve_unknown_fields:
        errs.append(
            fe.invalid(
                fe.child(path, "x-kubernetes-preserve-unknown-fields"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    if x.int_or_string and x.embedded_resource:
        errs.append(
            fe.invalid(
                fe.child(path, "x-kubernetes-embedded-resource"),
                True,
                "must be false if x-kubernetes-int-or-string is true",
            )
        )
    return errs


def _value_validation(
    v: ValueValidation | None,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: str,
    opts: Options,
) -> list[FieldError]:
    if v is None:
        return []
    errs: list[FieldError] = []
    no_cel = dataclasses.replace(opts, allow_nested_x_validations=False)
    if not skip_any_of:
        for i, clause in enumerate(v.any_of or []):
            errs += _nested(clause, False, lvl, fe.index(fe.child(path, "anyOf"), i), no_cel)
    for i, clause in enumerate(v.all_of or []):
        skip = skip_first_all_of_any_of and i == 0
        errs += _nested(clause, skip, lvl, fe.index(fe.child(path, "allOf"), i), opts)
    for i, clause in enumerate(v.one_of or []):
        errs += _nested(clause, False, lvl, fe.index(fe.child(path, "oneOf"), i), no_cel)
    errs += _nested(v.not_, False, lvl, fe.child(path, "not"), no_cel)
    if v.pattern:
        problem = goregex.compile_error(v.pattern)
        if problem is not None:
            errs.append(
                fe.invalid(
                    fe.child(path, "pattern"),
                    v.pattern,
                    f"must be a valid regular expression, but isn't: {problem}",
                )
            )
    return errs


def _nested(
    v: NestedValueValidation | None, skip_any_of: bool, lvl: Level, path: str, opts: Options
) -> list[FieldError]:
    """``validateNestedValueValidation``: a junctor clause may not carry shape."""
    if v is None:
        return []
    errs = _value_validation(v.value_validation, skip_any_of, False, lvl, path, opts)
    errs += _nested(v.items, False, lvl, fe.child(path, "items"), opts)
    for name, prop in (v.properties or {}).items():
        errs += _nested(prop, False, Level.FIELD, _prop(path, name), opts)
    g = v.forbidden_generics
    if g.type:
        errs.append(fe.forbidden(fe.child(path, "type"), "must be empty to be structural"))
    ap_path = fe.child(path, "additionalProperties")
    if v.additional_properties is not None and not opts.allow_nested_additional_properties:
        errs.append(fe.forbidden(ap_path, "must be undefined to be structural"))
    else:
        errs += _nested(v.additional_properties, False, lvl, ap_path, opts)
    errs += _forbidden_fields(v, path, opts)
    if "metadata" in (v.properties or {}):
        errs.append(
            fe.forbidden(_prop(path, "metadata"), "must not be specified in a nested context")
        )
    return errs


def _forbidden_fields(v: NestedValueValidation, path: str, opts: Options) -> list[FieldError]:
    g, x = v.forbidden_generics, v.forbidden_extensions
    checks = [
        ("default", g.default is not None, "must be undefined to be structural"),
        ("title", bool(g.title), "must be empty to be structural"),
        ("description", bool(g.description), "must be empty to be structural"),
        ("nullable", g.nullable, "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            x.preserve_unknown_fields,
            "must be false to be structural",
        ),
        ("x-kubernetes-embedded-resource", x.embedded_resource, "must be false to be structural"),
        ("x-kubernetes-int-or-string", x.int_or_string, "must be false to be structural"),
        ("x-kubernetes-list-map-keys", bool(x.list_map_keys), "must be empty to be structural"),
        ("x-kubernetes-list-type", x.list_type is not None, "must be undefined to be structural"),
        ("x-kubernetes-map-type", x.map_type is not None, "must be undefined to be structural"),
        (
            "x-kubernetes-validations",
            bool(v.x_validations) and not opts.allow_nested_x_validations,
            "must be empty to be structural",
        ),
    ]
    return [fe.forbidden(fe.child(path, name), detail) for name, bad, detail in checks if bad]


def metadata_invariants(metadata: Structural) -> list[FieldError]:
    """``validateStructuralMetadataInvariants`` of the root's ``metadata`` (path empty)."""
    return _metadata(metadata, True, Level.ROOT, "")


def nested_rules(clause: NestedValueValidation, opts: Options = Options()) -> list[FieldError]:
    """``validateNestedValueValidation`` of one junctor clause at a field (path empty)."""
    return _nested(clause, False, Level.FIELD, "", opts)


# --- completeness ----------------------------------------------------------------------------


def completeness(s: Structural | None, path: str, opts: Options) -> list[FieldError]:
    """``validateStructuralCompleteness``."""
    if s is None:
        return []
    return _value_completeness(s.value_validation, s, path, path, opts)


def _missing(s_path: str, v_path: str) -> list[FieldError]:
    return [fe.required(s_path, f"because it is defined in {v_path}")]


def _value_completeness(
    v: ValueValidation | None, s: Structural | None, s_path: str, v_path: str, opts: Options
) -> list[FieldError]:
    if v is None:
        return []
    if s is None:
        return _missing(s_path, v_path)
    errs = _nested_completeness(v.not_, s, s_path, fe.child(v_path, "not"), opts)
    for name, clauses in (("allOf", v.all_of), ("anyOf", v.any_of), ("oneOf", v.one_of)):
        for i, clause in enumerate(clauses or []):
            sub = fe.index(fe.child(v_path, name), i)
            errs += _nested_completeness(clause, s, s_path, sub, opts)
    return errs


def _nested_completeness(
    v: NestedValueValidation | None, s: Structural | None, s_path: str, v_path: str, opts: Options
) -> list[FieldError]:
    if v is None:
        return []
    if s is None:
        return _missing(s_path, v_path)
    errs = _value_completeness(v.value_validation, s, s_path, v_path, opts)
    errs += _nested_completeness(
        v.items, s.items, fe.child(s_path, "items"), fe.child(v_path, "items"), opts
    )
    ap = s.additional_properties.structural if s.additional_properties else None
    ap_path = fe.child(s_path, "additionalProperties")
    for name, v_prop in (v.properties or {}).items():
        v_sub = _prop(v_path, name)
        if name in s.props():
            errs += _nested_completeness(v_prop, s.props()[name], _prop(s_path, name), v_sub, opts)
        elif ap is None or not opts.allow_validation_properties_with_additional_properties:
            errs += _missing(_prop(s_path, name), v_sub)
        else:
            errs += _nested_completeness(v_prop, ap, ap_path, v_sub, opts)
    if v.additional_properties is not None and opts.allow_nested_additional_properties:
        v_sub = fe.child(v_path, "additionalProperties")
        errs += _nested_completeness(v.additional_properties, ap, ap_path, v_sub, opts)
    return errs
