"""Compiling a schema node's ``x-kubernetes-validations``: kube-apiserver's ``cel.Compile``.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/cel/compilation.go``: each
rule parses, type-checks against ``self`` and ``oldSelf``, passes Kubernetes' literal
validators and gets a worst-case cost, with upstream's error text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from disagg_tools.emulator.apiserver import cel_types as t
from disagg_tools.emulator.apiserver import goregex
from disagg_tools.emulator.apiserver.cel_check import Checked, Checker, format_issues
from disagg_tools.emulator.apiserver.cel_cost import Coster
from disagg_tools.emulator.apiserver.cel_parse import CelSyntaxError, Expr, children, parse
from disagg_tools.emulator.apiserver.cel_types import DeclType, Type

PER_CALL_LIMIT = 1_000_000  # celconfig.PerCallLimit
SELF, OLD_SELF = "self", "oldSelf"


@dataclass(frozen=True)
class CelError:
    """``apiservercel.Error``: ``type`` is ``invalid``, ``required`` or ``internal``."""

    type: str
    detail: str


@dataclass
class CompilationResult:
    """One rule's ``CompilationResult`` (a program is not kept: the emulator re-parses)."""

    error: CelError | None = None
    uses_old_self: bool = False
    max_cost: int = 0
    max_cardinality: int = 0
    message_expression: bool = False
    message_expression_error: CelError | None = None
    message_expression_max_cost: int = 0
    normalized_field_path: str = ""


def max_cardinality(min_size: int) -> int:
    """How often data of ``min_size`` bytes can repeat in a 3 MiB request."""
    return t.MAX_REQUEST_SIZE_BYTES // (min_size + 1)


def compile_rules(rules: list[dict[str, Any]], decl: DeclType) -> list[CompilationResult]:
    """``Compile``: one result per rule, in order (``decl`` is the node's DeclType)."""
    scoped = t.assign_type_names(decl, "selfType")
    cardinality = max_cardinality(decl.min_serialized_size)
    return [_compile(rule, scoped, cardinality) for rule in rules]


def _compile(rule: dict[str, Any], decl: DeclType, cardinality: int) -> CompilationResult:
    result = CompilationResult()
    text = str(rule.get("rule") or "")
    if not text.strip():
        return result
    self_type = decl.cel_type()
    old = t.optional_of(self_type) if rule.get("optionalOldSelf") else self_type
    compiled = _check(text, {SELF: self_type, OLD_SELF: old})
    if isinstance(compiled, CelError):
        result.error = CelError("invalid", "compilation failed: " + compiled.detail)
        return result
    expr, checked = compiled
    if checked.types[expr.id] != t.BOOL:
        result.error = CelError("invalid", "cel expression must evaluate to a bool")
        return result
    result.uses_old_self = OLD_SELF in checked.references
    result.max_cost = Coster(checked, decl).cost(expr)[1]
    result.max_cardinality = cardinality
    message = str(rule.get("messageExpression") or "")
    if message:
        _compile_message(result, message, {SELF: self_type, OLD_SELF: old}, decl)
    return result


def _compile_message(
    result: CompilationResult, text: str, variables: dict[str, Type], decl: DeclType
) -> None:
    compiled = _check(text, variables)
    if isinstance(compiled, CelError):
        detail = "messageExpression compilation failed: " + compiled.detail
        result.message_expression_error = CelError("invalid", detail)
        return
    expr, checked = compiled
    if checked.types[expr.id] != t.STRING:
        result.message_expression_error = CelError(
            "invalid", "messageExpression must evaluate to a string"
        )
        return
    result.message_expression = True
    result.message_expression_max_cost = Coster(checked, decl).cost(expr)[1]


def _check(text: str, variables: dict[str, Type]) -> tuple[Expr, Checked] | CelError:
    try:
        expr = parse(text)
    except CelSyntaxError as exc:
        return CelError("invalid", format_issues(text, [(exc.column - 1, str(exc))]))
    checked = Checker(variables).check(expr)
    issues = checked.issues or checked.literal_issues + _literal_issues(expr)
    if issues:
        return CelError("invalid", format_issues(text, issues))
    return expr, checked


# --- Kubernetes' AST validators (1.29+): constant arguments must be valid ---------------

_DURATION = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|[-+]?0")


def _literal_issues(expr: Expr) -> list[tuple[int, str]]:
    issues: list[tuple[int, str]] = []
    for node in _walk(expr):
        if node.kind != "call" or not node.args or node.args[0].kind != "lit":
            continue
        arg = node.args[0]
        if arg.lit_type != "string":
            continue
        name = str(node.value)
        if name == "matches" and goregex.compile_error(str(arg.value)) is not None:
            issues.append((arg.offset, "invalid matches argument"))
        elif name == "duration" and not _DURATION.fullmatch(str(arg.value)):
            issues.append((arg.offset, "invalid duration argument"))
        elif name == "timestamp" and not _is_timestamp(str(arg.value)):
            issues.append((arg.offset, "invalid timestamp argument"))
    return issues


def _is_timestamp(text: str) -> bool:
    if not re.fullmatch(
        r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", text
    ):
        return False
    try:
        datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text).replace("z", "Z"))
    except ValueError:
        return False
    return True


def _walk(expr: Expr) -> list[Expr]:
    out = [expr]
    for sub in children(expr):
        out += _walk(sub)
    return out
