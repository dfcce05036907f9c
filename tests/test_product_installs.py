"""The product imports with its own extras: every module of the installed product imports
with ``disagg[operator,worker]`` alone, each image's share with its extra alone, and no
module of the tools is in it.

A site is made of links to the distributions ``pip install 'disagg[EXTRAS]'`` installs (the
closure of the requirements, as installed here) and nothing else: no kmock, psutil or
pytest, which the tools and the tests add; no torch in the operator's, no kopf in the
worker's. Each module is imported alone in it (:mod:`tests.support.imports`). The images
themselves are checked the same way in tests/containers/test_images.py.
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.imports import import_each
from tests.support.scripts import load

modules = load("modules.py")
ROOT = Path(__file__).resolve().parents[1]
# Third-party libraries the parent imports before its forks, when the site holds them.
PRELOAD = ("pydantic", "yaml", "aiohttp", "kopf", "kubernetes", "torch", "numpy", "zmq", "msgspec")
# extras → (what must import with them, a library the site must not hold)
INSTALLS = {
    "operator": (("disagg_operator", "disagg_contract"), "torch"),
    "worker": (("disagg_worker", "disagg_contract", "disagg_operator.cli"), "kopf"),
    "operator,worker": (modules.PRODUCT, "kmock"),
}


def _key(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirement_closure(extras: str) -> set[str]:
    """The distributions ``pip install 'disagg[extras]'`` installs (as installed here)."""
    wanted = set(extras.split(","))
    todo = [
        Requirement(text).name
        for text in metadata.distribution("disagg").requires or []
        if Requirement(text).marker is None
        or any(Requirement(text).marker.evaluate({"extra": e}) for e in wanted)  # type: ignore[union-attr]
    ]
    seen: set[str] = {"disagg"}
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        seen.add(_key(name))
        for text in metadata.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen - {"disagg"}


def site_of(extras: str, folder: Path) -> Path:
    """A site folder: the product's packages and the extras' distributions, nothing else."""
    folder.mkdir(parents=True)
    for top in modules.PRODUCT:
        (folder / top).symlink_to(ROOT / modules.FOLDERS[top])
    for name in requirement_closure(extras):
        dist = metadata.distribution(name)
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            source = Path(str(dist.locate_file(top)))
            if top not in ("..", "__pycache__") and source.exists():
                link = folder / top
                if not link.exists():
                    link.symlink_to(source)
    return folder


def _names(tops: tuple[str, ...]) -> list[str]:
    found = []
    for name in modules.all_modules(tops=tuple({t.split(".")[0] for t in tops})):
        if any(name == t or name.startswith(t + ".") for t in tops):
            found.append(name)
    return found


@pytest.mark.parametrize("extras", sorted(INSTALLS))
def test_the_product_imports_with_its_own_extras(extras: str, tmp_path: Path) -> None:
    tops, absent = INSTALLS[extras]
    names = _names(tops)
    assert len(names) > 10
    site = site_of(extras, tmp_path / "site")
    found = import_each([*names, absent], PRELOAD, [site])
    assert found.pop(absent).startswith(f"ModuleNotFoundError: No module named '{absent}'")
    failed = {m: why for m, why in found.items() if why}
    assert not failed, f"disagg[{extras}]: " + "\n".join(
        f"{m}: {why}" for m, why in sorted(failed.items())
    )


def test_no_tools_module_is_in_the_product() -> None:
    """The images install the product's wheel, which holds its three packages only."""
    product = modules.all_modules(tops=modules.PRODUCT)
    assert not [m for m in product if m.split(".")[1:2] in (["bench"], ["emulator"], ["local"])]
    assert "disagg_tools" not in {m.split(".")[0] for m in product}
