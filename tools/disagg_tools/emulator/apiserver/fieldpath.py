"""JSON paths into a structural schema: a rule's ``fieldPath``, a selectable field.

Ports ``ValidFieldPath`` and ``unescapeSingleQuote`` (apiextensions-apiserver v0.36.3
``pkg/apiserver/schema/cel/validation.go``): only field accessors (``.name``) and map keys
(``['key']``) the schema has are valid.
"""

from __future__ import annotations

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.structural import Structural


class FieldPathError(ValueError):
    pass


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "'": "'",
    "\\": "\\",
}


def _tokens(path: str) -> list[str]:
    """Upstream's scanner: ``.``, ``[`` and ``]`` alone; a token starting with ``'`` runs to
    the next unescaped ``'``; anything else runs to the next delimiter."""
    out: list[str] = []
    i = 0
    while i < len(path):
        if path[i] in ".[]":
            out.append(path[i])
            i += 1
            continue
        if path[i] == "'":
            j = i + 1
            while j < len(path) and not (path[j] == "'" and path[j - 1] != "\\"):
                j += 1
            out.append(path[i : j + 1])
            i = j + 1
            continue
        j = i
        while j < len(path) and path[j] not in ".[]":
            j += 1
        out.append(path[i:j])
        i = j
    return out


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            ch = text[i + 1]
            if ch not in _ESCAPES:
                raise FieldPathError(f"invalid string literal: invalid escape char \\{ch}")
            out.append(_ESCAPES[ch])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def valid_field_path(
    path: str, schema: Structural, allow_array_notation: bool = True
) -> tuple[str, Structural]:
    """``ValidFieldPath``: the field.Path text and the schema it reaches."""
    tokens = _tokens(path)
    result = ""
    node: Structural | None = schema
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok not in ("[", "."):
            raise FieldPathError(f"expected [ or . but got: {tok}")
        if tok == "[" and not allow_array_notation:
            raise FieldPathError("array notation is not allowed")
        if i >= len(tokens):
            raise FieldPathError("unexpected end of JSON path")
        name = tokens[i]
        i += 1
        if tok == "[":
            if len(name) < 2 or name[0] != "'" or name[-1] != "'":
                raise FieldPathError(f"expected single quoted string but got {name}")
            name = _unescape(name[1:-1])
        result, node = _step(result, node, name)
        if tok == "[":
            if i >= len(tokens):
                raise FieldPathError("unexpected end of JSON path")
            if tokens[i] != "]":
                raise FieldPathError(f"expected ] but got {tokens[i]}")
            i += 1
    assert node is not None
    return result, node


def _step(result: str, node: Structural | None, name: str) -> tuple[str, Structural | None]:
    if node is None:
        raise FieldPathError("does not refer to a valid field")
    if node.properties is not None:
        if name not in node.properties:
            raise FieldPathError("does not refer to a valid field")
        return fe.child(result, name), node.properties[name]
    if node.additional_properties is not None:
        return fe.key(result, name), node.additional_properties.structural
    raise FieldPathError("does not refer to a valid field")
