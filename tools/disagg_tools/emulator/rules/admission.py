"""Admission of the objects the emulator serves that are not custom resources of a CRD it
holds: built-in kinds by Kubernetes' own schema (:mod:`.builtin`), the custom kinds the
operator renders by their contract's shape (:mod:`.thirdparty`).

Pure. Unknown fields follow the request's ``fieldValidation`` as for any kind
(k8s.io/apiserver v0.36.3 handlers: absent means Warn): Strict refuses them (400 on a
create or update, 422 on a patch, the message naming each field), Warn drops them with a
``Warning``, Ignore drops them. Other schema findings answer 422 Invalid; an API server
reports a type error of a built-in as a decoding error (400) in Go's words, which this
does not reproduce.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import writes
from disagg_tools.emulator.rules import builtin, thirdparty


def findings(obj: Mapping[str, Any]) -> builtin.Findings:
    """What the kind's schema (or its contract's shape) says of ``obj``."""
    if thirdparty.validator(str(obj.get("kind")), str(obj.get("apiVersion"))) is not None:
        return thirdparty.check(obj)
    return builtin.check(obj)


def admit(
    obj: dict[str, Any], params: dict[str, str], options: str
) -> tuple[dict[str, Any], list[str]]:
    """``obj`` as stored (unknown fields dropped) and the warnings to send; raises
    :class:`fe.ApiError` with what the API server answers. ``options``: CreateOptions,
    UpdateOptions or PatchOptions, the request's kind."""
    mode = writes.directive(params, options)
    found = findings(obj)
    kind, version = str(obj.get("kind")), str(obj.get("apiVersion")).rpartition("/")[2]
    group = str(obj.get("apiVersion")).rpartition("/")[0]
    name = str((obj.get("metadata") or {}).get("name") or "")
    if found.invalid:
        errors = [fe.invalid(where, fe.OMIT, what) for where, what in map(_split, found.invalid)]
        raise fe.ApiError(fe.new_invalid(group, kind, name, errors))
    if not found.unknown:
        return obj, []
    texts = [f'unknown field "{p}"' for p in found.unknown]
    if mode == "Strict":
        strict = "strict decoding error: " + ", ".join(texts)
        if options == "PatchOptions":
            error = fe.invalid("patch", "", strict)
            raise fe.ApiError(fe.new_invalid("", "", "", [error]))
        message = f'{kind} in version "{version}" cannot be handled as a {kind}: {strict}'
        raise fe.ApiError(fe.bad_request(message))
    return builtin.pruned(obj, found.unknown), texts if mode == "Warn" else []


def _split(text: str) -> tuple[str, str]:
    """``path: what`` → (path, what) for a field error."""
    where, _, what = text.partition(": ")
    return where, what
