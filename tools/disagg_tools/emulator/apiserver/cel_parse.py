"""CEL source to the expression tree cel-go checks: parsed by cel-python, macros expanded.

The expression kinds and macro expansion of cel-go v0.26.0 ``parser/`` (pinned by
apiextensions-apiserver v0.36.3), since costs are estimated over the expansion; optional
syntax (``a.?b``), which cel-python cannot parse, is reported as such.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lark
from celpy.celparser import CELParseError, CELParser

Tree = lark.Tree[Any]

ACCUMULATOR = "@result"


class CelSyntaxError(ValueError):
    """The expression does not parse; ``column`` is 1-based as cel-go reports it."""

    def __init__(self, message: str, column: int) -> None:
        super().__init__(message)
        self.column = column


@dataclass(eq=False)
class Expr:
    """One node; ``kind`` is lit, ident, select, call, list, map, struct or comp."""

    kind: str
    offset: int = 0
    value: Any = None  # lit: the value; ident: the name; select: the field; call: the function
    lit_type: str = ""  # lit: int, uint, double, string, bytes, bool, null
    operand: Expr | None = None  # select operand; call target
    test_only: bool = False
    args: list[Expr] = field(default_factory=list)  # call args; list elements
    entries: list[tuple[Expr, Expr]] = field(default_factory=list)  # map entries
    comp: Comprehension | None = None
    id: int = 0


@dataclass(eq=False)
class Comprehension:
    iter_var: str
    iter_var2: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_cond: Expr
    loop_step: Expr
    result: Expr


_OPTIONAL_SYNTAX = (".?", "[?", "{?")


def parse(text: str) -> Expr:
    """The expanded tree of ``text``, or :class:`CelSyntaxError`."""
    for marker in _OPTIONAL_SYNTAX:
        at = _outside_strings(text, marker)
        if at >= 0:
            raise CelSyntaxError(
                f"Syntax error: optional syntax {marker!r} is not supported by this "
                "emulator's CEL parser (cel-python)",
                at + 1,
            )
    try:
        tree = CELParser().parse(text)
    except CELParseError as exc:
        first = str(exc.args[0]).splitlines()[0] if exc.args else "syntax error"
        raise CelSyntaxError(f"Syntax error: {first}", exc.column or 1) from None
    ids = itertools.count(1)
    expr = _Builder().build(tree)
    _number(expr, ids)
    return expr


def _outside_strings(text: str, marker: str) -> int:
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if text.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif ch in "'\"":
            quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(quote)
            continue
        elif text.startswith(marker, i):
            return i
        i += 1
    return -1


def _number(expr: Expr, ids: itertools.count[int]) -> None:
    expr.id = next(ids)
    for sub in children(expr):
        _number(sub, ids)


def children(expr: Expr) -> list[Expr]:
    subs = [expr.operand] if expr.operand is not None else []
    subs += expr.args
    for k, v in expr.entries:
        subs += [k, v]
    c = expr.comp
    if c is not None:
        subs += [c.iter_range, c.accu_init, c.loop_cond, c.loop_step, c.result]
    return subs


def call(function: str, args: list[Expr], offset: int, target: Expr | None = None) -> Expr:
    return Expr("call", offset, value=function, args=args, operand=target)


def ident(name: str, offset: int) -> Expr:
    return Expr("ident", offset, value=name)


def lit(value: Any, lit_type: str, offset: int) -> Expr:
    return Expr("lit", offset, value=value, lit_type=lit_type)


_BINARY = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}


def _pos(node: Tree | lark.Token) -> int:
    # cel-python re-creates true/false tokens without a position
    if isinstance(node, lark.Token):
        return node.start_pos or 0
    return 0 if node.meta.empty else int(getattr(node.meta, "start_pos", 0) or 0)


class _Builder:
    """Walks cel-python's parse tree into :class:`Expr`, expanding macros."""

    def build(self, node: Any) -> Expr:
        if isinstance(node, lark.Token):
            return self._token(node)
        handler = getattr(self, "_" + node.data, None)
        if handler is not None:
            result: Expr = handler(node)
            return result
        if len(node.children) == 1:
            return self.build(node.children[0])
        if node.data in ("conditionalor", "conditionaland"):
            op = "_||_" if node.data == "conditionalor" else "_&&_"
            left, right = (self.build(c) for c in node.children)
            return call(op, [left, right], _pos(node.children[1]) - 3)
        if node.data in ("relation", "addition", "multiplication"):
            op_node, right = node.children
            left = self.build(op_node.children[0])
            return call(_BINARY[op_node.data], [left, self.build(right)], _pos(right) - 1)
        raise CelSyntaxError(f"Syntax error: unexpected {node.data}", _pos(node) + 1)

    def _expr(self, node: Tree) -> Expr:
        if len(node.children) == 1:
            return self.build(node.children[0])
        cond, yes, no = (self.build(c) for c in node.children)
        return call("_?_:_", [cond, yes, no], _pos(node.children[1]) - 2)

    def _unary(self, node: Tree) -> Expr:
        if len(node.children) == 1:
            return self.build(node.children[0])
        op, operand = node.children
        if op.data == "unary_neg":
            inner = self.build(operand)
            if (
                inner.kind == "lit"
                and inner.lit_type in ("int", "double")
                and inner.offset == _pos(op) + 1
            ):
                inner.value = -inner.value
                inner.offset = _pos(op)
                return inner
            return call("-_", [inner], _pos(op))
        return call("!_", [self.build(operand)], _pos(op))

    def _member_dot(self, node: Tree) -> Expr:
        operand, name = node.children
        return Expr("select", _pos(name) - 1, value=str(name), operand=self.build(operand))

    def _member_dot_arg(self, node: Tree) -> Expr:
        target, name, *rest = node.children
        args = [self.build(a) for a in rest[0].children] if rest else []
        return _macro(str(name), self.build(target), args, _pos(name) + len(str(name)))

    def _ident_arg(self, node: Tree) -> Expr:
        name, *rest = node.children
        args = [self.build(a) for a in rest[0].children] if rest else []
        return _macro(str(name), None, args, _pos(name) + len(str(name)))

    def _dot_ident_arg(self, node: Tree) -> Expr:
        return self._ident_arg(node)

    def _dot_ident(self, node: Tree) -> Expr:
        return ident(str(node.children[0]), _pos(node))

    def _ident(self, node: Tree) -> Expr:
        return ident(str(node.children[0]), _pos(node))

    def _member_index(self, node: Tree) -> Expr:
        target, index = node.children
        return call("_[_]", [self.build(target), self.build(index)], _pos(index) - 1)

    def _member_object(self, node: Tree) -> Expr:
        return Expr("struct", _pos(node), operand=self.build(node.children[0]))

    def _paren_expr(self, node: Tree) -> Expr:
        return self.build(node.children[0])

    def _list_lit(self, node: Tree) -> Expr:
        elems = [self.build(c) for c in node.children[0].children] if node.children else []
        return Expr("list", _pos(node), args=elems)

    def _map_lit(self, node: Tree) -> Expr:
        parts = [self.build(c) for c in node.children[0].children] if node.children else []
        entries = list(zip(parts[0::2], parts[1::2], strict=True))
        return Expr("map", _pos(node), entries=entries)

    def _literal(self, node: Tree) -> Expr:
        token = node.children[0]
        assert isinstance(token, lark.Token)
        return self._token(token)

    def _token(self, token: lark.Token) -> Expr:
        at = _pos(token)
        text = str(token)
        kind = token.type
        if kind == "INT_LIT":
            return lit(int(text, 0) if "x" not in text else int(text, 16), "int", at)
        if kind == "UINT_LIT":
            return lit(int(text[:-1], 0) if "x" not in text else int(text[:-1], 16), "uint", at)
        if kind == "FLOAT_LIT":
            return lit(float(text), "double", at)
        if kind == "BOOL_LIT":
            return lit(text == "true", "bool", at)
        if kind == "NULL_LIT":
            return lit(None, "null", at)
        if kind in ("STRING_LIT", "MLSTRING_LIT"):
            return lit(decode_string(text), "string", at)
        if kind == "BYTES_LIT":
            return lit(decode_string(text[1:]).encode("latin-1", "replace"), "bytes", at)
        return ident(text, at)


