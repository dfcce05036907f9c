"""The CEL checks of a CRD's schema: every rule compiles, and the rules' cost is bounded.

Ports apiextensions-apiserver v0.36.3 ``pkg/apis/apiextensions/validation/
cel_validation.go`` (``CELSchemaContext``: a node's cardinality, the CRD's running total)
and the rule part of ``validation.go``; limits are upstream's, 10^7 a rule, 10^8 a CRD.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from disagg_tools.emulator.apiserver import cel_compile, cel_types, fieldpath
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.cel_types import DeclType
from disagg_tools.emulator.apiserver.fielderrors import FieldError
from disagg_tools.emulator.apiserver.gofmt import validation_rule
from disagg_tools.emulator.apiserver.structural import (
    Structural,
    StructuralError,
    new_structural,
)

Schema = Mapping[str, Any]
_REASONS = ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"]
_NEWLINES = re.compile(r"[\n\r]+")  # the line breaks of CEL's grammar
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000
MAX_UINT64 = 2**64 - 1


@dataclass(frozen=True)
class RuleCost:
    """The estimated cost of one rule (or messageExpression) at its field path."""

    path: str
    cost: int


@dataclass
class TotalCost:
    """The CRD's running total, its four most expensive rules, and every estimate seen."""

    total: int = 0
    most_expensive: list[RuleCost] = field(default_factory=list)
    observed: list[RuleCost] = field(default_factory=list)

    def observe(self, path: str, cost: int) -> None:
        self.observed.append(RuleCost(path, cost))
        self.total = min(self.total + cost, MAX_UINT64)
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT // 100:
            return
        self.most_expensive.append(RuleCost(path, cost))
        self.most_expensive.sort(key=lambda r: r.cost, reverse=True)
        del self.most_expensive[4:]


@dataclass
class TypeInfo:
    schema: Structural
    decl: DeclType


class CelContext:
    """``CELSchemaContext`` for one schema node (None above the first rule's scope). A rule
    costs its worst case times the node's cardinality: the product of the maxItems and
    maxProperties above it, unbounded below a list or map that has none."""

    def __init__(
        self,
        schema: dict[str, Any] | None,
        parent: CelContext | None,
        accessor: tuple[str, str] | None,
        cardinality: int | None,
        total: TotalCost,
    ) -> None:
        self.schema = schema
        self.parent = parent
        self.accessor = accessor  # ("property", name) | ("items", "") | ("additional", "")
        self.cardinality = cardinality  # None: unbounded
        self.total = total
        inherited: bool = parent.in_scope if parent is not None else False
        self.in_scope: bool = inherited or bool(schema and schema.get("x-kubernetes-validations"))
        self._info: TypeInfo | None = None
        self._error: str | None = None
        self._done = False

    @classmethod
    def root(cls, schema: dict[str, Any]) -> CelContext:
        return cls(schema, None, None, 1, TotalCost())

    def child(self, schema: dict[str, Any] | None, accessor: tuple[str, str]) -> CelContext:
        cardinality: int | None = None
        if self.schema is not None and self.cardinality is not None:
            factor = _max_elements(self.schema)
            if factor is not None:
                cardinality = _times(self.cardinality, factor)
        return CelContext(schema, self, accessor, cardinality, self.total)

    def type_info(self) -> TypeInfo | None:
        """``TypeInfo()``; raises :class:`StructuralError` when the node cannot convert."""
        if not self.in_scope:
            return None
        if not self._done:
            self._done = True
            try:
                self._info = self._load()
            except StructuralError as exc:
                self._error = str(exc)
        if self._error is not None:
            raise StructuralError(self._error)
        return self._info

    def _load(self) -> TypeInfo | None:
        if self.parent is not None:
            parent = self.parent.type_info()
            if parent is not None and self.accessor is not None:
                found = _access(parent, self.accessor)
                if found is not None:
                    return found
        assert self.schema is not None
        structural = new_structural(self.schema)
        assert structural is not None
        is_root = self.parent is None or bool(self.schema.get("x-kubernetes-embedded-resource"))
        decl = cel_types.schema_decl_type(structural, is_root)
        if decl is None:
            raise StructuralError("unable to convert structural schema to CEL declarations")
        return TypeInfo(structural, decl)


