"""``x-kubernetes-validations`` run on values: a custom resource's writes, a schema's defaults.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/cel/validation.go`` on
cel-python (:mod:`.celvalues`): rules compiled once per schema (:func:`build`); transition
rules only where an old value corresponds; failures ratcheted on updates. Not ported: the
runtime cost budget and what cel-python cannot run (:class:`Unsupported`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError
from lark import Tree

from disagg_tools.emulator.apiserver import celvalues
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.ratcheting import CorrelatedObject, MapList, unchanged

_MAX_MESSAGE_BYTES = 5 * 1024  # celconfig.MaxEvaluatedMessageExpressionSizeBytes
_MEMO_SIZE = 4096  # verdicts kept per rule


class Unsupported(ValueError):
    """A CRD's rule needs what this port does not carry."""


@dataclass(frozen=True)
class Verdict:
    """A rule's result on some values: passed, or the failure's detail (``evaluation``: the
    rule could not be evaluated)."""

    passed: bool
    detail: str = ""
    evaluation: bool = False


@dataclass
class Rule:
    """A compiled rule; ``program`` None: not run (``compile_error`` says why, else a
    lenient :func:`build` kept a rule cel-python cannot run)."""

    text: str
    program: Any = None
    message: str = ""
    message_program: Any = None
    reason: str | None = None
    field_path: str = ""
    uses_old_self: bool = False
    optional_old_self: bool = False
    compile_error: str = ""
    memo: dict[str, Verdict] = field(default_factory=dict, repr=False)

    def error_string(self) -> str:
        """``ruleErrorString``: the message when set, else the rule."""
        return self.message.strip() or self.text.strip()


@dataclass
class CelNode:
    """``cel.Validator`` of one schema node: its rules and its children's validators."""

    schema: dict[str, Any]
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, CelNode] = field(default_factory=dict)
    items: CelNode | None = None
    additional: CelNode | None = None
    all_of: list[CelNode] = field(default_factory=list)
    is_root: bool = False


def _reads_old_self(ast: Tree[Any]) -> bool:
    return any(
        tree.children and str(tree.children[0]) == "oldSelf" for tree in ast.find_data("ident")
    )


def _field_path(text: str) -> str:
    """``ValidFieldPath(...).String()`` for ``.a.b`` / ``['a']`` paths (``a.b``, ``a[k]``)."""
    path, rest = "", text
    while rest:
        if rest.startswith("."):
            name = rest[1:].split(".", 1)[0].split("[", 1)[0]
            path, rest = fe.child(path, name), rest[1 + len(name) :]
        elif rest.startswith("['") and "']" in rest:
            name, rest = rest[2:].split("']", 1)
            path = fe.child(path, name)
        else:
            return ""
    return path


# (a node's rules, the node's schema, whether a resource root) -> each rule's compile error
# ("" when it compiles), or None when the node cannot be typed (its rules are not run)
Check = Callable[[list[dict[str, Any]], dict[str, Any], bool], list[str] | None]


@dataclass(frozen=True)
class _Build:
    check: Check | None  # cel.Compile's type check; None for writes (their CRD passed it)
    strict: bool  # raise Unsupported for a rule cel-python cannot run, else leave it unrun


@functools.lru_cache(maxsize=1024)
def _program(text: str) -> tuple[Any, bool, str, tuple[str, ...]]:
    """A compiled expression, whether it reads ``oldSelf``, why cel-python cannot parse it
    ("" when it can) and the functions it calls that the port lacks: parsing is the slow
    part and programs are stateless, so each text is compiled once per process."""
    env = celpy.Environment()
    try:
        ast = env.compile(text)
    except CELParseError as e:
        return None, False, f"cel-python cannot compile {text!r}: {e}", ()
    missing = tuple(sorted(celvalues.missing_functions(text)))
    program = env.program(ast, functions=celvalues.FUNCTIONS)
    return program, _reads_old_self(ast), "", missing


def _compile(source: dict[str, Any], compile_error: str, how: _Build) -> Rule:
    text = str(source.get("rule", ""))
    rule = Rule(
        text=text,
        message=str(source.get("message") or ""),
        reason=source.get("reason"),
        field_path=_field_path(str(source.get("fieldPath") or "")),
        optional_old_self=bool(source.get("optionalOldSelf")),
        compile_error=compile_error,
    )
    if compile_error:
        return rule
    program, rule.uses_old_self, problem, missing = _program(text)
    if missing and not problem:
        problem = f"rule {text!r} calls {', '.join(missing)}, which this port does not carry"
    if problem and how.strict:
        raise Unsupported(problem)
    expression = source.get("messageExpression")
    if expression:
        message_program, _, message_problem, message_missing = _program(str(expression))
        if message_problem and how.strict:
            raise Unsupported(message_problem)
        # one cel-python cannot run falls back to the message, as a failing one does
        rule.message_program = None if message_problem or message_missing else message_program
    rule.program = None if problem else program
    return rule


