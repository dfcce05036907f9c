"""The type check of a CEL rule, as cel-go's checker does it before a CRD is accepted.

Ports cel-go v0.26.0 ``checker/checker.go`` (the version apiextensions-apiserver v0.36.3
pins) over :mod:`.cel_decls`, in cel-go's words (``ERROR: <input>:1:<col>: ...``), and
records each node's type and matching overloads for the cost estimator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from disagg_tools.emulator.apiserver import cel_types as t
from disagg_tools.emulator.apiserver.cel_decls import LIBRARY, TYPE_IDENTS, Overload
from disagg_tools.emulator.apiserver.cel_parse import ACCUMULATOR, Expr
from disagg_tools.emulator.apiserver.cel_types import Type


@dataclass
class Checked:
    """The result of a check: types and overloads by node id, and the issues."""

    types: dict[int, Type] = field(default_factory=dict)
    overloads: dict[int, list[str]] = field(default_factory=dict)
    references: set[str] = field(default_factory=set)
    issues: list[tuple[int, str]] = field(default_factory=list)  # (offset, message)
    literal_issues: list[tuple[int, str]] = field(default_factory=list)


class Checker:
    """One check of one expression against declared variables."""

    def __init__(self, variables: dict[str, Type]) -> None:
        self.scopes: list[dict[str, Type]] = [dict(variables)]
        self.out = Checked()
        self.mapping: dict[str, Type] = {}
        self.fresh = 0
        self.in_format = False

    def check(self, expr: Expr) -> Checked:
        self._visit(expr)
        for node_id, typ in self.out.types.items():
            self.out.types[node_id] = t.substitute(self.mapping, typ, True)
        return self.out

    # --- helpers --------------------------------------------------------------------------

    def _set(self, expr: Expr, typ: Type) -> Type:
        self.out.types[expr.id] = typ
        return typ

    def _error(self, expr: Expr, message: str, at: int | None = None) -> Type:
        self.out.issues.append((expr.offset if at is None else at, message))
        return self._set(expr, t.ERROR)

    def _lookup(self, name: str) -> Type | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _resolved(self, typ: Type) -> Type:
        return t.substitute(self.mapping, typ, False)

    def _fresh(self, typ: Type) -> Type:
        """The overload's type params renamed so that two calls never share them."""
        names = _params(typ)
        if not names:
            return typ
        self.fresh += 1
        renamed = {n: t.param(f"_{self.fresh}{n}") for n in names}
        return t.substitute(renamed, typ, False)

    # --- visitors -------------------------------------------------------------------------

    def _visit(self, expr: Expr) -> Type:
        handler = getattr(self, "_" + expr.kind)
        typ: Type = handler(expr)
        return typ

    def _lit(self, expr: Expr) -> Type:
        return self._set(expr, Type(expr.lit_type))

    def _ident(self, expr: Expr) -> Type:
        name = str(expr.value)
        found = self._lookup(name)
        if found is not None:
            self.out.references.add(name)
            return self._set(expr, found)
        if name in TYPE_IDENTS:
            return self._set(expr, t.type_of(TYPE_IDENTS[name]))
        return self._error(expr, f"undeclared reference to '{name}' (in container '')")

    def _select(self, expr: Expr) -> Type:
        assert expr.operand is not None
        qualified = _qualified_name(expr)
        if qualified is not None and qualified in TYPE_IDENTS:
            return self._set(expr, t.type_of(TYPE_IDENTS[qualified]))
        operand = self._resolved(self._visit(expr.operand))
        optional = operand.kind == "opaque" and operand.name == "optional_type"
        if optional:
            operand = operand.params[0]
        if expr.test_only:
            if operand.kind not in ("object", "map", "dyn", "error", "param"):
                return self._error(expr, f"type '{operand}' does not support presence check")
            if operand.kind == "object" and self._field(expr, operand).kind == "error":
                return t.ERROR
            return self._set(expr, t.BOOL)
        result = self._field(expr, operand)
        if optional and result.kind != "error":
            result = t.optional_of(result)
        return self._set(expr, result)

    def _field(self, expr: Expr, operand: Type) -> Type:
        name = str(expr.value)
        if operand.kind == "object":
            decl = operand.decl
            fields = decl.fields if decl is not None else {}
            # 1.32+: a CEL keyword names its escaped field (``self.namespace``)
            if name not in fields and name in t.RESERVED:
                name = f"__{name}__"
            if name not in fields:
                return self._error(expr, f"undefined field '{expr.value}'")
            field_type: Type = fields[name].cel_type()
            return field_type
        if operand.kind == "map":
            return operand.params[1]
        if operand.kind in ("dyn", "error", "param"):
            return t.DYN
        return self._error(expr, f"type '{operand}' does not support field selection")

    def _struct(self, expr: Expr) -> Type:
        return self._error(expr, "undeclared reference to message type (in container '')")

    def _list(self, expr: Expr) -> Type:
        elem = self._join([self._visit(e) for e in expr.args], expr.args)
        return self._set(expr, t.list_of(elem))

    def _map(self, expr: Expr) -> Type:
        keys = [k for k, _ in expr.entries]
        values = [v for _, v in expr.entries]
        key = self._join([self._visit(k) for k in keys], keys)
        value = self._join([self._visit(v) for v in values], values)
        return self._set(expr, t.map_of(key, value))

    def _join(self, types: list[Type], nodes: list[Expr]) -> Type:
        """The element type of a literal (``joinTypes``); that every element has the same
        type is Kubernetes' homogeneous-literal validator, checked after (a ``format``
        call's argument list is exempt)."""
        if not types:
            self.fresh += 1
            return t.param(f"_{self.fresh}elem")
        joined = self._resolved(types[0])
        first = joined
        for typ, node in zip(types[1:], nodes[1:], strict=True):
            typ = self._resolved(typ)
            if typ != first and not self.in_format:
                self.out.literal_issues.append(
                    (node.offset, f"expected type '{first}' but found '{typ}'")
                )
            if t.is_assignable(self.mapping, joined, typ):
                joined = joined if _less_general(joined, typ) else typ
            else:
                joined = t.DYN
        return joined

    def _comp(self, expr: Expr) -> Type:
        c = expr.comp
        assert c is not None
        rng = self._resolved(self._visit(c.iter_range))
        var1, var2 = self._range_vars(expr, rng, bool(c.iter_var2))
        accu = self._visit(c.accu_init)
        self.scopes.append({c.accu_var: accu})
        vars_scope = {c.iter_var: var1}
        if c.iter_var2:
            vars_scope[c.iter_var2] = var2
        self.scopes.append(vars_scope)
        self._visit(c.loop_cond)
        step = self._visit(c.loop_step)
        if not t.is_assignable(self.mapping, accu, step):
            self._error(c.loop_step, f"expected type '{accu}' but found '{step}'")
        self.scopes.pop()
        result = self._visit(c.result)
        self.scopes.pop()
        return self._set(expr, result)

    def _range_vars(self, expr: Expr, rng: Type, two: bool) -> tuple[Type, Type]:
        if rng.kind == "list":
            return (t.INT, rng.params[0]) if two else (rng.params[0], t.DYN)
        if rng.kind == "map":
            return rng.params[0], rng.params[1]
        if rng.kind in ("dyn", "error", "param"):
            return t.DYN, t.DYN
        self._error(
            expr.comp.iter_range if expr.comp else expr,
            f"expression of type '{rng}' cannot be range of a comprehension "
            "(must be list, map, or dynamic)",
        )
        return t.DYN, t.DYN

    def _call(self, expr: Expr) -> Type:
        name = str(expr.value)
        target = expr.operand
        qualified = _qualified_name(target) if target is not None else None
        # ``sets.contains(...)``: a namespaced function, unless ``sets`` is a variable
        if (
            qualified is not None
            and f"{qualified}.{name}" in LIBRARY
            and self._lookup(qualified.split(".")[0]) is None
        ):
            return self._resolve(expr, f"{qualified}.{name}", None)
        return self._resolve(expr, name, target)

    def _resolve(self, expr: Expr, name: str, target: Expr | None) -> Type:
        outer, self.in_format = self.in_format, self.in_format or name == "format"
        arg_types = [self._visit(a) for a in expr.args]
        self.in_format = outer
        target_type = self._visit(target) if target is not None else None
        overloads = LIBRARY.get(name)
        if overloads is None:
            return self._error(expr, f"undeclared reference to '{name}' (in container '')")
        actual = ([target_type] if target_type is not None else []) + arg_types
        result: Type | None = None
        matched: list[str] = []
        for overload in overloads:
            if overload.member != (target is not None) or len(overload.args) != len(actual):
                continue
            fitted = self._fit(overload, actual)
            if fitted is None:
                continue
            matched.append(overload.id)
            result = fitted if result is None else _most_general(result, fitted)
        if result is None:
            return self._error(expr, _no_overload(name, target_type, arg_types))
        self.out.overloads[expr.id] = matched
        return self._set(expr, result)

    def _fit(self, overload: Overload, actual: list[Type]) -> Type | None:
        signature = self._fresh(t.Type("opaque", (overload.result, *overload.args), "fn"))
        result, *params = signature.params
        trial = dict(self.mapping)
        for expected, got in zip(params, actual, strict=True):
            if not t.is_assignable(trial, expected, self._resolved(got)):
                return None
        self.mapping = trial
        return t.substitute(trial, result, False)


