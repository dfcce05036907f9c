"""What each image ships of the project, and the source tree its wheel is built from.

The repository is one distribution, ``disagg`` (pyproject.toml): the operator, the worker
and the tools (``disagg up``, ``disagg bench``, the API emulator) for a developer's or a
CI machine. An image ships less: ``[tool.disagg.images.<image>]`` in pyproject.toml names
the modules it ships (``ships``, whole packages or modules, less ``leaves_out``) and the
extra its dependencies come from; every module of ours that those import, anywhere in a
file (lazy imports too), ships with them. The image's install (that extra only) must
import every module it ships: tests/test_ships.py checks it here, against a site that
holds only the extra's distributions, and tests/containers/test_images.py in the images.

    python scripts/ship.py IMAGE OUT    # write IMAGE's source tree to OUT (pip wheel OUT)

Standard library only: it runs in the image build's wheel stage.
"""

from __future__ import annotations

import ast
import shutil
import sys
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "disagg_operator": "operator/disagg_operator",
    "disagg_worker": "worker/disagg_worker",
    "disagg_contract": "contract/disagg_contract",
}


def config(root: Path = ROOT) -> dict[str, Any]:
    return tomllib.loads((root / "pyproject.toml").read_text())


def images(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    """image → its ``[tool.disagg.images.<image>]`` table."""
    found: dict[str, dict[str, Any]] = config(root)["tool"]["disagg"]["images"]
    return found


def file_of(module: str, root: Path = ROOT) -> Path | None:
    """The source file of one of our modules (a package's ``__init__.py``), or None."""
    top, _, rest = module.partition(".")
    if top not in FOLDERS:
        return None
    base = root / FOLDERS[top] / Path(*rest.split(".")) if rest else root / FOLDERS[top]
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def all_modules(root: Path = ROOT) -> list[str]:
    """Every module and package of ours, by import name."""
    out = []
    for top, folder in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.append(".".join((top, *parts)))
    return out


def imports_of(module: str, root: Path = ROOT) -> set[str]:
    """Our modules that ``module``'s file imports, anywhere in it."""
    path = file_of(module, root)
    assert path is not None, module
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # a module imports its packages too
                if file_of(".".join(parts[:i]), root) is not None:
                    found.add(".".join(parts[:i]))
    return found


def _within(module: str, prefixes: list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def shipped(image: str, root: Path = ROOT) -> list[str]:
    """The modules ``image`` ships: its ``ships`` less ``leaves_out``, and what they import."""
    table = images(root)[image]
    todo = [
        m
        for m in all_modules(root)
        if _within(m, table["ships"]) and not _within(m, table.get("leaves_out", []))
    ]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            parts = module.split(".")
            parents = {".".join(parts[:i]) for i in range(1, len(parts))}
            parents = {p for p in parents if file_of(p, root) is not None}
            todo += sorted((imports_of(module, root) | parents) - seen)
    return sorted(seen)


def stage(image: str, out: Path, root: Path = ROOT) -> list[str]:
    """Write the source tree of ``image``'s wheel to ``out``: its modules in their folders
    and pyproject.toml. The modules, by import name."""
    modules = shipped(image, root)
    for module in modules:
        source = file_of(module, root)
        assert source is not None
        target = out / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    shutil.copy2(root / "README.md", out / "README.md")  # pyproject's readme
    for top in FOLDERS.values():  # package data (py.typed, schemas, examples, shims)
        for data in (root / top).rglob("*"):
            if data.is_file() and data.suffix not in (".py", ".pyc"):
                rel = data.relative_to(root)
                if (out / rel.parent).is_dir():
                    shutil.copy2(data, out / rel)
    # setuptools finds the packages staged (pyproject.toml lists none)
    shutil.copy2(root / "pyproject.toml", out / "pyproject.toml")
    return modules


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in images():
        print(f"usage: ship.py {{{','.join(images())}}} OUT", file=sys.stderr)
        return 2
    modules = stage(argv[0], Path(argv[1]))
    print(f"{argv[0]}: {len(modules)} modules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