def _node(rules: dict[str, Any], node: dict[str, Any], root: bool, how: _Build) -> CelNode | None:
    """``validator``: ``rules`` holds the x-kubernetes-validations (``node`` or one of its
    allOf entries), ``node`` the structure the values follow."""
    built = CelNode(schema=node, is_root=root)
    sources = list(rules.get("x-kubernetes-validations") or ())
    errors: list[str] | None = [""] * len(sources)
    if how.check is not None and sources:
        errors = how.check(sources, node, root)
    built.rules = [_compile(s, e, how) for s, e in zip(sources, errors or [], strict=False)]
    properties, node_properties = rules.get("properties") or {}, node.get("properties") or {}
    for name, sub in properties.items():
        if name in node_properties:
            embedded = bool(node_properties[name].get("x-kubernetes-embedded-resource"))
            child = _node(sub, node_properties[name], embedded, how)
            if child is not None:
                built.properties[name] = child
    for key in ("items", "additionalProperties"):
        if isinstance(rules.get(key), dict) and isinstance(node.get(key), dict):
            sub = node[key]
            child = _node(rules[key], sub, bool(sub.get("x-kubernetes-embedded-resource")), how)
            setattr(built, "items" if key == "items" else "additional", child)
    for entry in rules.get("allOf") or ():
        child = _node(entry, node, root, how)
        if child is not None:
            built.all_of.append(child)
    useful = built.rules or built.properties or built.items or built.additional or built.all_of
    return built if useful else None


def build(
    schema: dict[str, Any] | None,
    is_resource_root: bool = True,
    *,
    check: Check | None = None,
    strict: bool = True,
) -> CelNode | None:
    """``NewValidator``: every rule of ``schema`` compiled; None when it has none. ``check``
    types each node's rules first (a failing rule reports ``rule compile error``); ``strict``
    refuses with :class:`Unsupported` what cel-python cannot run, else leaves it unrun."""
    if not schema:
        return None
    return _node(schema, schema, is_resource_root, _Build(check, strict))


@dataclass(frozen=True)
class Ratchet:
    """``ratchetingOptions``: the correlation of this value, and of the nearest parent."""

    current: CorrelatedObject | None = None
    parent: CorrelatedObject | None = None

    def ratchets(self) -> bool:
        return unchanged(self.current) if self.current is not None else unchanged(self.parent)

    def key(self, name: str) -> Ratchet:
        if self.current is None:
            return self
        if self.parent is None and name in ("apiVersion", "kind"):
            return Ratchet()
        return Ratchet(self.current.key(name), self.current)

    def index(self, i: int) -> Ratchet:
        return self if self.current is None else Ratchet(self.current.index(i), self.current)