def _params(typ: Type) -> set[str]:
    if typ.kind == "param":
        return {typ.name}
    names: set[str] = set()
    for p in typ.params:
        names |= _params(p)
    return names


def _less_general(a: Type, b: Type) -> bool:
    if a.kind in ("dyn", "param"):
        return True
    if b.kind in ("dyn", "param") or a.kind != b.kind:
        return False
    if a.params and len(a.params) == len(b.params):
        return all(_less_general(x, y) for x, y in zip(a.params, b.params, strict=True))
    return a == b


def _most_general(a: Type, b: Type) -> Type:
    return a if a == b else t.DYN


def _qualified_name(expr: Expr) -> str | None:
    if expr.kind == "ident":
        return str(expr.value)
    if expr.kind == "select" and not expr.test_only and expr.operand is not None:
        inner = _qualified_name(expr.operand)
        return f"{inner}.{expr.value}" if inner is not None else None
    return None


def _no_overload(name: str, target: Type | None, args: list[Type]) -> str:
    shown = ", ".join(str(a) for a in args)
    applied = f"{target}.({shown})" if target is not None else f"({shown})"
    return f"found no matching overload for '{name}' applied to '{applied}'"


def format_issues(source: str, issues: list[tuple[int, str]]) -> str:
    """cel-go's ``Issues.String()``: one ``ERROR: <input>:line:col: msg`` block each."""
    blocks = []
    for offset, message in sorted(issues, key=lambda i: i[0]):
        line = source[:offset].count("\n") + 1
        line_start = source.rfind("\n", 0, offset) + 1
        column = offset - line_start
        text = source.splitlines()[line - 1] if source.splitlines() else ""
        blocks.append(
            f"ERROR: <input>:{line}:{column + 1}: {message}\n | {text}\n | {'.' * column}^"
        )
    return "\n".join(blocks)


def accumulator_free(name: str) -> bool:
    return name != ACCUMULATOR
