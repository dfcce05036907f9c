"""The worst-case cost of a CEL rule, as kube-apiserver estimates it before accepting a CRD.

Ports cel-go v0.26.0 ``checker/cost.go`` (pinned by apiextensions-apiserver v0.36.3) with
v0.36.3's size estimator (``pkg/apiserver/schema/cel/compilation.go``): a list, map or
string is as long as its schema bound, else as what fits in 3 MiB; an upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_tools.emulator.apiserver.cel_check import Checked
from disagg_tools.emulator.apiserver.cel_estimates import (
    MAX,
    ONE,
    UNKNOWN,
    Entry,
    Est,
    add,
    call_cost,
    mul,
    union,
)
from disagg_tools.emulator.apiserver.cel_parse import ACCUMULATOR, Comprehension, Expr
from disagg_tools.emulator.apiserver.cel_types import DYN, DeclType, Type

LIST_CREATE, MAP_CREATE, STRUCT_CREATE = 10, 30, 40
_SCALARS = ("bool", "double", "duration", "int", "timestamp", "uint")


@dataclass
class _Var:
    """A comprehension variable: where it points in ``self``, its size, its entries."""

    path: list[str]
    size: Est | None
    entry: Entry | None


class Coster:
    """cel-go's coster with Kubernetes' estimators; :meth:`cost` gives (min, max)."""

    def __init__(self, checked: Checked, root: DeclType) -> None:
        self.checked = checked
        self.root = root
        self.paths: dict[int, list[str]] = {}
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, Entry] = {}
        self.locals: dict[str, list[_Var]] = {}

    # --- what the estimates read (cel_estimates.Sizes) ---------------------------------

    def type_of(self, e: Expr) -> Type:
        return self.checked.types.get(e.id, DYN)

    def _local(self, e: Expr) -> _Var | None:
        stack = self.locals.get(str(e.value)) if e.kind == "ident" else None
        return stack[-1] if stack else None

    def _path(self, e: Expr) -> list[str]:
        local = self._local(e)
        return list(local.path) if local else list(self.paths.get(e.id, []))

    def estimate_size(self, path: list[str] | None) -> Est | None:
        """The schema's bound at ``path`` (``self`` first): upstream's sizeEstimator."""
        if not path:
            return None
        node: DeclType | None = self.root
        for name in path[1:]:
            if node is None:
                return None
            if name in ("@items", "@values"):
                node = node.elem
            elif name == "@keys":
                return (0, 0) if node.kind == "map" else None
            else:
                node = node.fields.get(name) if node.kind == "object" else None
        return (0, node.max_elements) if node is not None else None

    def items_size(self, e: Expr) -> Est | None:
        """The bound of a list's items, by the list's path (none under an accumulator)."""
        path = self._path(e)
        if not path or path[0] in (ACCUMULATOR, "__result__"):
            return None
        return self.estimate_size([*path, "@items"])

    def size(self, e: Expr) -> Est | None:
        if e.id in self.sizes:
            return self.sizes[e.id]
        literal = literal_size(e)
        if literal is not None:
            return literal
        estimated = self.estimate_size(self._path(e))
        if estimated is not None:
            self.sizes[e.id] = estimated
            return estimated
        if self.type_of(e).kind in _SCALARS:
            return ONE
        local = self._local(e)
        return local.size if local else None

    def size_or_unknown(self, e: Expr) -> Est:
        found = self.size(e)
        return found if found is not None else UNKNOWN

    def entry(self, e: Expr) -> Entry | None:
        if e.id in self.entries:
            return self.entries[e.id]
        local = self._local(e)
        return local.entry if local else None

    def set_entry(self, e: Expr, entry: Entry) -> None:
        self.entries[e.id] = entry

    # --- costs --------------------------------------------------------------------------

    def cost(self, e: Expr) -> Est:
        if e.kind == "lit":
            return 0, 0
        if e.kind == "ident":
            local = self._local(e)
            self.paths[e.id] = list(local.path) if local else [str(e.value)]
            return ONE
        visit = {
            "select": self._select,
            "call": self._call,
            "list": self._list,
            "map": self._map,
            "comp": self._comprehension,
        }.get(e.kind)
        return visit(e) if visit else (STRUCT_CREATE, STRUCT_CREATE)

    def _select(self, e: Expr) -> Est:
        assert e.operand is not None
        if e.test_only:  # presence tests cost nothing in Kubernetes' environment
            return self.cost(e.operand)
        total = self.cost(e.operand)
        if self.type_of(e.operand).kind in ("map", "object", "param"):
            total = add(total, ONE)
        self.paths[e.id] = [*self._path(e.operand), str(e.value)]
        return total

    def _list(self, e: Expr) -> Est:
        total: Est = (0, 0)
        item: Est = (MAX if e.args else 0, 0)
        for elem in e.args:
            total = add(total, self.cost(elem))
            item = union(item, self.size_or_unknown(elem))
        self.entries[e.id] = ("list", ONE, item)
        return add(total, (LIST_CREATE, LIST_CREATE))

    def _map(self, e: Expr) -> Est:
        total: Est = (0, 0)
        key: Est = (MAX if e.entries else 0, 0)
        value = key
        for k, v in e.entries:
            total = add(add(total, self.cost(k)), self.cost(v))
            key = union(key, self.size_or_unknown(k))
            value = union(value, self.size_or_unknown(v))
        self.entries[e.id] = ("map", key, value)
        return add(total, (MAP_CREATE, MAP_CREATE))

    def _comprehension(self, e: Expr) -> Est:
        c = e.comp
        assert c is not None
        total = add(self.cost(c.iter_range), self.cost(c.accu_init))
        accu = _Var(self._path(c.accu_init), self.size(c.accu_init), self.entry(c.accu_init))
        self.locals.setdefault(c.accu_var, []).append(accu)
        names = self._push_iteration_vars(c)
        loop = self.cost(c.loop_cond)
        per_iteration = add(self.cost(c.loop_step), loop)
        for name in names:
            self.locals[name].pop()
        total = add(total, self.cost(c.result))
        self.locals[c.accu_var].pop()
        count = self.size_or_unknown(c.iter_range)
        total = add(total, mul(count, per_iteration))
        self._comprehension_size(e, c, count)
        return total

    def _push_iteration_vars(self, c: Comprehension) -> list[str]:
        entry = self.entry(c.iter_range)
        container = entry[0] if entry else self.type_of(c.iter_range).kind
        keys, values = (entry[1], entry[2]) if entry else (None, None)
        where = self._path(c.iter_range)
        in_list = container == "list"
        if c.iter_var2:
            bound = [
                (c.iter_var, "@indices" if in_list else "@keys", keys),
                (c.iter_var2, "@items" if in_list else "@values", values),
            ]
        else:
            bound = [(c.iter_var, "@items" if in_list else "@keys", values if in_list else keys)]
        for name, step, size in bound:
            self.locals.setdefault(name, []).append(_Var([*where, step], size, None))
        return [name for name, _, _ in bound]

    def _comprehension_size(self, e: Expr, c: Comprehension, count: Est) -> None:
        if c.accu_init.kind == "lit":
            literal = literal_size(c.accu_init)
            if literal is not None:
                self.sizes[e.id] = literal
        elif c.accu_init.kind in ("list", "map"):
            self.sizes[e.id] = count
            step = self.entry(c.loop_step)
            if step is not None:
                self.entries[e.id] = step

    def _call(self, e: Expr) -> Est:
        if e.value == "dyn" and len(e.args) == 1:  # dyn() passes its argument through
            (arg,) = e.args
            cost = add(ONE, self.cost(arg))
            if arg.id in self.sizes:
                self.sizes[e.id] = self.sizes[arg.id]
            entry = self.entry(arg)
            if entry is not None:
                self.entries[e.id] = entry
            return cost
        arg_costs = [self.cost(a) for a in e.args]
        overloads = self.checked.overloads.get(e.id, [])
        if not overloads:
            return 0, 0
        total = self.cost(e.operand) if e.operand is not None else (0, 0)
        fn: Est = (MAX, 0)
        result: Est | None = None
        for overload in overloads:
            cost, size = call_cost(self, e, overload, arg_costs)
            fn = union(fn, cost)
            if size is not None:
                result = size if result is None else union(result, size)
            result = self._index_result(e, overload, result)
        if result is not None:
            self.sizes[e.id] = result
        return add(total, fn)

    def _index_result(self, e: Expr, overload: str, result: Est | None) -> Est | None:
        if overload in ("index_list", "index_map") and e.args:
            entry = self.entry(e.args[0])
            result = entry[2] if entry else None
            step = "@items" if overload == "index_list" else "@values"
            self.paths[e.id] = [*self._path(e.args[0]), step]
        return result if result is not None else self.size(e)


def literal_size(e: Expr) -> Est | None:
    """``computeExprSize``: a literal's length, a literal list's or map's entry count."""
    if e.kind == "lit":
        length = len(e.value) if e.lit_type in ("string", "bytes") else 1
        return length, length
    if e.kind in ("list", "map"):
        count = len(e.args) if e.kind == "list" else len(e.entries)
        return count, count
    return None
