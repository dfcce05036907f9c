"""Kubernetes' name checks and ObjectMeta validation, as the apiserver words them.

Ports apimachinery v0.36.3 ``pkg/util/validation`` (DNS-1123 and DNS-1035 names),
``pkg/api/validate/content`` and ``pkg/api/validation/objectmeta.go``, for a CRD's
metadata and an embedded resource's default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.fielderrors import FieldError

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + "(\\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
    "an alphabetic character, and end with an alphanumeric character"
)
_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character"
)
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _full(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def is_dns1123_label(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _full(_LABEL, value):
        if _full(_SUBDOMAIN, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_LABEL_MSG, _LABEL, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str, unit: str = "characters") -> list[str]:
    errs = [f"must be no more than 253 {unit}"] if len(value) > 253 else []
    if not _full(_SUBDOMAIN, value):
        errs.append(regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    if not _full(_DNS1035, value):
        errs.append(regex_error(_DNS1035_MSG, _DNS1035, "my-name", "abc-123"))
    return errs


def is_label_key(value: str) -> list[str]:
    """``content.IsLabelKey`` (also ``IsQualifiedName``)."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + regex_error(_KEY_MSG, _KEY, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix, "bytes")]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _full(_KEY, name):
        errs.append("name part " + regex_error(_KEY_MSG, _KEY, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = ["must be no more than 63 bytes"] if len(value) > 63 else []
    if not _full(f"({_KEY})?", value):
        errs.append(regex_error(_VALUE_MSG, f"({_KEY})?", "MyValue", "my_value", "12345"))
    return errs


def path_segment_name(name: str, prefix: bool) -> list[str]:
    """``IsPathSegmentName`` / ``IsPathSegmentPrefix``."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def mask_trailing_dash(name: str) -> str:
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    return is_dns1123_subdomain(mask_trailing_dash(name) if prefix else name)


NameFn = Callable[[str, bool], list[str]]


def validate_object_meta(
    meta: Mapping[str, Any], namespaced: bool, name_fn: NameFn, path: str
) -> list[FieldError]:
    """``ValidateObjectMetaAccessor`` for the fields a create can carry."""
    errs: list[FieldError] = []
    generate = str(meta.get("generateName") or "")
    if generate:
        errs += [
            fe.invalid(fe.child(path, "generateName"), generate, m) for m in name_fn(generate, True)
        ]
    name = str(meta.get("name") or "")
    if not name:
        errs.append(fe.required(fe.child(path, "name"), "name or generateName is required"))
    else:
        errs += [fe.invalid(fe.child(path, "name"), name, m) for m in name_fn(name, False)]
    namespace = str(meta.get("namespace") or "")
    if namespaced:
        if not namespace:
            errs.append(fe.required(fe.child(path, "namespace"), ""))
        else:
            errs += [
                fe.invalid(fe.child(path, "namespace"), namespace, m)
                for m in is_dns1123_label(mask_trailing_dash(namespace))
            ]
    elif namespace:
        errs.append(fe.forbidden(fe.child(path, "namespace"), "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        errs.append(
            fe.invalid(
                fe.child(path, "generation"), generation, "must be greater than or equal to 0"
            )
        )
    errs += validate_labels(meta.get("labels") or {}, fe.child(path, "labels"))
    errs += validate_annotations(meta.get("annotations") or {}, fe.child(path, "annotations"))
    for finalizer in meta.get("finalizers") or []:
        errs += [
            fe.invalid(fe.child(path, "finalizers"), finalizer, m) for m in is_label_key(finalizer)
        ]
    return errs


def validate_labels(labels: Mapping[str, str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in sorted(labels):
        errs += [fe.invalid(path, key, m) for m in is_label_key(key)]
        errs += [fe.invalid(path, labels[key], m) for m in is_label_value(str(labels[key]))]
    return errs


def validate_annotations(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in sorted(annotations):
        errs += [fe.invalid(path, key, m) for m in is_label_key(key.lower())]
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(fe.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs
