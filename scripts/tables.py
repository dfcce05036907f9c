#!/usr/bin/env python3
"""The docs' tables of modules and of the engine interface, generated from the code: a
module or a method cannot come without its row, nor a row outlive what it names.

    scripts/tables.py            print the tables
    scripts/tables.py --write    rewrite the marked blocks in the docs

tests/docs/test_tables.py fails with this command when a block differs.

The blocks (their markers name them):

- ``worker-modules`` (docs/worker.md): every module and package of ``disagg_worker``.
- ``operator-packages`` (docs/operator.md): every package of ``disagg_operator``.
- ``controller-modules`` (docs/operator.md, the controller's design): every module and
  package of ``disagg_operator.controller``.
- ``engine-methods`` (docs/architecture.md): every public attribute and method of
  ``disagg_operator.engines.base.Engine``.

Where each column comes from (the files are parsed, nothing is imported):

- module, package: the path under ``worker/`` or ``operator/`` without ``.py``; a package
  ends in ``/`` and heads its modules, then come its packages, each in name order.
- role, answers: the docstring's first sentence (up to the first ``. ``; else its first
  paragraph), on one line, reST roles and literals as Markdown code. An ``Engine``
  attribute's docstring is the string literal under it.
- layer: ``pure`` for a module of a package that the contract "Pure packages import no I/O
  libraries" in pyproject.toml lists (its subpackages too). Any other module says its
  layer at the start of the paragraph after the summary: ``X layer`` is X (``I/O layer``:
  I/O; ``Effectful layer``: effectful), ``X shell`` is ``X shell``; none said is I/O. A
  package that is not pure shows the layers of the modules directly in it.
- used by: the subsystems (folders of ``operator/``; a top-level module is its own) whose
  modules outside ``disagg_operator.engines`` read the attribute off an engine, each with
  those modules. An engine is recognised by its spelling, no type is inferred: ``X.attr`` counts
  where X's source says ``engine`` (``engine.local``, ``settings.engine(spec).volumes``)
  or X is a name a loop takes from such an expression (``for n, e in engines.items()``),
  and a call of a function of engines/base.py counts as the reads in that function
  (``protocol_args(engine)`` reads ``pd_protocol``). A read by name alone would count a
  pod's ``volumes`` or a flag's ``metrics_port``; an engine held under another name is
  missed; a name too common to trace (:data:`UNTRACED`) says so.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
import tokenize
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run, or loaded by a test
import docblocks
import modules as project

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "scripts/tables.py"
COMMAND = f"{SCRIPT} --write"
ENGINE = "operator/disagg_operator/engines/base.py"
ARCH = "docs/architecture.md"
PURE = "Pure packages import no I/O libraries"
# Engine attributes not traced: every object has a ``name`` (an engine's process too, in a
# loop over "engines"), so its readers would be noise. Their docstrings say who reads them.
UNTRACED = frozenset({"name"})


# Text


def module_docstring(path: Path) -> str:
    """The module's docstring as ``ast.get_docstring`` gives it, from the file's first
    tokens (no table needs the rest parsed)."""
    skipped = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING)
    with path.open() as f:
        for token in tokenize.generate_tokens(f.readline):
            if token.type not in skipped:
                if token.type != tokenize.STRING:
                    return ""
                return inspect.cleandoc(ast.literal_eval(token.string))
    return ""


def summary(doc: str) -> str:
    """The first sentence of ``doc`` (else its first paragraph) on one line, as Markdown
    for a table cell."""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    sentence = re.split(r"(?<=\.) ", first, maxsplit=1)[0]
    sentence = re.sub(r":\w+:`~[^`]*?([^.`]+)`", r"`\1`", sentence)  # :class:`~a.B` → `B`
    sentence = re.sub(r":\w+:`([^`]+)`", r"`\1`", sentence)
    return sentence.replace("``", "`").replace("|", "\\|")


DECLARED = re.compile(r"([\w/-]+(?: [\w/-]+)?) (layer|shell)\b")


def declared_layer(doc: str) -> str:
    """``X layer`` → X, ``X shell`` → itself, where the paragraph after the summary begins;
    I/O where it says neither. A capitalised word is shown in lower case."""
    paragraphs = doc.strip().split("\n\n")
    found = DECLARED.match(paragraphs[1].strip()) if len(paragraphs) > 1 else None
    if found is None:
        return "I/O"
    name = found[1].lower() if found[1][1:].islower() else found[1]
    return f"{name} shell" if found[2] == "shell" else name


# Module tables


def pure_packages(root: Path = ROOT) -> list[str]:
    contracts = project.config(root)["tool"]["importlinter"]["contracts"]
    found: list[str] = next(c for c in contracts if c["name"] == PURE)["source_modules"]
    return found


class Module(NamedTuple):
    """A module or package of ours, as a row shows it."""

    name: str
    package: bool
    doc: str
    pure: bool

    @property
    def path(self) -> str:
        """``transfer/rules/plan``; a package's ``transfer/rules/``."""
        return "/".join(self.name.split(".")[1:]) + ("/" if self.package else "")

    @property
    def parent(self) -> str:
        return self.name.rpartition(".")[0]

    def order(self) -> tuple[tuple[int, str], ...]:
        """A package heads its modules, which come before its packages, each by name."""
        parts = self.name.split(".")[1:]
        if self.package:
            return (*((1, p) for p in parts), (-1, ""))
        return (*((1, p) for p in parts[:-1]), (0, parts[-1]))