@dataclass
class Outcome:
    errors: list[fe.FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def validate(
    node: CelNode | None,
    obj: Any,
    old: Any = None,
    correlation: CorrelatedObject | None = None,
    path: str = "",
) -> Outcome:
    """Every rule of the tree over ``obj`` (``old``: the object an update replaces;
    ``correlation``: for ratcheting, on updates; ``path``: where ``obj`` is, "" for the
    root, which errors name ``<nil>``)."""
    outcome = Outcome()
    _walk(node, path, obj, old, Ratchet(correlation), outcome)
    return outcome


def _walk(
    node: CelNode | None, path: str, obj: Any, old: Any, ratchet: Ratchet, out: Outcome
) -> None:
    if node is None or obj is None:
        return
    _expressions(node, path, obj, old, ratchet, out)
    for entry in node.all_of:
        _walk(entry, path, obj, old, Ratchet(None, ratchet.parent), out)
    if isinstance(obj, list) and node.items is not None:
        old_items = MapList(node.schema, old if isinstance(old, list) else [])
        for i, item in enumerate(obj):
            _walk(node.items, fe.index(path, i), item, old_items.get(item), ratchet.index(i), out)
    elif isinstance(obj, dict):
        correlatable = node.schema.get("x-kubernetes-map-type") in (None, "granular", "atomic")
        olds = old if correlatable and isinstance(old, dict) else {}
        if node.additional is not None:
            for k, v in obj.items():
                _walk(node.additional, fe.key(path, k), v, olds.get(k), ratchet.key(k), out)
        for k, v in obj.items():
            if k in node.properties:
                _walk(node.properties[k], fe.child(path, k), v, olds.get(k), ratchet.key(k), out)


def _activation(node: CelNode, obj: Any, old: Any, with_old: bool) -> dict[str, Any]:
    convert = celvalues.root_to_cel if node.is_root else celvalues.to_cel
    bound = {"self": convert(obj, node.schema)}
    if with_old and old is not None:
        bound["oldSelf"] = convert(old, node.schema)
    return bound


def _optional(bound: dict[str, Any]) -> dict[str, Any]:
    """An ``optionalOldSelf`` rule's activation: ``oldSelf`` an optional (none on a create)."""
    return {**bound, "oldSelf": celvalues.CelOptional(bound.get("oldSelf"))}


def _go_error(error: Exception) -> str:
    """cel-go's words for a cel-python evaluation error."""
    args = error.args
    cause = args[1] if len(args) > 1 else None
    text = str(args[0]) if args else str(error)
    if cause is KeyError or "no such member" in text:
        name = str((args[2] or ("",))[0]) if len(args) > 2 and args[2] else text.rsplit(" ", 1)[-1]
        return f"no such key: {name.strip(chr(39))}"
    if "overload" in text:
        return "no such overload"
    if cause is ZeroDivisionError:
        return "modulus by zero" if "modulo" in str(args[2:]) else "division by zero"
    return text


def _evaluate(program: Any, bound: dict[str, Any]) -> tuple[Any, str]:
    try:
        result = program.evaluate(bound)
    except CELEvalError as e:
        return None, _go_error(e)
    if isinstance(result, CELEvalError):
        return None, _go_error(result)
    return result, ""


def _message(rule: Rule, bound: dict[str, Any]) -> str:
    """The messageExpression's text when it gives a usable one, else the message or
    ``failed rule: <rule>``."""
    if rule.message_program is not None:
        text, problem = _evaluate(rule.message_program, bound)
        if not problem and isinstance(text, str):
            text = text.strip()
            if text and "\n" not in text and len(text.encode()) <= _MAX_MESSAGE_BYTES:
                return str(text)
    return rule.message.strip() or f"failed rule: {rule.text.strip()}"


def _failure(path: str, value: Any, detail: str, reason: str | None) -> fe.FieldError:
    """``fieldErrorForReason``."""
    if reason == "FieldValueForbidden":
        return fe.forbidden(path, detail)
    if reason == "FieldValueRequired":
        return fe.required(path, detail)
    if reason == "FieldValueDuplicate":
        return fe.duplicate(path, value)
    return fe.invalid(path, value, detail)


def _run(rule: Rule, bound: dict[str, Any]) -> Verdict:
    """The rule's verdict on these values, and what a failure says."""
    result, problem = _evaluate(rule.program, bound)
    if problem == "no such overload":
        detail = (
            f"'{problem}': call arguments did not match a supported operator, "
            f"function or macro signature for rule: {rule.error_string()}"
        )
        return Verdict(False, detail, evaluation=True)
    if problem:
        return Verdict(False, f"{problem} evaluating rule: {rule.error_string()}", True)
    if isinstance(result, celtypes.BoolType) and bool(result):
        return Verdict(True)
    return Verdict(False, _message(rule, bound))


def _unrun(rule: Rule, old: Any) -> bool:
    """Left out: a rule cel-python cannot run, or a transition rule without an old value
    (unless its ``oldSelf`` is optional)."""
    if rule.program is None:
        return True
    return rule.uses_old_self and old is None and not rule.optional_old_self


def _memo_key(obj: Any, old: Any, reads_old: bool) -> str:
    """The values a rule sees, as text that keeps JSON's types apart (1, 1.0, true)."""
    return json.dumps([obj, old if reads_old else None], sort_keys=True, default=str)


def _expressions(
    node: CelNode, path: str, obj: Any, old: Any, ratchet: Ratchet, out: Outcome
) -> None:
    """``validateExpressions``: each rule of this node, in order. A verdict depends only on
    the values, so each rule keeps its last verdicts: a thousand alike objects, or status
    writes that leave spec alone, are judged once (cel-python interprets slowly)."""
    if not node.rules:
        return
    kind = str(node.schema.get("type") or "")
    reads_old = any(r.uses_old_self for r in node.rules)
    key = _memo_key(obj, old, reads_old)
    bound: dict[str, Any] | None = None
    where = path or fe.NO_PATH
    for rule in node.rules:
        if rule.compile_error:
            out.errors.append(fe.invalid(where, kind, f"rule compile error: {rule.compile_error}"))
            continue
        if _unrun(rule, old):
            continue
        verdict = rule.memo.get(key)
        if verdict is None:
            bound = bound or _activation(node, obj, old, reads_old)
            verdict = rule.memo[key] = _run(
                rule, _optional(bound) if rule.optional_old_self else bound
            )
            if len(rule.memo) > _MEMO_SIZE:
                rule.memo.clear()
        if verdict.passed:
            continue
        if verdict.evaluation:  # an evaluation error: at the node, never ratcheted
            out.errors.append(fe.invalid(where, kind, verdict.detail))
            continue
        at = fe.child(path, rule.field_path) if rule.field_path else where
        value = fe.OMIT if kind in ("object", "array") else obj
        error = _failure(at, value, verdict.detail, rule.reason)
        if not rule.uses_old_self and ratchet.ratchets():
            out.warnings.append(str(error))
        else:
            out.errors.append(error)