def _access(parent: TypeInfo, accessor: tuple[str, str]) -> TypeInfo | None:
    kind, name = accessor
    s, decl = parent.schema, parent.decl
    if kind == "property":
        if s.properties is None:
            return None
        escaped = cel_types.escape(name)
        prop = s.properties.get(name)
        if escaped is None or prop is None or decl.kind != "object" or escaped not in decl.fields:
            return None
        return TypeInfo(prop, decl.fields[escaped])
    if kind == "items":
        if s.items is None or decl.elem is None:
            return None
        return TypeInfo(s.items, decl.elem)
    ap = s.additional_properties
    if ap is None or ap.structural is None or decl.elem is None:
        return None
    return TypeInfo(ap.structural, decl.elem)


def _max_elements(schema: dict[str, Any]) -> int | None:
    """``extractMaxElements``: how many children one instance of ``schema`` holds."""
    if schema.get("type") == "object":
        if schema.get("additionalProperties") is not None:
            limit = schema.get("maxProperties")
            return max(int(limit), 0) if limit is not None else None
        return 1
    if schema.get("type") == "array":
        limit = schema.get("maxItems")
        return max(int(limit), 0) if limit is not None else None
    return 1


def _times(a: int, b: int) -> int:
    return 0 if a == 0 else min(a * b, MAX_UINT64)


