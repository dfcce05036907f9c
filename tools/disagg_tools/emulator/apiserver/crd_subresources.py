"""A CRD version's subresources, printer columns and selectable fields, checked on create.

Ports ``ValidateCustomResourceDefinitionSubresources``, ``ValidateCustomResourceColumnDefinition``,
``validateSimpleJSONPath`` and ``ValidateCustomResourceSelectableFields`` of
apiextensions-apiserver v0.36.3 ``pkg/apis/apiextensions/validation/validation.go``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import fieldpath
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.structural import StructuralError, new_structural

PRINTER_COLUMN_TYPES = ["boolean", "date", "integer", "number", "string"]
COLUMN_FORMATS = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"]
MAX_SELECTABLE_FIELDS = 8


def validate_column(column: Mapping[str, Any], path: str) -> list[FieldError]:
    """``ValidateCustomResourceColumnDefinition``."""
    errs: list[FieldError] = []
    if not column.get("name"):
        errs.append(fe.required(fe.child(path, "name"), ""))
    typ = str(column.get("type") or "")
    allowed = "must be one of " + ",".join(PRINTER_COLUMN_TYPES)
    if not typ:
        errs.append(fe.required(fe.child(path, "type"), allowed))
    elif typ not in PRINTER_COLUMN_TYPES:
        errs.append(fe.invalid(fe.child(path, "type"), typ, allowed))
    fmt = str(column.get("format") or "")
    if fmt and fmt not in COLUMN_FORMATS:
        errs.append(
            fe.invalid(fe.child(path, "format"), fmt, "must be one of " + ",".join(COLUMN_FORMATS))
        )
    json_path = str(column.get("jsonPath") or "")
    if not json_path:
        errs.append(fe.required(fe.child(path, "JSONPath"), ""))
    else:
        errs += simple_json_path(json_path, fe.child(path, "JSONPath"))
    return errs


def simple_json_path(text: str, path: str) -> list[FieldError]:
    """``validateSimpleJSONPath``."""
    if not text:
        return [fe.invalid(path, text, "must not be empty")]
    if text[0] != ".":
        return [fe.invalid(path, text, "must be a simple json path starting with .")]
    return []


# upstream checks a scale path's form (a simple JSON path under .spec or .status), not that
# the schema declares it
def validate_subresources(sub: Mapping[str, Any] | None, path: str) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionSubresources``: scale paths under .spec / .status."""
    scale = (sub or {}).get("scale")
    if scale is None:
        return []
    errs: list[FieldError] = []
    for key, prefix, where in (
        ("specReplicasPath", (".spec.",), ".spec"),
        ("statusReplicasPath", (".status.",), ".status"),
    ):
        at = fe.child(path, f"scale.{key}")
        value = str(scale.get(key) or "")
        if not value:
            errs.append(fe.required(at, ""))
            continue
        problems = simple_json_path(value, at)
        if problems:
            errs += problems
        elif not value.startswith(prefix):
            errs.append(fe.invalid(at, value, f"should be a json path under {where}"))
    selector = scale.get("labelSelectorPath")
    if selector:
        at = fe.child(path, "scale.labelSelectorPath")
        problems = simple_json_path(selector, at)
        if problems:
            errs += problems
        elif not selector.startswith((".spec.", ".status.")):
            errs.append(
                fe.invalid(at, selector, "should be a json path under either .spec or .status")
            )
    return errs


def top_selectable(spec: Mapping[str, Any], path: str) -> list[FieldError]:
    schema = (spec.get("validation") or {}).get("openAPIV3Schema")
    if spec.get("validation") is None:
        return [
            fe.invalid(
                fe.child(path, "selectableFields"),
                "",
                "may only be set when validations.schema is included",
            )
        ]
    return selectable(spec["selectableFields"], schema, fe.child(path, "selectableFields"))


def selectable(fields: list[Any], schema: Any, path: str) -> list[FieldError]:
    """``ValidateCustomResourceSelectableFields``."""
    try:
        structural = new_structural(schema)
    except StructuralError as exc:
        return [fe.invalid("spec.schema.openAPIV3Schema", "", str(exc))]
    errs: list[FieldError] = []
    unique: list[str] = []
    for i, item in enumerate(fields):
        at = fe.child(fe.index(path, i), "jsonPath")
        json_path = str(item.get("jsonPath") or "")
        if not json_path:
            errs.append(fe.required(at, ""))
            continue
        try:
            assert structural is not None
            found_path, found = fieldpath.valid_field_path(
                json_path, structural, allow_array_notation=False
            )
        except (fieldpath.FieldPathError, AttributeError) as exc:
            errs.append(fe.invalid(at, json_path, f"is an invalid path: {exc}"))
            continue
        if found_path.split(".")[0].split("[")[0] == "metadata":
            errs.append(fe.invalid(at, json_path, "must not point to fields in metadata"))
        if found is None or found.type not in ("string", "boolean", "integer"):
            errs.append(
                fe.invalid(
                    at,
                    json_path,
                    "must point to a field of type string, boolean or integer. Enum string fields "
                    "and strings with formats are allowed.",
                )
            )
        if found_path in unique:
            errs.append(fe.duplicate(at, json_path))
        else:
            unique.append(found_path)
    if len(unique) > MAX_SELECTABLE_FIELDS:
        errs.append(fe.too_many(path, len(unique), MAX_SELECTABLE_FIELDS))
    return errs
