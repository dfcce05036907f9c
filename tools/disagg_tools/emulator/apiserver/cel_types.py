"""CEL types, and the CEL declaration of a structural schema (what ``self`` is in a rule).

Ports apiserver v0.36.3 ``pkg/cel/common/schemas.go`` (``SchemaDeclType``),
``pkg/cel/types.go``, ``pkg/cel/escaping.go`` and cel-go v0.26.0 ``checker/types.go``; a
DeclType carries the worst-case sizes (maxItems, maxProperties, maxLength, else 3 MiB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from disagg_tools.emulator.apiserver.structural import Generic, Structural

MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024
MIN_STRING_SIZE = 2
MIN_DURATION_SIZE_JSON = 3
MAX_DURATION_SIZE_JSON = 32
MAX_DATETIME_SIZE_JSON = 32
MIN_DATETIME_SIZE_JSON = 21
JSON_DATE_SIZE = 12


@dataclass(frozen=True)
class Type:
    """A CEL type. ``kind``: bool int uint double string bytes null duration timestamp dyn
    error list map object opaque type param; ``name`` for object, opaque and param."""

    kind: str
    params: tuple[Type, ...] = ()
    name: str = ""
    decl: Any = field(default=None, compare=False, hash=False)

    def __str__(self) -> str:
        if self.kind in ("object", "param"):
            return self.name
        if self.kind == "opaque":
            inner = ", ".join(str(p) for p in self.params)
            return f"{self.name}({inner})" if self.params else self.name
        if self.kind == "null":
            return "null_type"
        if self.kind in ("list", "map", "type") and self.params:
            return f"{self.kind}({', '.join(str(p) for p in self.params)})"
        return self.kind


BOOL, INT, UINT, DOUBLE = Type("bool"), Type("int"), Type("uint"), Type("double")
STRING, BYTES, NULL, DYN = Type("string"), Type("bytes"), Type("null"), Type("dyn")
DURATION, TIMESTAMP, ERROR = Type("duration"), Type("timestamp"), Type("error")


def list_of(elem: Type) -> Type:
    return Type("list", (elem,))


def map_of(key: Type, value: Type) -> Type:
    return Type("map", (key, value))


def optional_of(inner: Type) -> Type:
    return Type("opaque", (inner,), "optional_type")


def type_of(inner: Type) -> Type:
    return Type("type", (inner,))


def param(name: str) -> Type:
    return Type("param", name=name)


# --- the schema's declaration ---------------------------------------------------------------


@dataclass(eq=False)
class DeclType:
    """``DeclType``: ``kind`` object, list, map or simple (``simple`` names its CEL type)."""

    kind: str
    name: str = ""
    simple: Type = DYN
    fields: dict[str, DeclType] = field(default_factory=dict)
    elem: DeclType | None = None
    max_elements: int = 0
    min_serialized_size: int = 0

    def cel_type(self) -> Type:
        if self.kind == "object":
            return Type("object", name=self.name, decl=self)
        if self.kind == "list":
            assert self.elem is not None
            return list_of(self.elem.cel_type())
        if self.kind == "map":
            assert self.elem is not None
            return map_of(STRING, self.elem.cel_type())
        return self.simple


def _simple(cel: Type, min_size: int, max_elements: int = 0) -> DeclType:
    return DeclType(
        "simple", name=cel.kind, simple=cel, min_serialized_size=min_size, max_elements=max_elements
    )


def schema_decl_type(s: Structural | None, is_resource_root: bool) -> DeclType | None:
    """``SchemaDeclType``: None where the schema is not visible to CEL."""
    if s is None:
        return None
    if s.extensions.int_or_string:
        bound = _max_length_bound(s) if _vv(s, "max_length") is not None else _string_bound(s)
        return _simple(DYN, 1, bound)
    if is_resource_root:
        s = with_type_and_object_meta(s)
    if s.type == "array":
        return _array(s)
    if s.type == "object":
        return _object(s)
    if s.type == "string":
        return _string(s)
    return {
        "boolean": _simple(BOOL, 4),
        "number": _simple(DOUBLE, 1),
        "integer": _simple(INT, 1),
    }.get(s.type)


def _vv(s: Structural, attr: str) -> Any:
    return getattr(s.value_validation, attr) if s.value_validation is not None else None


def _array(s: Structural) -> DeclType | None:
    if s.items is None:
        return None
    items = schema_decl_type(s.items, s.items.extensions.embedded_resource)
    if items is None:
        return None
    max_items = _vv(s, "max_items")
    bound = max(max_items, 0) if max_items is not None else _fit(items.min_serialized_size + 1)
    return DeclType("list", name="list", elem=items, max_elements=bound, min_serialized_size=2)


def _fit(per_item: int) -> int:
    return (MAX_REQUEST_SIZE_BYTES - 2) // per_item


def _object(s: Structural) -> DeclType | None:
    ap = s.additional_properties
    if ap is not None and ap.structural is not None:
        values = schema_decl_type(ap.structural, ap.structural.extensions.embedded_resource)
        if values is None:
            return None
        max_props = _vv(s, "max_properties")
        bound = max(max_props, 0) if max_props is not None else _fit(values.min_serialized_size + 6)
        return DeclType("map", name="map", elem=values, max_elements=bound, min_serialized_size=2)
    required = set(_vv(s, "required") or [])
    fields: dict[str, DeclType] = {}
    min_size = 2
    for name, prop in s.props().items():
        decl = schema_decl_type(prop, prop.extensions.embedded_resource)
        if decl is None:
            continue
        escaped = escape(name)
        if escaped is not None:
            fields[escaped] = decl
        if name in required and prop.generic.default is None:
            min_size += len(name) + decl.min_serialized_size + 4
    return DeclType("object", name="object", fields=fields, min_serialized_size=min_size)


def _string(s: Structural) -> DeclType:
    fmt = _vv(s, "format") or ""
    if fmt == "byte":
        max_length = _vv(s, "max_length")
        bound = max(max_length, 0) if max_length is not None else _string_bound(s)
        return _simple(BYTES, MIN_STRING_SIZE, bound)
    if fmt == "duration":
        return _simple(DURATION, MIN_DURATION_SIZE_JSON, _string_bound(s))
    if fmt in ("date", "date-time"):
        low = JSON_DATE_SIZE if fmt == "date" else MIN_DATETIME_SIZE_JSON
        return _simple(TIMESTAMP, low, _string_bound(s))
    if _vv(s, "max_length") is not None:
        bound = _max_length_bound(s)
    elif _vv(s, "enum"):
        bound = max((len(e) for e in _vv(s, "enum") if isinstance(e, str)), default=0)
    else:
        bound = _string_bound(s)
    return _simple(STRING, MIN_STRING_SIZE, bound)


def _max_length_bound(s: Structural) -> int:
    # maxLength counts runes; a rune is up to 4 bytes
    return max(int(_vv(s, "max_length")), 0) * 4


def _string_bound(s: Structural) -> int:
    if s.extensions.int_or_string:
        return MAX_REQUEST_SIZE_BYTES - 2
    return {
        "duration": MAX_DURATION_SIZE_JSON,
        "date": JSON_DATE_SIZE,
        "date-time": MAX_DATETIME_SIZE_JSON,
    }.get(_vv(s, "format") or "", MAX_REQUEST_SIZE_BYTES - 2)


def with_type_and_object_meta(s: Structural) -> Structural:
    """``WithTypeAndObjectMeta``: apiVersion, kind, metadata.name/generateName always visible."""
    props = s.props()
    meta = props.get("metadata")
    if (
        props.get("kind", Structural()).type == "string"
        and props.get("apiVersion", Structural()).type == "string"
        and meta is not None
        and meta.type == "object"
        and meta.properties is not None
        and meta.props().get("name", Structural()).type == "string"
        and meta.props().get("generateName", Structural()).type == "string"
    ):
        return s
    string = Structural(generic=Generic(type="string"))
    merged = dict(props)
    merged["kind"] = string
    merged["apiVersion"] = string
    merged["metadata"] = Structural(
        generic=Generic(type="object"), properties={"name": string, "generateName": string}
    )
    return Structural(
        items=s.items,
        properties=merged,
        additional_properties=s.additional_properties,
        generic=s.generic,
        extensions=s.extensions,
        x_validations=s.x_validations,
        value_validation=s.value_validation,
    )


def assign_type_names(decl: DeclType, name: str) -> DeclType:
    """``MaybeAssignTypeName``: objects named after their path from ``self``."""
    if decl.kind == "object":
        fields = {k: assign_type_names(v, f"{name}.{k}") for k, v in decl.fields.items()}
        return DeclType(
            "object", name=name, fields=fields, min_serialized_size=decl.min_serialized_size
        )
    if decl.kind in ("map", "list"):
        assert decl.elem is not None
        suffix = "@elem" if decl.kind == "map" else "@idx"
        elem = assign_type_names(decl.elem, f"{name}.{suffix}")
        return DeclType(
            decl.kind,
            name=decl.kind,
            elem=elem,
            max_elements=decl.max_elements,
            min_serialized_size=decl.min_serialized_size,
        )
    return decl


# --- property names in CEL -------------------------------------------------------------------

RESERVED = {
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
}
_EXPAND = re.compile(r"(__|[-./]|[^a-zA-Z0-9-./_])")
_SIMPLE = re.compile(r"[A-Za-z0-9_]*")


def escape(name: str) -> str | None:
    """``cel.Escape``: the CEL field name of a property, None when it has none."""
    if not name or name[0].isdigit():
        return None
    if name in RESERVED:
        return f"__{name}__"
    if _SIMPLE.fullmatch(name) and "__" not in name:
        return name
    ok = True

    def swap(match: re.Match[str]) -> str:
        nonlocal ok
        text = match.group(0)
        replacement = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
        if text not in replacement:
            ok = False
            return ""
        return replacement[text]

    escaped = _EXPAND.sub(swap, name)
    return escaped if ok else None


# --- assignability (cel-go checker/types.go) ---------------------------------------------


def is_assignable(m: dict[str, Type], t1: Type, t2: Type) -> bool:
    """Whether a value of ``t2`` may stand where ``t1`` is expected; binds params in ``m``."""
    if t2.kind == "param":
        valid, has_sub = _substitution(m, t1, t2)
        if valid:
            return True
        if has_sub:
            return False
    if t1.kind == "param":
        return _substitution(m, t2, t1)[0]
    if t1.kind in ("dyn", "error") or t2.kind in ("dyn", "error"):
        return True
    if t1.kind == "null":
        return _nullable(t2)
    if t2.kind == "null":
        return _nullable(t1)
    if t1.kind in ("list", "map", "opaque"):
        return (
            t1.kind == t2.kind
            and t1.name == t2.name
            and len(t1.params) == len(t2.params)
            and all(is_assignable(m, a, b) for a, b in zip(t1.params, t2.params, strict=True))
        )
    if t1.kind == "type":
        return t2.kind == "type"
    return t1.kind == t2.kind and t1.name == t2.name


def _nullable(t: Type) -> bool:
    return t.kind in ("opaque", "object", "duration", "timestamp", "null")


def _substitution(m: dict[str, Type], t1: Type, t2: Type) -> tuple[bool, bool]:
    if t1 == t2:
        return True, True
    sub = m.get(t2.name)
    if sub is not None:
        if t1 == sub:
            return True, True
        if is_assignable(m, t1, sub):
            general = t1 if _less_specific(t1, sub) else sub
            if _not_referenced(m, t2, general):
                m[t2.name] = general
            return True, True
        return False, True
    if _not_referenced(m, t2, t1):
        m[t2.name] = t1
        return True, False
    return False, False


def _less_specific(t1: Type, t2: Type) -> bool:
    if t1.kind in ("dyn", "param"):
        return True
    if t2.kind in ("dyn", "param") or t1.kind != t2.kind:
        return False
    if t1.params and len(t1.params) == len(t2.params):
        return all(_less_specific(a, b) for a, b in zip(t1.params, t2.params, strict=True))
    return t1 == t2


def _not_referenced(m: dict[str, Type], t: Type, within: Type) -> bool:
    if t == within:
        return False
    if within.kind == "param":
        sub = m.get(within.name)
        return True if sub is None else _not_referenced(m, t, sub)
    return all(_not_referenced(m, t, p) for p in within.params)


def substitute(m: dict[str, Type], t: Type, params_to_dyn: bool) -> Type:
    if t.kind == "param":
        sub = m.get(t.name)
        if sub is not None and sub != t:
            return substitute(m, sub, params_to_dyn)
        return DYN if params_to_dyn else t
    if t.params:
        subbed = tuple(substitute(m, p, params_to_dyn) for p in t.params)
        return Type(t.kind, subbed, t.name, t.decl)
    return t
