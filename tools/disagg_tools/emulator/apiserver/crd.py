"""What kube-apiserver refuses of a CustomResourceDefinition on create, and the 422 it sends.

The entry of the CRD admission port (apiextensions-apiserver v0.36.3): the v1 CRD in its
internal form (``pkg/apis/apiextensions/v1`` conversion, ``PrepareForCreate`` of
``pkg/registry/customresourcedefinition/strategy.go``), then ``ValidateCustomResourceDefinition``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.apiserver import crd_spec, names
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.cel_rules import (
    STATIC_ESTIMATED_COST_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT,
    RuleCost,
)
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.schema_rules import create_options, estimate_costs

_GROUP, _KIND = "apiextensions.k8s.io", "CustomResourceDefinition"
KIND = f"{_KIND}.{_GROUP}"
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
PER_RULE_COST_LIMIT = STATIC_ESTIMATED_COST_LIMIT
PER_CRD_COST_LIMIT = STATIC_ESTIMATED_CRD_COST_LIMIT
# a schema, subresources or printer columns equal in every version move to the top: a
# single-version CRD's errors read spec.validation.openAPIV3Schema..., not spec.versions[0]
_HOISTED = (
    ("schema", "validation"),
    ("subresources", "subresources"),
    ("additionalPrinterColumns", "additionalPrinterColumns"),
    ("selectableFields", "selectableFields"),
)
__all__ = [
    "PER_CRD_COST_LIMIT",
    "PER_RULE_COST_LIMIT",
    "FieldError",
    "RuleCost",
    "invalid_message",
    "rule_costs",
    "to_internal",
    "validate_crd",
    "validate_internal",
]


def validate_crd(crd: Mapping[str, Any]) -> list[FieldError]:
    """The errors kube-apiserver answers a create of this ``apiextensions.k8s.io/v1`` CRD
    with (empty: it is accepted)."""
    return validate_internal(to_internal(crd))


def rule_costs(crd: Mapping[str, Any]) -> list[RuleCost]:
    """Every ``x-kubernetes-validations`` rule's estimated cost, at its field path (an
    upper bound of upstream's estimate; limits :data:`PER_RULE_COST_LIMIT` and, summed,
    :data:`PER_CRD_COST_LIMIT`)."""
    spec = to_internal(crd)["spec"]
    holders = [("spec.validation", spec.get("validation"))]
    holders += [
        (f"spec.versions[{i}].schema", v.get("schema")) for i, v in enumerate(spec["versions"])
    ]
    costs: list[RuleCost] = []
    for path, holder in holders:
        if holder and holder.get("openAPIV3Schema") is not None:
            costs += estimate_costs(holder["openAPIV3Schema"], path, create_options())
    return costs


def invalid_message(crd: Mapping[str, Any], errors: list[FieldError]) -> str:
    """The ``message`` of the 422 Status a client reads (``errors.NewInvalid``)."""
    name = str((crd.get("metadata") or {}).get("name") or "")
    return str(fe.new_invalid(_GROUP, _KIND, name, errors)["message"])


# --- v1 -> internal --------------------------------------------------------------------------


def to_internal(crd: Mapping[str, Any]) -> dict[str, Any]:
    """The internal form the apiserver validates on create."""
    crd = copy.deepcopy(dict(crd))
    spec = dict(crd.get("spec") or {})
    names_ = dict(spec.get("names") or {})
    if not names_.get("singular"):
        names_["singular"] = str(names_.get("kind") or "").lower()
    if not names_.get("listKind") and names_.get("kind"):
        names_["listKind"] = f"{names_['kind']}List"
    versions = [dict(v) for v in spec.get("versions") or []]
    internal: dict[str, Any] = {
        "group": spec.get("group"),
        "names": names_,
        "scope": spec.get("scope"),
        "versions": versions,
        "conversion": _conversion(spec.get("conversion")),
        "preserveUnknownFields": bool(spec.get("preserveUnknownFields", False)),
    }
    if versions:
        internal["version"] = versions[0].get("name")
        for per, top in _HOISTED:
            first = versions[0].get(per)
            if all(v.get(per) == first for v in versions):
                internal[top] = first
                for v in versions:
                    v.pop(per, None)
    # PrepareForCreate appends the storage version to a nil list: none leaves it nil
    stored = [v["name"] for v in versions if v.get("storage")][:1] or None
    return {
        "metadata": dict(crd.get("metadata") or {}),
        "spec": internal,
        "status": {"storedVersions": stored},
    }


def _conversion(conversion: Mapping[str, Any] | None) -> dict[str, Any]:
    if conversion is None:
        return {"strategy": "None"}
    out: dict[str, Any] = {"strategy": conversion.get("strategy")}
    webhook = conversion.get("webhook")
    if webhook is not None:
        out["conversionReviewVersions"] = webhook.get("conversionReviewVersions")
        client = webhook.get("clientConfig")
        if client is not None:
            client = dict(client)
            if client.get("service") is not None:
                client["service"] = {"port": 443, **client["service"]}
            out["webhookClientConfig"] = client
    return out


# --- ValidateCustomResourceDefinition --------------------------------------------------------


def validate_internal(
    crd: Mapping[str, Any], costs: list[RuleCost] | None = None
) -> list[FieldError]:
    """``ValidateCustomResourceDefinition`` on the internal form (upstream's test input)."""
    spec = crd.get("spec") or {}
    meta = crd.get("metadata") or {}
    required = f"{(spec.get('names') or {}).get('plural', '')}.{spec.get('group') or ''}"

    def name_fn(name: str, prefix: bool) -> list[str]:
        problems = names.name_is_dns_subdomain(name, prefix)
        return problems + (['must be spec.names.plural+"."+spec.group'] if name != required else [])

    errs = names.validate_object_meta(meta, False, name_fn, "metadata")
    errs += crd_spec.validate_spec(
        spec, create_options(), "spec", costs if costs is not None else []
    )
    status = crd.get("status") or {}
    errs += crd_spec.validate_names(status.get("acceptedNames") or {}, "status.acceptedNames")
    errs += stored_versions(status.get("storedVersions"), spec.get("versions") or [])
    errs += _api_approval(spec, meta)
    if spec.get("preserveUnknownFields"):
        errs.append(
            fe.invalid(
                "spec.preserveUnknownFields",
                True,
                "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                "spec.versions[*].schema instead",
            )
        )
    return errs


def stored_versions(
    stored: list[str] | None, versions: list[Mapping[str, Any]]
) -> list[FieldError]:
    """``ValidateCustomResourceDefinitionStoredVersions``."""
    path = "status.storedVersions"
    if not stored:
        return [fe.invalid(path, stored, "must have at least one stored version")]
    errs: list[FieldError] = []
    remaining = {v: i for i, v in enumerate(stored)}
    for v in versions:
        name = v.get("name")
        if v.get("storage") and name not in remaining:
            errs.append(fe.invalid(path, stored, f"must have the storage version {name}"))
        remaining.pop(str(name), None)
    for name, i in remaining.items():
        errs.append(
            fe.invalid(
                fe.index(path, i),
                name,
                f"missing from spec.versions; {name} was previously a storage version, and must "
                "remain in spec.versions until a storage migration ensures no data remains "
                f"persisted in {name} and removes {name} from status.storedVersions",
            )
        )
    return errs


def _api_approval(spec: Mapping[str, Any], meta: Mapping[str, Any]) -> list[FieldError]:
    group = str(spec.get("group") or "")
    protected = group in ("k8s.io", "kubernetes.io") or group.endswith(
        (".k8s.io", ".kubernetes.io")
    )
    if not protected:
        return []
    value = str((meta.get("annotations") or {}).get(APPROVAL_ANNOTATION) or "")
    path = fe.key("metadata.annotations", APPROVAL_ANNOTATION)
    if not value:
        return [
            fe.required(
                path,
                f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", see '
                "https://github.com/kubernetes/enhancements/pull/1111",
            )
        ]
    if value.startswith("unapproved"):
        return []
    scheme, sep, rest = value.partition("://")
    if sep and scheme and rest.split("/")[0]:
        return []
    return [
        fe.invalid(
            path,
            value,
            f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}" with either '
            'a URL or a reason starting with "unapproved", see '
            "https://github.com/kubernetes/enhancements/pull/1111",
        )
    ]