def cost_message(name: str, cost: int, limit: int) -> str:
    """``getCostErrorMessage``."""
    factor = cost / limit
    if factor > 100.0:
        shown = "more than 100x"
    elif factor < 1.5:
        shown = f"{factor:f}x"
    else:
        shown = f"{factor:.1f}x"
    return (
        f"{name} exceeds budget by factor of {shown} (try simplifying the rule, or adding "
        "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )


def rule_errors(
    schema: dict[str, Any],
    path: str,
    ctx: CelContext,
    uncorrelatable: str | None,
    suppress_per_expression_cost: bool,
) -> list[FieldError]:
    """The CEL errors of one node's rules (schema errors already ruled out)."""
    rules_path = fe.child(path, "x-kubernetes-validations")
    try:
        info = ctx.type_info()
    except StructuralError as exc:
        detail = (
            "internal error: failed to construct type information for "
            f"x-kubernetes-validations rules: {exc}"
        )
        return [fe.internal(rules_path, detail)]
    if info is None:
        return [
            fe.internal(
                rules_path,
                "internal error: failed to retrieve type information for x-kubernetes-validations",
            )
        ]
    rules = list(schema.get("x-kubernetes-validations") or [])
    results = cel_compile.compile_rules(rules, info.decl)
    errs: list[FieldError] = []
    for i, (rule, result) in enumerate(zip(rules, results, strict=True)):
        errs += _one_rule(
            rule, result, fe.index(rules_path, i), ctx, uncorrelatable, suppress_per_expression_cost
        )
    return errs


def _one_rule(
    rule: dict[str, Any],
    result: cel_compile.CompilationResult,
    at: str,
    ctx: CelContext,
    uncorrelatable: str | None,
    suppress: bool,
) -> list[FieldError]:
    rule_path = fe.child(at, "rule")
    cardinality = ctx.cardinality if ctx.cardinality is not None else result.max_cardinality
    cost = _times(result.max_cost, cardinality) if result.max_cost else 0
    errs = _over_limit(rule_path, "estimated rule cost", cost, suppress)
    ctx.total.observe(rule_path, cost)
    if result.error is not None:
        if result.error.type == "required":
            errs.append(fe.required(rule_path, result.error.detail))
        else:
            errs.append(fe.invalid(rule_path, validation_rule(rule), result.error.detail))
    message_path = fe.child(at, "messageExpression")
    if result.message_expression_error is not None:
        detail = result.message_expression_error.detail
        errs.append(fe.invalid(message_path, validation_rule(rule), detail))
    elif result.message_expression:
        message_cost = result.message_expression_max_cost
        errs += _over_limit(
            message_path, "estimated messageExpression cost", message_cost, suppress
        )
        ctx.total.observe(message_path, message_cost)
    return errs + _old_self(rule, result, at, uncorrelatable)


def _over_limit(path: str, name: str, cost: int, suppress: bool) -> list[FieldError]:
    if suppress or cost <= STATIC_ESTIMATED_COST_LIMIT:
        return []
    return [fe.forbidden(path, cost_message(name, cost, STATIC_ESTIMATED_COST_LIMIT))]


def _old_self(
    rule: dict[str, Any], result: cel_compile.CompilationResult, at: str, uncorrelatable: str | None
) -> list[FieldError]:
    """A transition rule needs an old value to compare with; optionalOldSelf needs oldSelf."""
    if result.uses_old_self:
        if uncorrelatable is None:
            return []
        detail = (
            "oldSelf cannot be used on the uncorrelatable portion of the schema within "
            f"{uncorrelatable}"
        )
        return [fe.invalid(fe.child(at, "rule"), str(rule.get("rule") or ""), detail)]
    if rule.get("optionalOldSelf") is None:
        return []
    detail = "may not be set if oldSelf is not used in rule"
    return [fe.invalid(fe.child(at, "optionalOldSelf"), bool(rule["optionalOldSelf"]), detail)]


def total_cost_errors(ctx: CelContext, schema_path: str) -> list[FieldError]:
    """The per-CRD limit: the four costliest rules named, then the total."""
    if ctx.total.total <= STATIC_ESTIMATED_CRD_COST_LIMIT:
        return []
    errs = [
        fe.forbidden(
            r.path,
            "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 "
            "schema",
        )
        for r in ctx.total.most_expensive
    ]
    name = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema"
    errs.append(
        fe.forbidden(
            schema_path, cost_message(name, ctx.total.total, STATIC_ESTIMATED_CRD_COST_LIMIT)
        )
    )
    return errs


def rule_entry_errors(schema: Schema, path: str) -> list[FieldError]:
    """The static checks of each ``x-kubernetes-validations`` entry (before compiling)."""
    errs: list[FieldError] = []
    for i, rule in enumerate(schema.get("x-kubernetes-validations") or []):
        at = fe.index(fe.child(path, "x-kubernetes-validations"), i)
        text, message = str(rule.get("rule") or ""), str(rule.get("message") or "")
        message_expr = str(rule.get("messageExpression") or "")
        trimmed, trimmed_msg = text.strip(), message.strip()
        if not trimmed:
            errs.append(fe.required(fe.child(at, "rule"), "rule is not specified"))
        elif message and not trimmed_msg:
            errs.append(
                fe.invalid(fe.child(at, "message"), message, "must be non-empty if specified")
            )
        elif _NEWLINES.search(trimmed_msg):
            errs.append(
                fe.invalid(fe.child(at, "message"), message, "must not contain line breaks")
            )
        elif _NEWLINES.search(trimmed) and not trimmed_msg:
            errs.append(
                fe.required(
                    fe.child(at, "message"),
                    "message must be specified if rule contains line breaks",
                )
            )
        if message_expr and not message_expr.strip():
            errs.append(
                fe.required(
                    fe.child(at, "messageExpression"),
                    "messageExpression must be non-empty if specified",
                )
            )
        reason = rule.get("reason")
        if reason is not None and reason not in _REASONS:
            errs.append(fe.not_supported(fe.child(at, "reason"), reason, _REASONS))
        errs += _rule_field_path(
            schema, str(rule.get("fieldPath") or ""), fe.child(at, "fieldPath")
        )
    return errs


def _rule_field_path(schema: Schema, text: str, at: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if text and not text.strip():
        errs.append(fe.invalid(at, text, "must be non-empty if specified"))
    if _NEWLINES.search(text):
        errs.append(fe.invalid(at, text, "must not contain line breaks"))
    if text and not _path_valid(schema, text):
        errs.append(fe.invalid(at, text, "must be a valid path"))
    return errs


def _path_valid(schema: Schema, text: str) -> bool:
    try:
        structural = new_structural(schema)
    except StructuralError:
        return True
    assert structural is not None
    try:
        fieldpath.valid_field_path(text, structural)
    except (fieldpath.FieldPathError, AttributeError):
        return False
    return True
