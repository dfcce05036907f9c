"""kube-apiserver's own test cases for what it refuses of a CustomResourceDefinition, run
against the port (:mod:`disagg_tools.emulator.apiserver.crd`, apiextensions-apiserver
v0.36.3).

A case agrees when the port refuses what upstream refuses with the same errors (type and
field path, and the text where upstream's case names one; no other error), and accepts
what upstream accepts. Restated per upstream file, in the ``upstream_*`` modules beside
this one; every case run agrees:

- ``pkg/apis/apiextensions/validation/validation_test.go`` (``upstream_crd``): 235 cases
  (TestValidateCustomResourceDefinition 57, TestValidateCustomResourceDefinitionValidation
  117 of 119, TestSelectableFields 5, TestValidateFieldPath 23,
  TestValidateCustomResourceDefinitionStoredVersions 5, Test_validateDeprecationWarning 9
  of 10, TestCostInfo 10, TestCelContext 1, TestPerCRDEstimatedCost 8); not ported, with
  the reason in ``upstream_crd.NOT_PORTED``: 3 cases and 3 test functions (updates).
- ``pkg/apiserver/schema/validation_test.go`` and ``convert_test.go``
  (``upstream_structural``): 61 cases (metadata invariants 6 + 15 + 18, completeness 7,
  nested clauses 11 + 4) and the roundtrip (fuzzed upstream) as a hypothesis property.
- ``pkg/apiserver/schema/cel/compilation_test.go`` (``upstream_cel``): TestCelCompilation
  23 of 25 cases; TestCostEstimation 68 cases, whose 136 costs each equal upstream's.
- ``pkg/apiserver/schema/defaulting/validation_test.go``
  (``upstream_default_validation``): 3 cases; the runtime cost budget is not ported.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_tools.emulator.apiserver import cel_rules, crd, crd_spec, defaults, fieldpath
from disagg_tools.emulator.apiserver.cel_compile import compile_rules
from disagg_tools.emulator.apiserver.cel_types import schema_decl_type
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.schema_rules import (
    Options,
    validate_openapi_schema,
    validate_validation,
)
from disagg_tools.emulator.apiserver.structural import (
    StructuralError,
    new_nested,
    new_structural,
    to_props,
)
from disagg_tools.emulator.apiserver.structural_rules import Options as StructuralOptions
from disagg_tools.emulator.apiserver.structural_rules import (
    completeness,
    metadata_invariants,
    nested_rules,
)
from tests.tools.emulator.apiserver import (
    upstream_cel,
    upstream_crd,
    upstream_default_validation,
    upstream_structural,
)


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [c["name"] for c in cases]


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), name)


def _disagreement(expected: list[dict[str, str]], got: list[FieldError]) -> str:
    """Upstream's matcher: every expected error found once, and no other error."""
    unmatched = list(got)
    missing = []
    for want in expected:
        for error in unmatched:
            if (
                error.type == want["type"]
                and error.field == want["path"]
                and want.get("contains", "") in str(error)
            ):
                unmatched.remove(error)
                break
        else:
            missing.append(want)
    if not missing and not unmatched:
        return ""
    return f"missing {missing}; unexpected {[str(e) for e in unmatched]}"


# --- validation_test.go -----------------------------------------------------------------------


@pytest.mark.parametrize("case", upstream_crd.VALIDATE_CRD, ids=_ids(upstream_crd.VALIDATE_CRD))
def test_validate_custom_resource_definition(case: dict[str, Any]) -> None:
    resource = copy.deepcopy(case["resource"])
    conversion = resource.get("spec", {}).get("conversion")
    # upstream's test applies the v1 default of conversionReviewVersions itself
    if conversion and conversion.get("strategy") == "Webhook":
        conversion.setdefault("conversionReviewVersions", None)
        conversion["conversionReviewVersions"] = conversion["conversionReviewVersions"] or [
            "v1beta1"
        ]
    assert not _disagreement(case.get("errors") or [], crd.validate_internal(resource))


@pytest.mark.parametrize("case", upstream_crd.VALIDATION, ids=_ids(upstream_crd.VALIDATION))
def test_validate_custom_resource_definition_validation(case: dict[str, Any]) -> None:
    opts = Options(**{_snake(k): v for k, v in (case.get("opts") or {}).items()})
    got = validate_validation(
        case.get("input"), bool(case.get("statusEnabled")), opts, "spec.validation"
    )
    assert not _disagreement(case.get("expectedErrors") or [], got)


@pytest.mark.parametrize(
    "case", upstream_crd.SELECTABLE_FIELDS, ids=_ids(upstream_crd.SELECTABLE_FIELDS)
)
def test_selectable_fields(case: dict[str, Any]) -> None:
    got = crd.validate_internal(case["resource"])
    assert not _disagreement(case.get("errors") or [], got)


