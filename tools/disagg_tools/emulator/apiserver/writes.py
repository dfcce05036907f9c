"""Every write of a custom resource, as kube-apiserver v0.36.3 handles it.

Ports apiserver v0.36.3 ``pkg/endpoints/handlers`` (create.go, update.go, patch.go, rest.go:
``fieldValidation``, Warn when absent) over apiextensions-apiserver v0.36.3's decoder
(:mod:`.decoding`), defaulting and strategy; the emulator's server calls these in order.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from disagg_tools.emulator.apiserver import cel, decoding, defaulting, gofmt, openapi, strategy
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.schema_validation import SchemaCheck
from disagg_tools.emulator.apiserver.strategy import Served

DIRECTIVES = ("", "Ignore", "Strict", "Warn")  # metav1 validation's allowed values, sorted
# the patch types a custom resource takes (crdHandler; CBOR apply is an alpha gate in 1.36)
PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)
_STANDARD_FINALIZERS = frozenset({"orphan", "foregroundDeletion", "kubernetes"})


@dataclass
class Decoded:
    """A decoded, pruned, defaulted object and the warnings decoding raised."""

    obj: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def served_versions(crd: dict[str, Any]) -> dict[str, Served]:
    """Each served version of a CRD by resource key (``group/version/plural``). Raises
    :class:`cel.Unsupported` for what this port cannot check (a format, a CEL feature)."""
    spec = crd["spec"]
    found = {}
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        schema = ((version.get("schema") or {}).get("openAPIV3Schema")) or None
        unported = openapi.unported_formats(schema) if schema else []
        if unported:
            raise cel.Unsupported(f"formats this emulator does not check: {', '.join(unported)}")
        has_status = "status" in (version.get("subresources") or {})
        status_schema = ((schema or {}).get("properties") or {}).get("status")
        found[f"{spec['group']}/{version['name']}/{spec['names']['plural']}"] = Served(
            group=spec["group"],
            version=version["name"],
            kind=spec["names"]["kind"],
            schema=schema,
            check=SchemaCheck(schema) if schema else None,
            status_check=SchemaCheck(status_schema) if has_status and status_schema else None,
            rules=cel.build(schema),
            has_status=has_status,
            scale=(version.get("subresources") or {}).get("scale"),
            preserve_unknown=bool(spec.get("preserveUnknownFields")),
        )
    return found


def directive(params: dict[str, str], options: str) -> str:
    """The ``fieldValidation`` in force (Warn when absent); 422 on another value, as
    ``ValidateCreateOptions`` (``options``: CreateOptions, UpdateOptions, PatchOptions)."""
    value = params.get("fieldValidation", "")
    if value not in DIRECTIVES:
        error = fe.not_supported("fieldValidation", value, list(DIRECTIVES))
        raise fe.ApiError(fe.new_invalid("meta.k8s.io", options, "", [error]))
    return value or "Warn"


def _coerce(served: Served, obj: dict[str, Any]) -> list[str]:
    schema = None if served.preserve_unknown else served.schema
    if served.preserve_unknown:
        return decoding.unknown_metadata(obj)
    return decoding.coerce(obj, schema, group=served.group, kind=served.kind)


def decode_object(
    served: Served, raw: bytes, ctype: str, params: dict[str, str], options: str
) -> Decoded:
    """A create or update body: decoded (URL's kind and version filling what is absent),
    coerced and defaulted; 400 for the wrong API version or, under Strict, a strict error."""
    mode = directive(params, options)
    body, duplicates = decoding.parse(raw, ctype)
    if not isinstance(body, dict):
        raise fe.ApiError(fe.bad_request("the request body must be an object"))
    body.setdefault("apiVersion", f"{served.group}/{served.version}")
    body.setdefault("kind", served.kind)
    expected = f"{served.group}/{served.version}"
    if body["apiVersion"] != expected:
        message = (
            f"the API version in the data ({body['apiVersion']}) does not match the "
            f"expected API version ({expected})"
        )
        raise fe.ApiError(fe.bad_request(message))
    strict = decoding.strict_errors(duplicates if mode != "Ignore" else [], _coerce(served, body))
    decoded = Decoded(body)
    if strict and mode == "Strict":
        version = expected.rpartition("/")[2]
        message = (
            f"{body.get('kind')} in version {gofmt.quote(version)} cannot be handled as a "
            f"{body.get('kind')}: {decoding.strict_message(strict)}"
        )
        raise fe.ApiError(fe.bad_request(message))
    if mode == "Warn":
        decoded.warnings.extend(strict)
    defaulting.default(body, served.schema)
    return decoded


def check_patch_type(content_type: str) -> None:
    """415 for a patch type custom resources do not take (strategic merge: they have no
    Go struct tags to merge by)."""
    if content_type.split(";", 1)[0].strip() not in PATCH_TYPES:
        message = (
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(PATCH_TYPES)
        )
        raise fe.ApiError(fe.status(415, "UnsupportedMediaType", message, None))


def decode_patched(
    served: Served, patched: dict[str, Any], patch_errors: list[str], params: dict[str, str]
) -> Decoded:
    """A merge or JSON patch's result: re-decoded (coerced, defaulted); ``patch_errors``
    are the patch body's own strict errors. Under Strict one refuses it with 422."""
    mode = directive(params, "PatchOptions")
    shown = gofmt.json_marshal(patched) if mode == "Strict" else ""  # before pruning
    unknown = _coerce(served, patched)
    strict = [*(patch_errors if mode != "Ignore" else []), *decoding.strict_errors([], unknown)]
    if strict and mode == "Strict":
        error = fe.invalid("patch", shown, decoding.strict_message(strict))
        raise fe.ApiError(fe.new_invalid("", "", "", [error]))
    decoded = Decoded(patched, strict if mode == "Warn" else [])
    defaulting.default(patched, served.schema)
    return decoded


def check_apply(served: Served, body: Any) -> None:
    """Server-side apply's typed conversion of the applied object: a field the schema does
    not declare is refused (500), whatever ``fieldValidation`` says; the message names the
    object by the namespace and name the body gives."""
    if not isinstance(body, dict):
        return
    probe = copy.deepcopy(body)
    probe.setdefault("apiVersion", f"{served.group}/{served.version}")
    probe.setdefault("kind", served.kind)
    unknown = _coerce(served, probe)
    if not unknown:
        return
    meta = body.get("metadata") or {}
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    gvk = f"{served.group}/{served.version}, Kind={served.kind}"
    lines = [f".{p}: field not declared in schema" for p in unknown]
    detail = lines[0] if len(lines) == 1 else "errors:\n  " + "\n  ".join(lines)
    message = f"failed to create typed patch object ({where}; {gvk}): {detail}"
    raise fe.ApiError(fe.status(500, "", message, None))


def _refuse(served: Served, obj: dict[str, Any], errors: list[fe.FieldError]) -> None:
    if errors:
        name = str((obj.get("metadata") or {}).get("name") or "")
        raise fe.ApiError(fe.new_invalid(served.group, served.kind, name, errors))


def finalizer_warnings(obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """``generateWarningsFromObj``: newly added finalizers without a domain (and a path)."""
    added = set((obj.get("metadata") or {}).get("finalizers") or ())
    added -= set(((old or {}).get("metadata") or {}).get("finalizers") or ())
    found = []
    for name in sorted(added):
        if "/" in name or name in _STANDARD_FINALIZERS:
            continue
        advice = (
            "a domain-qualified finalizer name including a path (/)"
            if "." in name
            else ("a domain-qualified finalizer name")
        )
        found.append(
            f"metadata.finalizers: {gofmt.quote(name)}: prefer {advice} to avoid "
            "accidental conflicts with other finalizer writers"
        )
    return found


def admit_create(served: Served, obj: dict[str, Any]) -> list[str]:
    """``PrepareForCreate`` (a status subresource's status dropped) and ``Validate``; 422
    on errors, else the warnings."""
    if served.has_status:
        obj.pop("status", None)
    errors, warnings = strategy.validate_create(served, obj)
    _refuse(served, obj, errors)
    return [*warnings, *finalizer_warnings(obj)]


def admit_update(served: Served, obj: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """``PrepareForUpdate`` (status kept from ``old``) and ``ValidateUpdate``, ratcheting."""
    if served.has_status:
        if "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)
    errors, warnings = strategy.validate_update(served, obj, old)
    _refuse(served, obj, errors)
    return [*warnings, *finalizer_warnings(obj, old)]


def admit_status(
    served: Served, obj: dict[str, Any], old: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The status strategy: ``old`` with ``obj``'s status, validated; the object to store
    and the warnings (ratcheted rule failures; the strategy itself warns of nothing)."""
    new = {k: v for k, v in old.items() if k != "status"}
    if "status" in obj:
        new["status"] = obj["status"]
    errors, warnings = strategy.validate_status(served, new, old)
    _refuse(served, new, errors)
    return new, warnings