_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def decode_string(text: str) -> str:
    """A CEL string literal's value (raw, triple-quoted and escaped forms)."""
    raw = text[0] in "rR"
    body = text[1:] if raw else text
    quote = body[:3] if body[:3] in ('"""', "'''") else body[0]
    body = body[len(quote) : -len(quote)]
    if raw:
        return body
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        elif nxt.isdigit():
            out.append(chr(int(body[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


Macro = Callable[[Expr, list[Expr], int], Expr]


# --- macros, expanded as cel-go's parser/macro.go does -----------------------------------


def _macro(name: str, target: Expr | None, args: list[Expr], at: int) -> Expr:
    if target is None and name == "has" and len(args) == 1:
        arg = args[0]
        if arg.kind != "select":
            raise CelSyntaxError("invalid argument to has() macro", at + 1)
        arg.test_only = True
        return arg
    if target is not None:
        expand = _MACROS.get((name, len(args)))
        if expand is not None:
            return expand(target, args, at)
    return call(name, args, at, target)


def _var(arg: Expr, at: int) -> str:
    if arg.kind != "ident":
        raise CelSyntaxError("argument must be a simple name", at + 1)
    return str(arg.value)


def _comprehension(
    target: Expr, names: tuple[str, str], init: Expr, cond: Expr, step: Expr, result: Expr, at: int
) -> Expr:
    comp = Comprehension(names[0], names[1], target, ACCUMULATOR, init, cond, step, result)
    return Expr("comp", at, comp=comp)


def _acc(at: int) -> Expr:
    return ident(ACCUMULATOR, at)


def _quantifier(kind: str) -> Macro:
    def expand(target: Expr, args: list[Expr], at: int) -> Expr:
        names = (_var(args[0], at), _var(args[1], at) if len(args) == 3 else "")
        pred = args[-1]
        if kind == "all":
            init = lit(True, "bool", at)
            cond = call("@not_strictly_false", [_acc(at)], at)
            step = call("_&&_", [_acc(at), pred], at)
            result = _acc(at)
        elif kind == "exists":
            init = lit(False, "bool", at)
            cond = call("@not_strictly_false", [call("!_", [_acc(at)], at)], at)
            step = call("_||_", [_acc(at), pred], at)
            result = _acc(at)
        else:  # exists_one
            init = lit(0, "int", at)
            cond = lit(True, "bool", at)
            bump = call("_+_", [_acc(at), lit(1, "int", at)], at)
            step = call("_?_:_", [pred, bump, _acc(at)], at)
            result = call("_==_", [_acc(at), lit(1, "int", at)], at)
        return _comprehension(target, names, init, cond, step, result, at)

    return expand


def _map(filter_only: bool, two_vars: bool) -> Macro:
    def expand(target: Expr, args: list[Expr], at: int) -> Expr:
        n = 2 if two_vars else 1
        names = (_var(args[0], at), _var(args[1], at) if two_vars else "")
        rest = args[n:]
        value = ident(names[0], at) if filter_only else rest[-1]
        append = call("_+_", [_acc(at), Expr("list", at, args=[value])], at)
        pred = rest[0] if (filter_only or len(rest) == 2) else None
        step = call("_?_:_", [pred, append, _acc(at)], at) if pred is not None else append
        init = Expr("list", at)
        return _comprehension(target, names, init, lit(True, "bool", at), step, _acc(at), at)

    return expand


_MACROS: dict[tuple[str, int], Macro] = {
    ("all", 2): _quantifier("all"),
    ("exists", 2): _quantifier("exists"),
    ("exists_one", 2): _quantifier("exists_one"),
    ("all", 3): _quantifier("all"),
    ("exists", 3): _quantifier("exists"),
    ("existsOne", 3): _quantifier("exists_one"),
    ("exists_one", 3): _quantifier("exists_one"),
    ("map", 2): _map(False, False),
    ("map", 3): _map(False, False),
    ("filter", 2): _map(True, False),
    ("transformList", 3): _map(False, True),
    ("transformList", 4): _map(False, True),
}