@pytest.mark.parametrize("case", upstream_crd.FIELD_PATH, ids=_ids(upstream_crd.FIELD_PATH))
def test_validate_field_path(case: dict[str, Any]) -> None:
    schema = new_structural(upstream_crd.FIELD_PATH_SCHEMA)
    assert schema is not None
    try:
        fieldpath.valid_field_path(case["fieldPath"], schema)
    except fieldpath.FieldPathError as exc:
        assert case.get("errMsg") and case["errMsg"] in str(exc)
    else:
        assert not case.get("errMsg")


@pytest.mark.parametrize(
    "case", upstream_crd.STORED_VERSIONS, ids=_ids(upstream_crd.STORED_VERSIONS)
)
def test_stored_versions(case: dict[str, Any]) -> None:
    versions = [{"name": v, "storage": v == case["storageVersion"]} for v in case["versions"]]
    got = crd.stored_versions(case["storedVersions"], versions)
    assert not _disagreement(case.get("errors") or [], got)


_DEPRECATION = [
    c
    for c in upstream_crd.DEPRECATION_WARNING
    if f"Test_validateDeprecationWarning/{c['name']}" not in upstream_crd.NOT_PORTED
]


@pytest.mark.parametrize("case", _DEPRECATION, ids=_ids(_DEPRECATION))
def test_deprecation_warning(case: dict[str, Any]) -> None:
    got = crd_spec.deprecation_warning(case["deprecated"], case.get("warning"))
    assert got == (case.get("want") or [])


@pytest.mark.parametrize("case", upstream_crd.COST_INFO, ids=_ids(upstream_crd.COST_INFO))
def test_cost_info(case: dict[str, Any]) -> None:
    schemas = [*case["schema"], {"type": "string"}]
    ctx = cel_rules.CelContext.root(schemas[0])
    for schema in schemas[1:]:
        ctx = ctx.child(schema, ("items", ""))
    assert ctx.cardinality == case.get("expectedMaxCardinality")


def test_cel_context_converts_each_schema_once(monkeypatch: pytest.MonkeyPatch) -> None:
    (case,) = upstream_crd.CEL_CONTEXT
    conversions = []

    def counting(schema: Any) -> Any:
        conversions.append(schema)
        return new_structural(schema)

    monkeypatch.setattr(cel_rules, "new_structural", counting)
    ctx = cel_rules.CelContext.root(case["schema"])
    assert validate_openapi_schema(case["schema"], "openAPIV3Schema", Options(), ctx) == []
    assert len(conversions) == 1


@pytest.mark.parametrize("case", upstream_crd.PER_CRD_COST, ids=_ids(upstream_crd.PER_CRD_COST))
def test_per_crd_estimated_cost(case: dict[str, Any]) -> None:
    total = cel_rules.TotalCost()
    for cost in case["costs"]:
        total.observe("", cost)
    assert [r.cost for r in total.most_expensive] == case["expectedExpensive"]
    assert total.total == case["expectedTotal"]


# --- schema/validation_test.go, convert_test.go ----------------------------------------------


_METADATA = (
    upstream_structural.METADATA_TYPES
    + upstream_structural.METADATA_PROPERTIES
    + [
        {
            "name": c["name"],
            "metadata": {
                "type": "object",
                "properties": {"name": {}, "generateName": {}},
                **c["extra"],
            },
            "refused": c["refused"],
        }
        for c in upstream_structural.METADATA_FIELDS
    ]
)


@pytest.mark.parametrize("case", _METADATA, ids=_ids(_METADATA))
def test_validate_structural_metadata_invariants(case: dict[str, Any]) -> None:
    metadata = new_structural(case["metadata"])
    assert metadata is not None
    assert bool(metadata_invariants(metadata)) == case["refused"]


_COMPLETENESS = upstream_structural.COMPLETENESS


@pytest.mark.parametrize("case", _COMPLETENESS, ids=_ids(_COMPLETENESS))
def test_validate_structural_completeness(case: dict[str, Any]) -> None:
    opts = StructuralOptions(
        **{_snake(k).lstrip("_"): v for k, v in case.get("options", {}).items()}
    )
    got = [str(e) for e in completeness(new_structural(case["schema"]), "", opts)]
    if "error" in case:
        assert any(case["error"] in e for e in got), got
    else:
        assert got == []


_NESTED = [{**c, "refused": True} for c in upstream_structural.NESTED_FORBIDDEN]
_NESTED += upstream_structural.NESTED_ALLOWED_BY_OPTION


@pytest.mark.parametrize("case", _NESTED, ids=_ids(_NESTED))
def test_validate_nested_value_validation_complete(case: dict[str, Any]) -> None:
    opts = StructuralOptions(
        **{_snake(k).lstrip("_"): v for k, v in case.get("options", {}).items()}
    )
    clause = new_nested(case["clause"])
    assert clause is not None
    assert bool(nested_rules(clause, opts)) == case["refused"]


