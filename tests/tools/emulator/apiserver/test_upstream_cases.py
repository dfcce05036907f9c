"""Upstream's own test cases for kube-apiserver's custom-resource rules, run against the
port in :mod:`disagg_tools.emulator.apiserver` (apiextensions-apiserver v0.36.3).

Each parameter is one upstream case (``<test function>/<case name>``); its data lives in
the ``upstream_*`` modules beside this file, restated from the upstream ``_test.go``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from disagg_tools.emulator.apiserver import cel, defaulting, listtype, pruning
from disagg_tools.emulator.apiserver.schema_validation import SchemaCheck
from tests.tools.emulator.apiserver import (
    upstream_cel_validation,
    upstream_defaulting,
    upstream_listtype,
    upstream_pruning,
    upstream_ratcheting,
    upstream_validation,
)


def _ids(cases: list[dict[str, Any]]) -> list[str]:
    return [f"{c['test']}/{c.get('name', i)}" for i, c in enumerate(cases)]


@pytest.mark.parametrize("case", upstream_pruning.CASES, ids=_ids(upstream_pruning.CASES))
def test_pruning(case: dict[str, Any]) -> None:
    obj = copy.deepcopy(case["json"])
    pruned = pruning.prune(
        obj, case["schema"], is_resource_root=case.get("is_resource_root", False)
    )
    assert obj == case["expected_object"]
    assert pruned == case.get("expected_pruned", [])


@pytest.mark.parametrize("case", upstream_defaulting.DEFAULT, ids=_ids(upstream_defaulting.DEFAULT))
def test_defaulting(case: dict[str, Any]) -> None:
    obj = copy.deepcopy(case["json"])
    defaulting.default(obj, case["schema"])
    assert obj == case["expected"]


@pytest.mark.parametrize(
    "case", upstream_defaulting.PRUNE_NULLS, ids=_ids(upstream_defaulting.PRUNE_NULLS)
)
def test_pruning_nulls(case: dict[str, Any]) -> None:
    obj = copy.deepcopy(case["json"])
    defaulting.prune_non_nullable_nulls(obj, case["schema"])
    assert obj == case["expected"]


@pytest.mark.parametrize("case", upstream_ratcheting.CASES, ids=_ids(upstream_ratcheting.CASES))
def test_ratcheting(case: dict[str, Any]) -> None:
    result = SchemaCheck(case["schema"]).result_update(case["new"], case["old"])
    assert result.valid is case["valid"], [e.message for e in result.errors]


def _errors(case: dict[str, Any], obj: Any, old: Any) -> set[str]:
    """ValidateCustomResource plus the CEL validator (not a resource root), as the test."""
    found = {str(e) for e in SchemaCheck(case["schema"]).validate(obj)}
    rules = cel.build(case["schema"], is_resource_root=False)
    found |= {str(e) for e in cel.validate(rules, obj, old).errors}
    return found


VALID = [
    {**c, "object": obj, "old": (c.get("old_objects") or [None] * len(c["objects"]))[i]}
    for c in upstream_validation.CASES
    for i, obj in enumerate(c.get("objects", []))
]
FAILING = [{**c, **f} for c in upstream_validation.CASES for f in c.get("failing", [])]


@pytest.mark.parametrize("case", VALID, ids=_ids(VALID))
def test_validation_passes(case: dict[str, Any]) -> None:
    assert _errors(case, case["object"], case["old"]) == set()


@pytest.mark.parametrize("case", FAILING, ids=_ids(FAILING))
def test_validation_fails_with_upstream_messages(case: dict[str, Any]) -> None:
    assert _errors(case, case["object"], case.get("old")) == set(case["errors"])


@pytest.mark.parametrize(
    "case", upstream_validation.ITEMS_PROPERTY, ids=_ids(upstream_validation.ITEMS_PROPERTY)
)
def test_items_property(case: dict[str, Any]) -> None:
    assert bool(SchemaCheck(case["schema"]).validate(case["object"])) is case["want_error"]


@pytest.mark.parametrize("case", upstream_listtype.CASES, ids=_ids(upstream_listtype.CASES))
def test_list_types(case: dict[str, Any]) -> None:
    found = listtype.validate(case["schema"], case["obj"], "root")
    assert sorted((e.type, e.field) for e in found) == sorted(case["errors"])


@pytest.mark.parametrize(
    "case",
    upstream_cel_validation.MESSAGE_EXPRESSION,
    ids=_ids(upstream_cel_validation.MESSAGE_EXPRESSION),
)
def test_cel_message_expressions(case: dict[str, Any]) -> None:
    rules = cel.build(case["schema"], is_resource_root=False)
    errors = cel.validate(rules, case["obj"], path="root").errors
    assert len(errors) == 1 and case["contains"] in str(errors[0])


@pytest.mark.parametrize(
    "case",
    upstream_cel_validation.REASON_AND_FIELD_PATH,
    ids=_ids(upstream_cel_validation.REASON_AND_FIELD_PATH),
)
def test_cel_reasons_and_field_paths(case: dict[str, Any]) -> None:
    rules = cel.build(case["schema"], is_resource_root=True)
    errors = cel.validate(rules, case["obj"], path="root").errors
    assert sorted((e.type, e.field) for e in errors) == sorted(case["errors"])
