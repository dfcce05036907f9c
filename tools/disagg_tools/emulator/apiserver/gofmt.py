"""Go's printing of values in apiserver messages: ``%v``, ``%q`` and ``json.Marshal``.

Restates Go 1.26 ``strconv`` (``Quote``, ``FormatFloat``) and ``encoding/json``, and renders
apiextensions-apiserver v0.36.3's internal structs (``pkg/apis/apiextensions/types.go``,
``types_jsonschema.go``: no JSON tags, so every field under its Go name) as error values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_SHORT_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t"}
_SHORT_ESCAPES["\v"] = r"\v"
# encoding/json (Go 1.22 on) writes \b and \f short, other control characters as \u00XX
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPES.update({"\b": "\\b", "\f": "\\f"})
_JSON_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_JSON_HTML["\u2029"] = "\\u2029"


def quote(text: str) -> str:
    """``strconv.Quote``: double quotes, Go escapes, printable runes kept as they are."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits of ``abs(value)`` and the exponent of its first digit."""
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    return text, len(digits) + exponent - 1


def _exp_form(digits: str, exp: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _fixed_form(digits: str, exp: int) -> str:
    if exp < 0:
        return "0." + "0" * (-exp - 1) + digits
    if len(digits) <= exp + 1:
        return digits + "0" * (exp + 1 - len(digits))
    return digits[: exp + 1] + "." + digits[exp + 1 :]


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return None


def float_v(value: float) -> str:
    """``%v`` of a float64: ``'g'`` with the shortest digits, exponent below -4 or from 6."""
    special = _special(value)
    if special is not None:
        return special
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exp = _digits(value)
    text = _exp_form(digits, exp) if exp < -4 or exp >= 6 else _fixed_form(digits, exp)
    return ("-" if value < 0 else "") + text


def _float_json(value: float) -> str:
    special = _special(value)
    if special is not None:
        raise ValueError(f"json: unsupported value: {special}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exp = _digits(value)
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        text = _exp_form(digits, exp).replace("e-0", "e-").replace("e+0", "e+")
    else:
        text = _fixed_form(digits, exp)
    return ("-" if value < 0 else "") + text


@dataclass(frozen=True)
class GoJSON:
    """A value ``json.Marshal`` writes as ``text`` (a Go struct, rendered by :func:`struct`)."""

    text: str


def _string_json(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ch in _JSON_HTML:
            out.append(_JSON_HTML[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_marshal(value: Any) -> str:
    """``encoding/json.Marshal`` of a decoded JSON value: sorted keys, HTML-safe strings."""
    if isinstance(value, GoJSON):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_json(value)
    if isinstance(value, str):
        return _string_json(value)
    if isinstance(value, dict):
        items = (f"{_string_json(k)}:{json_marshal(value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_marshal(v) for v in value) + "]"
    raise TypeError(f"json: unsupported type: {type(value).__name__}")


def value_v(value: Any) -> str:
    """``%v`` of a decoded JSON value (``[a b]``, ``map[k:v]``, ``<nil>``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return float_v(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{value_v(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(value_v(v) for v in value) + "]"
    return str(value)


# --- apiextensions' internal structs -------------------------------------------------------
# An error that prints a whole internal struct as its bad value (``Invalid value:
# {"Rule":"self.x",...}``) writes every field, zero values included, in declaration order.

# (Go name, wire key, kind); kinds: str bool ptr json slice:<elem> map:<elem> struct:<T>
# ptr:<T> (a pointer to struct T), items, orbool, deps
_SCHEMA = [
    ("ID", "id", "str"),
    ("Schema", "$schema", "str"),
    ("Ref", "$ref", "ptr"),
    ("Description", "description", "str"),
    ("Type", "type", "str"),
    ("Nullable", "nullable", "bool"),
    ("Format", "format", "str"),
    ("Title", "title", "str"),
    ("Default", "default", "ptr"),
    ("Maximum", "maximum", "ptr"),
    ("ExclusiveMaximum", "exclusiveMaximum", "bool"),
    ("Minimum", "minimum", "ptr"),
    ("ExclusiveMinimum", "exclusiveMinimum", "bool"),
    ("MaxLength", "maxLength", "ptr"),
    ("MinLength", "minLength", "ptr"),
    ("Pattern", "pattern", "str"),
    ("MaxItems", "maxItems", "ptr"),
    ("MinItems", "minItems", "ptr"),
    ("UniqueItems", "uniqueItems", "bool"),
    ("MultipleOf", "multipleOf", "ptr"),
    ("Enum", "enum", "slice:json"),
    ("MaxProperties", "maxProperties", "ptr"),
    ("MinProperties", "minProperties", "ptr"),
    ("Required", "required", "slice:json"),
    ("Items", "items", "items"),
    ("AllOf", "allOf", "slice:Schema"),
    ("OneOf", "oneOf", "slice:Schema"),
    ("AnyOf", "anyOf", "slice:Schema"),
    ("Not", "not", "ptr:Schema"),
    ("Properties", "properties", "map:Schema"),
    ("AdditionalProperties", "additionalProperties", "orbool"),
    ("PatternProperties", "patternProperties", "map:Schema"),
    ("Dependencies", "dependencies", "deps"),
    ("AdditionalItems", "additionalItems", "orbool"),
    ("Definitions", "definitions", "map:Schema"),
    ("ExternalDocs", "externalDocs", "ptr:Docs"),
    ("Example", "example", "ptr"),
    ("XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields", "ptr"),
    ("XEmbeddedResource", "x-kubernetes-embedded-resource", "bool"),
    ("XIntOrString", "x-kubernetes-int-or-string", "bool"),
    ("XListMapKeys", "x-kubernetes-list-map-keys", "slice:json"),
    ("XListType", "x-kubernetes-list-type", "ptr"),
    ("XMapType", "x-kubernetes-map-type", "ptr"),
    ("XValidations", "x-kubernetes-validations", "slice:Rule"),
]
SCHEMA_FIELDS = [(go, wire) for go, wire, _ in _SCHEMA]
"""JSONSchemaProps' fields in Go's declaration order: (Go name, wire key)."""

_STRUCTS: dict[str, list[tuple[str, str, str]]] = {
    "Schema": _SCHEMA,
    "Docs": [("Description", "description", "str"), ("URL", "url", "str")],
    "Rule": [
        ("Rule", "rule", "str"),
        ("Message", "message", "str"),
        ("MessageExpression", "messageExpression", "str"),
        ("Reason", "reason", "ptr"),
        ("FieldPath", "fieldPath", "str"),
        ("OptionalOldSelf", "optionalOldSelf", "ptr"),
    ],
    "Version": [
        ("Name", "name", "str"),
        ("Served", "served", "bool"),
        ("Storage", "storage", "bool"),
        ("Deprecated", "deprecated", "bool"),
        ("DeprecationWarning", "deprecationWarning", "ptr"),
        ("Schema", "schema", "ptr:Validation"),
        ("Subresources", "subresources", "ptr:Subresources"),
        ("AdditionalPrinterColumns", "additionalPrinterColumns", "slice:Column"),
        ("SelectableFields", "selectableFields", "slice:Selectable"),
    ],
    "Validation": [("OpenAPIV3Schema", "openAPIV3Schema", "ptr:Schema")],
    "Subresources": [("Status", "status", "ptr:Empty"), ("Scale", "scale", "ptr:Scale")],
    "Empty": [],
    "Scale": [
        ("SpecReplicasPath", "specReplicasPath", "str"),
        ("StatusReplicasPath", "statusReplicasPath", "str"),
        ("LabelSelectorPath", "labelSelectorPath", "ptr"),
    ],
    "Column": [
        ("Name", "name", "str"),
        ("Type", "type", "str"),
        ("Format", "format", "str"),
        ("Description", "description", "str"),
        ("Priority", "priority", "int"),
        ("JSONPath", "jsonPath", "str"),
    ],
    "Selectable": [("JSONPath", "jsonPath", "str")],
}


def _render(kind: str, value: Any) -> str:
    if kind == "str":
        return _string_json(str(value or ""))
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return str(int(value or 0))
    if kind in ("ptr", "json"):
        return "null" if value is None else json_marshal(value)
    if value is None:
        return "null"
    head, _, elem = kind.partition(":")
    if head == "slice":
        return "[" + ",".join(_render(_elem(elem), v) for v in value) + "]"
    if head == "map":
        items = (f"{_string_json(k)}:{_render(_elem(elem), value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if head in ("ptr", "struct"):
        return struct(elem, value)
    if head == "items":
        if isinstance(value, list):
            return '{"Schema":null,"JSONSchemas":' + _render("slice:Schema", value) + "}"
        return '{"Schema":' + struct("Schema", value) + ',"JSONSchemas":null}'
    if head == "orbool":
        if isinstance(value, Mapping):
            return '{"Allows":true,"Schema":' + struct("Schema", value) + "}"
        return '{"Allows":' + ("true" if value else "false") + ',"Schema":null}'
    if head == "deps":
        return _render_deps(value)
    raise ValueError(f"unknown kind {kind}")


def _render_deps(value: Mapping[str, Any]) -> str:
    parts = []
    for k in sorted(value):
        v = value[k]
        if isinstance(v, list):
            body = '{"Schema":null,"Property":' + json_marshal(v) + "}"
        else:
            body = '{"Schema":' + struct("Schema", v) + ',"Property":null}'
        parts.append(f"{_string_json(k)}:{body}")
    return "{" + ",".join(parts) + "}"


def _elem(name: str) -> str:
    return "json" if name == "json" else f"struct:{name}"


def struct(name: str, value: Mapping[str, Any]) -> str:
    """The Go struct ``name`` holding the wire-form ``value``, as ``json.Marshal`` writes it."""
    parts = [f'"{go}":{_render(kind, value.get(wire))}' for go, wire, kind in _STRUCTS[name]]
    return "{" + ",".join(parts) + "}"


def validation_rule(rule: Mapping[str, Any]) -> GoJSON:
    return GoJSON(struct("Rule", rule))


def schema_props(schema: Mapping[str, Any]) -> GoJSON:
    return GoJSON(struct("Schema", schema))


def versions(items: list[Mapping[str, Any]]) -> GoJSON:
    return GoJSON("[" + ",".join(struct("Version", v) for v in items) + "]")


def items_value(items: Any) -> GoJSON:
    """A ``*JSONSchemaPropsOrArray`` (the ``items`` of a schema)."""
    return GoJSON(_render("items", items))