_WORDS = st.text(alphabet="abcxyz", min_size=1, max_size=4)
_SCALARS = st.one_of(st.booleans(), st.integers(-5, 5), _WORDS)
_FIELDS: dict[str, Any] = {
    "type": st.sampled_from(["object", "array", "string", "integer"]),
    "description": _WORDS,
    "title": _WORDS,
    "format": _WORDS,
    "pattern": _WORDS,
    "nullable": st.just(True),
    "maxLength": st.integers(0, 9),
    "minimum": st.integers(0, 9),
    "required": st.lists(_WORDS, min_size=1, max_size=2),
    "enum": st.lists(_SCALARS, min_size=1, max_size=2),
    "default": st.dictionaries(_WORDS, _SCALARS, min_size=1, max_size=2),
    "x-kubernetes-int-or-string": st.just(True),
    "x-kubernetes-list-type": _WORDS,
    "x-kubernetes-list-map-keys": st.lists(_WORDS, min_size=1, max_size=2),
    "x-kubernetes-validations": st.lists(st.fixed_dictionaries({"rule": _WORDS}), max_size=1),
    "x-kubernetes-preserve-unknown-fields": st.booleans(),
    "$ref": _WORDS,
    "definitions": st.dictionaries(_WORDS, st.just({}), min_size=1, max_size=1),
    "additionalItems": st.just(True),
}


def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.fixed_dictionaries({}, optional=_FIELDS)
    return st.recursive(
        leaf,
        lambda inner: st.fixed_dictionaries(
            {},
            optional={
                **_FIELDS,
                "items": inner,
                "properties": st.dictionaries(_WORDS, inner, min_size=1, max_size=2),
                "additionalProperties": st.one_of(st.booleans(), inner),
                # junctor clauses keep value validations only (a clause's
                # additionalProperties: false is dropped by NewStructural, as upstream)
                "allOf": st.lists(leaf, min_size=1, max_size=2),
                "not": leaf,
            },
        ),
        max_leaves=6,
    )


@settings(max_examples=300, deadline=None)
@given(_schemas())
def test_structural_roundtrip_or_error(schema: dict[str, Any]) -> None:
    """convert_test.go TestStructuralRoundtripOrError: NewStructural drops nothing."""
    try:
        structural = new_structural(schema)
    except StructuralError:
        return
    assert structural is not None
    assert to_props(structural) == _without_go_zero(schema)


def _without_go_zero(schema: Any) -> Any:
    """What a Go struct keeps of the schema: false and empty strings are its zero values."""
    if isinstance(schema, list):
        return [_without_go_zero(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {}
    for key, value in schema.items():
        if value is False and key != "additionalProperties":
            continue
        kept[key] = value if key in ("default", "enum") else _without_go_zero(value)
    return kept


# --- cel/compilation_test.go ------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", upstream_cel.CEL_COMPILATION, ids=_ids(upstream_cel.CEL_COMPILATION)
)
def test_cel_compilation(case: dict[str, Any]) -> None:
    structural = new_structural(case["schema"])
    decl = schema_decl_type(structural, False)
    assert decl is not None
    rules = case["schema"]["x-kubernetes-validations"]
    results = compile_rules(rules, decl)
    assert len(results) == len(case["expected"])
    for want, got in zip(case["expected"], results, strict=True):
        if "error" in want:
            if want["error"] is None:
                assert got.error is None, got.error
            else:
                assert got.error is not None and want["error"] in got.error.detail
        if "transition" in want:
            assert got.uses_old_self == want["transition"]
        if "messageExpressionError" in want:
            error = got.message_expression_error
            assert error is not None and want["messageExpressionError"] in error.detail
        if want.get("blank"):
            assert (got.max_cost, got.uses_old_self) == (0, False)


@pytest.mark.parametrize(
    "case", upstream_cel.COST_ESTIMATION, ids=_ids(upstream_cel.COST_ESTIMATION)
)
@pytest.mark.parametrize("bounded", [False, True], ids=["calc", "set"])
def test_cost_estimation(case: dict[str, Any], bounded: bool) -> None:
    schema = upstream_cel.cost_schema(case, case["setMaxElements"] if bounded else None)
    decl = schema_decl_type(new_structural(schema), False)
    assert decl is not None
    (result,) = compile_rules(schema["x-kubernetes-validations"], decl)
    assert result.error is None
    kind = "Set" if bounded else "Calc"
    expected = case.get(f"expected{kind}Cost", 0)
    exceeds = case.get(
        "expectedSetCostExceedsLimit" if bounded else "expectCalcCostExceedsLimit", 0
    )
    if expected:
        assert result.max_cost == expected
    assert result.max_cost >= exceeds


# --- defaulting/validation_test.go ------------------------------------------------------------


@pytest.mark.parametrize(
    "case", upstream_default_validation.CASES, ids=_ids(upstream_default_validation.CASES)
)
def test_default_validation(case: dict[str, Any]) -> None:
    structural = new_structural(case["schema"])
    assert structural is not None
    got = [str(e) for e in defaults.validate_node("test", structural, False)]
    assert len(got) == len(case["errors"]), got
    for text in case["errors"]:
        assert any(text in e for e in got), got