def modules(package: str, root: Path = ROOT) -> list[Module]:
    """The modules and packages inside ``package`` (not itself), in table order."""
    pure = pure_packages(root)
    found = []
    for name in project.all_modules(root):
        path = project.file_of(name, root)
        if name.startswith(package + ".") and path is not None:
            within = any(name == p or name.startswith(p + ".") for p in pure)
            found.append(Module(name, path.name == "__init__.py", module_docstring(path), within))
    return sorted(found, key=Module.order)


def layer(module: Module, others: list[Module]) -> str:
    if module.pure:
        return "pure"
    if not module.package:
        return declared_layer(module.doc)
    inside = {layer(m, others) for m in others if m.parent == module.name and not m.package}
    return ", ".join(sorted(inside, key=str.lower))


def module_table(package: str, packages_only: bool = False, root: Path = ROOT) -> str:
    found = modules(package, root)
    lines = [f"| {'package' if packages_only else 'module'} | layer | role |", "|---|---|---|"]
    for m in found:
        if m.package or not packages_only:
            lines.append(f"| `{m.path}` | {layer(m, found)} | {summary(m.doc)} |")
    return "\n".join(lines)


# The engine interface


@functools.cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


class Member(NamedTuple):
    """A public attribute or method of ``Engine``."""

    name: str
    shown: str  # a method with its parameters
    doc: str


def _string(node: ast.stmt | None) -> str:
    """The string a statement is, if it is one (an attribute's docstring)."""
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return node.value.value if isinstance(node.value.value, str) else ""
    return ""


def engine_members(root: Path = ROOT) -> list[Member]:
    """``Engine``'s public attributes and methods, in the order the class declares them."""
    tree = parse(root / ENGINE)
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Engine").body
    found = []
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in node.args.posonlyargs + node.args.args][1:]
            if node.args.vararg or node.args.kwonlyargs:
                star = node.args.vararg
                params += [f"*{star.arg}" if star else "*", *(a.arg for a in node.args.kwonlyargs)]
            shown = f"{node.name}({', '.join(params)})"
            found.append(Member(node.name, shown, ast.get_docstring(node) or ""))
        elif isinstance(node, (ast.AnnAssign, ast.Assign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    found.append(Member(t.id, t.id, inspect.cleandoc(_string(after))))
    return [m for m in found if not m.name.startswith("_")]


def _engine_reads(tree: ast.AST, names: frozenset[str], helpers: dict[str, set[str]]) -> set[str]:
    """The attributes in ``names`` that ``tree`` reads off an engine (see the docstring)."""
    loops: set[str] = set()
    reads: list[ast.Attribute] = []
    calls: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)):
            if "engine" in ast.unparse(node.iter).lower():
                loops |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Attribute) and node.attr in names:
            reads.append(node)
        elif isinstance(node, ast.Call):
            calls.add(getattr(node.func, "id", getattr(node.func, "attr", "")))
    found = set()
    for read in reads:
        obj = ast.unparse(read.value)
        if "engine" in obj.lower() or obj in loops:
            found.add(read.attr)
    return found.union(*(helpers.get(c, set()) for c in calls))


def readers(names: frozenset[str], root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    """Attribute in ``names`` → subsystem → its modules that read it off an engine."""
    tree = parse(root / ENGINE)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    helpers = {f.name: _engine_reads(f, names, {}) for f in functions}
    found: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted((root / "operator" / "disagg_operator").rglob("*.py")):
        parts = path.relative_to(root / "operator" / "disagg_operator").with_suffix("").parts
        # a read names an engine: a file that never says "engine" has none
        if parts[0] != "engines" and "engine" in path.read_text():
            for attr in _engine_reads(parse(path), names, helpers):
                found[attr][parts[0]].add("/".join(parts[1:]))
    return found


def used_by(name: str, read: dict[str, dict[str, set[str]]]) -> str:
    """``render (objects, pods), validation (spec)``."""
    if name in UNTRACED:
        return "not traced (too common a name)"
    subsystems = read.get(name, {})
    shown = []
    for subsystem, inside in sorted(subsystems.items()):
        named = sorted(m for m in inside if m)
        shown.append(f"{subsystem} ({', '.join(named)})" if named else subsystem)
    return ", ".join(shown) or "—"


def engine_table(root: Path = ROOT) -> str:
    members = engine_members(root)
    read = readers(frozenset(m.name for m in members), root)
    lines = ["| method | used by | answers |", "|---|---|---|"]
    for m in members:
        lines.append(f"| `{m.shown}` | {used_by(m.name, read)} | {summary(m.doc)} |")
    return "\n".join(lines)


def blocks(root: Path = ROOT) -> list[docblocks.Block]:
    def modules_block(name: str, doc: str, package: str, packages_only: bool) -> docblocks.Block:
        body = module_table(package, packages_only, root)
        return docblocks.block(name, SCRIPT, "the docstrings and pyproject.toml", body, [doc])

    methods = engine_table(root)
    return [
        modules_block("worker-modules", "docs/worker.md", "disagg_worker", False),
        modules_block("operator-packages", "docs/operator.md", "disagg_operator", True),
        modules_block(
            "controller-modules", "docs/operator.md", "disagg_operator.controller", False
        ),
        docblocks.block("engine-methods", SCRIPT, f"{ENGINE} and operator/", methods, [ARCH]),
    ]


if __name__ == "__main__":
    sys.exit(docblocks.main(blocks(), sys.argv[1:]))
